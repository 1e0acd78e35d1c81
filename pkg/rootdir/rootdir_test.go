package rootdir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backstop-io/backstop/pkg/rootdir/rootdirtest"
)

// hostile are names an attacker sends for one path element.
var hostile = append([]string{""}, rootdirtest.Hostile...)

func TestName(t *testing.T) {
	for _, s := range hostile {
		if err := Name(s); err == nil {
			t.Errorf("Name(%q) accepted", s)
		}
	}
	// Unicode lookalikes of dots and slashes are ordinary characters: one
	// element, harmless.
	for _, s := range append([]string{"vm-backups", "a.b", "pvc1", strings.Repeat("a", MaxName)}, rootdirtest.Lookalikes...) {
		if err := Name(s); err != nil {
			t.Errorf("Name(%q): %v", s, err)
		}
	}
}

// setup is a root with a file inside, a secret beside it and a symlink
// inside pointing at the secret's directory.
func setup(t *testing.T) (Dir, string) {
	t.Helper()
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(root, "ns", "pvc", "b1"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "ns", "link")); err != nil {
		t.Fatal(err)
	}
	return Dir(root), filepath.Join(outside, "secret")
}

func TestDirRefusesEveryWayOut(t *testing.T) {
	d, secret := setup(t)
	for _, s := range hostile {
		t.Run("join "+s, func(t *testing.T) {
			if p, err := d.Join("ns", s, "b1"); err == nil {
				t.Errorf("Join(ns, %q, b1) = %s", s, p)
			}
		})
		t.Run("remove "+s, func(t *testing.T) {
			if err := d.RemoveAll("ns", s); err == nil {
				t.Errorf("RemoveAll(ns, %q) accepted", s)
			}
		})
		t.Run("mkdir "+s, func(t *testing.T) {
			if _, err := d.MkdirAll(0o755, "ns", s); err == nil {
				t.Errorf("MkdirAll(ns, %q) accepted", s)
			}
		})
	}
	t.Run("a symlink inside leading out", func(t *testing.T) {
		if p, err := d.Join("ns", "link", "secret"); err == nil {
			t.Errorf("Join through the symlink = %s", p)
		}
		if err := d.RemoveAll("ns", "link", "secret"); err == nil {
			t.Error("RemoveAll through the symlink accepted")
		}
		if _, err := d.MkdirAll(0o755, "ns", "link", "x"); err == nil {
			t.Error("MkdirAll through the symlink accepted")
		}
		// The symlink itself goes, not what it points at.
		if err := d.RemoveAll("ns", "link"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(secret); err != nil {
			t.Errorf("the file outside the root: %v", err)
		}
	})
	t.Run("the root itself is never removed", func(t *testing.T) {
		if err := d.RemoveAll(); err == nil {
			t.Error("RemoveAll() accepted")
		}
		if _, err := os.Stat(string(d)); err != nil {
			t.Error(err)
		}
	})
}

func TestDirInside(t *testing.T) {
	d, _ := setup(t)
	p, err := d.Join("ns", "pvc", "b1")
	if err != nil || p != filepath.Join(string(d), "ns", "pvc", "b1") {
		t.Fatalf("Join = %s, %v", p, err)
	}
	if p, err := d.Join("ns", "pvc", "missing", "deeper"); err != nil || !strings.HasPrefix(p, string(d)) {
		t.Fatalf("Join of a missing path = %s, %v", p, err)
	}
	p, err = d.MkdirAll(0o755, "ns2", "pvc")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
		t.Fatalf("MkdirAll made no directory %s: %v", p, err)
	}
	entries, err := d.ReadDir("ns", "pvc")
	if err != nil || len(entries) != 1 || entries[0].Name() != "b1" {
		t.Fatalf("ReadDir = %v, %v", entries, err)
	}
	if err := d.RemoveAll("ns", "pvc", "b1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(string(d), "ns", "pvc", "b1")); !os.IsNotExist(err) {
		t.Errorf("b1 still there: %v", err)
	}
	if err := d.RemoveAll("ns", "pvc", "b1"); err != nil {
		t.Errorf("removing a missing path: %v", err)
	}
}

func TestClean(t *testing.T) {
	for p, want := range map[string]bool{
		"/data/volumes/ns/pvc/b1/vda.qcow2": true, "data/volumes/ns/pvc/b1": true,
		"": false, "/data/../etc": false, "../x": false, "/a//b": false, "/a/b/": false, "/a/\x00": false, "/a/./b": false,
	} {
		if Clean(p) != want {
			t.Errorf("Clean(%q) = %v, want %v", p, !want, want)
		}
	}
}
