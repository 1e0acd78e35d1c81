package verify

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/backstop-io/backstop/pkg/archive/archivetest"
	"github.com/backstop-io/backstop/pkg/encryption"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

const backupName = "b"

// version is a tarball's format version entry.
var version = archivetest.Entry{Name: "metadata/version", Data: []byte("1.1.0\n")}

// writeBackup writes a backup of items ConfigMaps (see writeBackupWith).
func writeBackup(t *testing.T, dir string, wrap func(objectstore.Store) objectstore.Store, items int) (objectstore.Store, objectstore.Layout) {
	t.Helper()
	entries := []archivetest.Entry{version}
	for i := range items {
		name := fmt.Sprintf("cm-%03d", i)
		entries = append(entries, archivetest.Item("configmaps", "v1", "app", name,
			[]byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"app"},"data":{"k":"value %d"}}`, name, i))))
	}
	return writeBackupWith(t, dir, wrap, archivetest.Build(t, entries...))
}

// writeBackupWith writes a backup's objects (tarball and records) as the
// backup engine does (through objectstore.Hashing, the manifest last) into
// dir, through wrap's store (nil: the filesystem's own), and returns the
// store verifications read.
func writeBackupWith(t testing.TB, dir string, wrap func(objectstore.Store) objectstore.Store, tarball []byte) (objectstore.Store, objectstore.Layout) {
	t.Helper()
	ctx := context.Background()
	fs, err := objectstore.NewFilesystem(dir)
	if err != nil {
		t.Fatal(err)
	}
	var store objectstore.Store = fs
	if wrap != nil {
		store = wrap(fs)
	}
	layout := objectstore.NewLayout("")
	h := objectstore.NewHashing(store)
	bdir := layout.BackupDir(backupName)
	for name, data := range map[string][]byte{
		backupName + ".tar.gz":                tarball,
		backupName + "-logs.gz":               []byte("gzipped log lines"),
		backupName + "-resource-list.json.gz": []byte(`{"v1/ConfigMap":["app/cm-000"]}`),
		backupName + "-results.gz":            []byte(`{}`),
		"velero-backup.json":                  []byte(`{"kind":"Backup"}`),
	} {
		if err := h.Put(ctx, bdir+name, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := objectstore.MakeManifest(ctx, h, bdir, backupName)
	if err != nil {
		t.Fatal(err)
	}
	if err := objectstore.PutManifest(ctx, h, layout, m); err != nil {
		t.Fatal(err)
	}
	return store, layout
}

func verifyBackup(t *testing.T, store objectstore.Store, layout objectstore.Layout) *Report {
	t.Helper()
	r := &Report{}
	if err := Objects(context.Background(), store, layout, backupName, r); err != nil {
		t.Fatalf("verification did not happen: %v", err)
	}
	return r
}

// flip changes one byte of a file in its middle.
func flip(t *testing.T, file string) (restore func()) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	changed := bytes.Clone(data)
	changed[len(changed)/2] ^= 0x01
	if err := os.WriteFile(file, changed, 0o600); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func encryptedWith(t testing.TB) func(objectstore.Store) objectstore.Store {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := encryption.ParseKeys([]byte(id.String()+"\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	return func(s objectstore.Store) objectstore.Store { return objectstore.Encrypted{Store: s, Keys: keys} }
}

// TestObjects: a backup as written verifies with its counts; a byte
// changed in any of its objects (the manifest too), in a plain and in an
// encrypted location, is a problem naming the object; so are an object
// missing, one added, and a tarball whose item does not decode. A backup
// without a manifest is read and decoded all the same.
func TestObjects(t *testing.T) {
	for _, loc := range []struct {
		name string
		wrap func(objectstore.Store) objectstore.Store
	}{
		{"plain", nil},
		{"encrypted", encryptedWith(t)},
	} {
		t.Run(loc.name, func(t *testing.T) {
			root := t.TempDir()
			store, layout := writeBackup(t, root, loc.wrap, 20)
			bdir := filepath.Join(root, "backups", backupName)
			r := verifyBackup(t, store, layout)
			if r.ProblemCount != 0 || r.Objects != 5 || r.Items != 20 || r.Bytes == 0 {
				t.Fatalf("as written: %+v", r)
			}
			files, err := os.ReadDir(bdir)
			if err != nil || len(files) != 6 {
				t.Fatalf("the backup's files: %v, %v", files, err)
			}
			for _, f := range files {
				t.Run("a byte changed in "+f.Name(), func(t *testing.T) {
					defer flip(t, filepath.Join(bdir, f.Name()))()
					r := verifyBackup(t, store, layout)
					if r.ProblemCount == 0 || !strings.HasPrefix(r.Problems[0], f.Name()+":") {
						t.Errorf("problems %q, want one naming %s", r.Problems, f.Name())
					}
				})
			}
			t.Run("as written again", func(t *testing.T) {
				if r := verifyBackup(t, store, layout); r.ProblemCount != 0 {
					t.Fatalf("problems: %q", r.Problems)
				}
			})
			t.Run("an object missing", func(t *testing.T) {
				logs := filepath.Join(bdir, backupName+"-logs.gz")
				data, err := os.ReadFile(logs)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(logs); err != nil {
					t.Fatal(err)
				}
				defer os.WriteFile(logs, data, 0o600)
				if r := verifyBackup(t, store, layout); r.ProblemCount != 1 || r.Problems[0] != backupName+"-logs.gz: missing" {
					t.Errorf("problems %q", r.Problems)
				}
			})
			t.Run("an object added", func(t *testing.T) {
				extra := filepath.Join(bdir, "planted.gz")
				if err := os.WriteFile(extra, []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
				defer os.Remove(extra)
				if r := verifyBackup(t, store, layout); r.ProblemCount != 1 || !strings.HasPrefix(r.Problems[0], "planted.gz: not in the manifest") {
					t.Errorf("problems %q", r.Problems)
				}
			})
		})
	}
	t.Run("an item that does not decode, in a tarball the manifest matches", func(t *testing.T) {
		root := t.TempDir()
		store, layout := writeBackup(t, root, nil, 0)
		ctx := context.Background()
		bdir := layout.BackupDir(backupName)
		bad := archivetest.Build(t, version, archivetest.Item("configmaps", "v1", "app", "broken", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"broken"`)),
			archivetest.Item("secrets", "v1", "app", "s", []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"other","namespace":"app"}}`)))
		if err := store.Put(ctx, bdir+backupName+".tar.gz", bytes.NewReader(bad)); err != nil {
			t.Fatal(err)
		}
		m, err := objectstore.MakeManifest(ctx, store, bdir, backupName)
		if err != nil {
			t.Fatal(err)
		}
		if err := objectstore.PutManifest(ctx, store, layout, m); err != nil {
			t.Fatal(err)
		}
		r := verifyBackup(t, store, layout)
		if r.ProblemCount != 1 || !strings.Contains(r.Problems[0], "b.tar.gz: item configmaps app/broken: unexpected end of JSON input") {
			t.Errorf("problems %q", r.Problems)
		}
	})
	t.Run("no manifest", func(t *testing.T) {
		root := t.TempDir()
		store, layout := writeBackup(t, root, nil, 1)
		if err := os.Remove(filepath.Join(root, "backups", backupName, objectstore.ManifestFile)); err != nil {
			t.Fatal(err)
		}
		// Read and decoded all the same, but not checked.
		if r := verifyBackup(t, store, layout); r.ProblemCount != 0 || !r.NoManifest || r.Objects != 5 || r.Items != 1 {
			t.Errorf("%+v", r)
		}
		tarball := filepath.Join(root, "backups", backupName, backupName+".tar.gz")
		data, err := os.ReadFile(tarball)
		if err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(tarball, data, 0o600)
		// In the middle (the deflate stream) and in gzip's CRC-32, after
		// the tar stream's end.
		for _, at := range []int{len(data) / 2, len(data) - 6} {
			changed := bytes.Clone(data)
			changed[at] ^= 0x01
			if err := os.WriteFile(tarball, changed, 0o600); err != nil {
				t.Fatal(err)
			}
			if r := verifyBackup(t, store, layout); r.ProblemCount != 1 || !strings.HasPrefix(r.Problems[0], backupName+".tar.gz: ") {
				t.Errorf("a byte changed in the tarball at %d of %d: problems %q", at, len(data), r.Problems)
			}
		}
	})
}

// TestProblemsBounded: the report lists the first problems and counts all.
func TestProblemsBounded(t *testing.T) {
	r := &Report{}
	for i := range 25 {
		r.Problem("problem %d", i)
	}
	if r.ProblemCount != 25 || len(r.Problems) != 10 || r.Problems[9] != "problem 9" {
		t.Errorf("%d problems, listed %q", r.ProblemCount, r.Problems)
	}
}

// TestDecodeItemsFirstFailure: of a tarball's items that do not decode,
// the first in the tarball is the one reported, whichever of the decoding
// goroutines meets one first (every run: the report does not depend on
// scheduling). Four decoders, whatever GOMAXPROCS says.
func TestDecodeItemsFirstFailure(t *testing.T) {
	defer func(n int) { decoders = n }(decoders)
	decoders = 4
	entries := []archivetest.Entry{version}
	for i := range 40 {
		data := fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%d","namespace":"app"}}`, i)
		switch i {
		case 17:
			data = []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-17"`)
		case 23, 31:
			data = []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"elsewhere","namespace":"app"}}`)
		}
		entries = append(entries, archivetest.Item("configmaps", "v1", "app", fmt.Sprintf("cm-%d", i), data))
	}
	tarball := archivetest.Build(t, entries...)
	for run := range 100 {
		err := decodeItems(bytes.NewReader(tarball), &Report{})
		if err == nil || !strings.Contains(err.Error(), "item configmaps app/cm-17:") {
			t.Fatalf("run %d: %v, want the first item that does not decode (cm-17)", run, err)
		}
	}
}
