package kopiarepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	kt "github.com/backstop-io/backstop/pkg/datamover/kopiarepo/kopiarepotest"
)

type forged = kt.Entry

// forgeSnapshot writes root as a complete snapshot of the data mover's
// source (its tags included) and returns its ID.
func forgeSnapshot(t *testing.T, r *Repository, root forged) string {
	t.Helper()
	id, err := kt.Forge(context.Background(), r.rep, sourceInfo(SourcePath("shop", "data")),
		map[string]string{RequesterTag: Requester, UploaderTag: Uploader}, root)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestRestoreForgedSnapshots: a snapshot written by whoever can write the
// bucket, with entries no upload of a volume makes (names with "..", a
// separator or an absolute path, a symlink written through, an entry of
// no known type, a file longer than its entry), restores nothing outside
// the target, and the restore says which entry and why; what a volume may
// hold (a symlink whose target is absolute, a set-group-ID directory) is
// restored, and a file's set-user-ID bit is not.
func TestRestoreForgedSnapshots(t *testing.T) {
	ctx := context.Background()
	r := newRepository(t, t.TempDir())

	type want struct {
		unsafe bool   // the restore fails with ErrUnsafeEntry
		failed bool   // it fails otherwise (the file system refuses)
		either bool   // it may fail or not (kopia reads one of two entries of the same name)
		quoted string // the error names this entry
	}
	// Each case writes into base/volume; base/outside is the directory a
	// forged name aims at.
	cases := []struct {
		name string
		root func(outside string) forged
		want want
		// prepare puts something in the volume first (a restore into a
		// volume that is not empty).
		prepare func(t *testing.T, volume string)
		check   func(t *testing.T, volume string, res RestoreResult)
	}{
		{name: "dot-dot name", want: want{unsafe: true, quoted: "../outside/escape"},
			root: func(string) forged { return kt.Dir("", kt.File("ok", "ok"), kt.File("../outside/escape", "pwned")) }},
		{name: "name ..", want: want{unsafe: true, quoted: ".."},
			root: func(string) forged { return kt.Dir("", kt.Dir("..", kt.File("escape", "pwned"))) }},
		{name: "absolute name", want: want{unsafe: true},
			root: func(outside string) forged { return kt.Dir("", kt.File(filepath.Join(outside, "escape"), "pwned")) }},
		{name: "name with a separator", want: want{unsafe: true, quoted: "sub/../../outside/escape"},
			root: func(string) forged { return kt.Dir("", kt.File("sub/../../outside/escape", "pwned")) }},
		{name: "empty name", want: want{unsafe: true},
			root: func(string) forged { return kt.Dir("", kt.File("", "pwned")) }},
		{name: "empty directory name", want: want{unsafe: true},
			root: func(string) forged { return kt.Dir("", kt.Dir("", kt.File("x", "pwned"))) }},
		{name: "NUL in a name", want: want{unsafe: true},
			root: func(string) forged { return kt.Dir("", kt.File("a\x00b", "pwned")) }},
		{name: "device", want: want{failed: true},
			root: func(string) forged {
				return kt.Dir("", forged{Name: "sda", Type: "c", Mode: os.ModeDevice | os.ModeCharDevice | 0o666, Data: "x"})
			}},
		{name: "a directory written through a symlink of the same name", want: want{either: true},
			root: func(outside string) forged {
				return kt.Dir("", kt.Symlink("link", outside), kt.Dir("link", kt.File("escape", "pwned")))
			}},
		{name: "a file written through a symlink of the same name", want: want{either: true},
			root: func(outside string) forged {
				return kt.Dir("", kt.Symlink("link", filepath.Join(outside, "escape")), kt.File("link", "pwned"))
			}},
		{name: "a file through a relative symlink out", want: want{either: true},
			root: func(string) forged {
				return kt.Dir("", kt.Symlink("up", "../outside"), kt.Dir("up", kt.File("escape", "pwned")))
			}},
		{name: "a directory over a symlink the volume holds", want: want{failed: true},
			prepare: func(t *testing.T, volume string) {
				if err := os.Symlink("../outside", filepath.Join(volume, "up")); err != nil {
					t.Fatal(err)
				}
			},
			root: func(string) forged { return kt.Dir("", kt.Dir("up", kt.File("escape", "pwned"))) }},
		{name: "a file over a symlink the volume holds (the symlink replaced)",
			prepare: func(t *testing.T, volume string) {
				if err := os.Symlink("../outside/escape", filepath.Join(volume, "f")); err != nil {
					t.Fatal(err)
				}
			},
			root: func(string) forged { return kt.Dir("", kt.File("f", "pwned")) },
			check: func(t *testing.T, volume string, _ RestoreResult) {
				if st, err := os.Lstat(filepath.Join(volume, "f")); err != nil || !st.Mode().IsRegular() {
					t.Errorf("f: %v, %v; want the file written in place of the symlink", st, err)
				}
			}},
		{name: "restored again over what a run cut short wrote",
			prepare: func(t *testing.T, volume string) {
				if err := os.MkdirAll(filepath.Join(volume, "d"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(volume, "d", "f"), []byte("half"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			root: func(string) forged { return kt.Dir("", kt.Dir("d", kt.File("f", "whole"))) },
			check: func(t *testing.T, volume string, _ RestoreResult) {
				if got, err := os.ReadFile(filepath.Join(volume, "d", "f")); err != nil || string(got) != "whole" {
					t.Errorf("d/f: %q, %v; want it written again", got, err)
				}
			}},
		{name: "a file longer than its entry", want: want{unsafe: true, quoted: "big"},
			root: func(string) forged {
				f := kt.File("big", "0123456789")
				f.Size = 3
				return kt.Dir("", f)
			}},
		{name: "a file shorter than its entry", want: want{unsafe: true, quoted: "short"},
			root: func(string) forged {
				f := kt.File("short", "0123")
				f.Size = 1 << 40
				return kt.Dir("", f)
			}},
		{name: "root is a file", want: want{unsafe: true},
			root: func(string) forged { return kt.File("", "pwned") }},
		{name: "symlinks kept as data, set-ID bits of files dropped",
			root: func(outside string) forged {
				suid := kt.File("su", "#!/bin/sh\n")
				suid.Mode = os.ModeSetuid | os.ModeSetgid | 0o755
				shared := kt.Dir("shared", kt.File("f", "x"))
				shared.Mode = os.ModeSetgid | 0o775
				return kt.Dir("", kt.Symlink("tblspc", filepath.Join(outside, "escape")), kt.Symlink("rel", "shared/f"), suid, shared)
			},
			check: func(t *testing.T, volume string, res RestoreResult) {
				if got, err := os.Readlink(filepath.Join(volume, "tblspc")); err != nil || filepath.Base(got) != "escape" || !filepath.IsAbs(got) {
					t.Errorf("symlink tblspc: %q, %v", got, err)
				}
				if got, err := os.ReadFile(filepath.Join(volume, "rel")); err != nil || string(got) != "x" {
					t.Errorf("through symlink rel: %q, %v", got, err)
				}
				st, err := os.Stat(filepath.Join(volume, "su"))
				if err != nil || st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 || st.Mode().Perm() != 0o755 {
					t.Errorf("su: mode %v, %v; want -rwxr-xr-x", st.Mode(), err)
				}
				if res.SetIDFiles != 1 {
					t.Errorf("SetIDFiles %d, want 1", res.SetIDFiles)
				}
				st, err = os.Stat(filepath.Join(volume, "shared"))
				if err != nil || st.Mode()&os.ModeSetgid == 0 {
					t.Errorf("shared: mode %v, %v; want set-group-ID kept", st.Mode(), err)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			volume, outside := filepath.Join(base, "volume"), filepath.Join(base, "outside")
			for _, d := range []string{volume, outside} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if c.prepare != nil {
				c.prepare(t, volume)
			}
			id := forgeSnapshot(t, r, c.root(outside))
			res, err := r.Restore(ctx, id, volume, nil)
			switch {
			case c.want.unsafe && !errors.Is(err, ErrUnsafeEntry):
				t.Errorf("restore: %v, want %v", err, ErrUnsafeEntry)
			case c.want.failed && err == nil:
				t.Errorf("restore succeeded, want an error")
			case !c.want.unsafe && !c.want.failed && !c.want.either && err != nil:
				t.Errorf("restore: %v", err)
			}
			if c.want.quoted != "" && (err == nil || !containsQuoted(err.Error(), c.want.quoted)) {
				t.Errorf("restore: %v, want it to name %q", err, c.want.quoted)
			}
			if err != nil {
				t.Logf("the restore says: %v", err)
			}
			// Nothing outside the volume: base holds volume and outside,
			// and outside nothing.
			if names := dirNames(t, base); !slices.Equal(names, []string{"outside", "volume"}) {
				t.Errorf("the restore left %v beside the volume", names)
			}
			if names := dirNames(t, outside); len(names) != 0 {
				t.Errorf("the restore wrote %v outside the volume", names)
			}
			if c.check != nil {
				c.check(t, volume, res)
			}
		})
	}
}

// containsQuoted reports whether s names name as %q quotes it.
func containsQuoted(s, name string) bool { return strings.Contains(s, fmt.Sprintf("%q", name)) }

// dirNames lists dir's entries.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
