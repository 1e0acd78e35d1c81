package objectstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func sumOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// TestManifest: the manifest lists a backup's objects with the size and
// sha256 of what was written, those written through the store as
// recorded and the others read back; an object rewritten is listed as
// last written, one deleted not at all; it reads back as written.
func TestManifest(t *testing.T) {
	ctx := context.Background()
	fs, err := NewFilesystem(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	layout := NewLayout("prefix")
	dir := layout.BackupDir("b")
	// Written before the server restarted: not through this store.
	if err := fs.Put(ctx, dir+"b-logs.gz", strings.NewReader("log")); err != nil {
		t.Fatal(err)
	}
	h := NewHashing(fs)
	for key, data := range map[string]string{dir + "b.tar.gz": "first", dir + "velero-backup.json": "{}", dir + "gone": "x",
		layout.BackupDir("b2") + "velero-backup.json": "other backup"} {
		if err := h.Put(ctx, key, strings.NewReader(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Put(ctx, dir+"b.tar.gz", strings.NewReader("rewritten")); err != nil {
		t.Fatal(err)
	}
	if err := h.Delete(ctx, dir+"gone"); err != nil {
		t.Fatal(err)
	}
	m, err := MakeManifest(ctx, h, dir, "b")
	if err != nil {
		t.Fatal(err)
	}
	want := []ManifestObject{{"b-logs.gz", 3, sumOf("log")}, {"b.tar.gz", 9, sumOf("rewritten")}, {"velero-backup.json", 2, sumOf("{}")}}
	if !reflect.DeepEqual(m.Objects, want) {
		t.Errorf("manifest objects\n got %+v\nwant %+v", m.Objects, want)
	}
	if err := PutManifest(ctx, h, layout, m); err != nil {
		t.Fatal(err)
	}
	// The manifest does not list itself when made again, all read back.
	if again, err := MakeManifest(ctx, fs, dir, "b"); err != nil || !reflect.DeepEqual(again.Objects, want) {
		t.Errorf("the manifest made again: %+v, %v", again, err)
	}
	got, err := GetManifest(ctx, fs, layout, "b", 1<<20)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Errorf("read back %+v, %v; want %+v", got, err, m)
	}
	if _, err := GetManifest(ctx, fs, layout, "b2", 1<<20); !errors.Is(err, ErrNoManifest) {
		t.Errorf("a backup without a manifest: %v, want ErrNoManifest", err)
	}
	if _, err := GetManifest(ctx, fs, layout, "b", 10); err == nil || !strings.Contains(err.Error(), "over 10 bytes") {
		t.Errorf("a manifest over the limit: %v", err)
	}
	// A manifest of another backup, copied here, is refused.
	if err := PutManifest(ctx, fs, layout, &Manifest{APIVersion: ManifestAPIVersion, Kind: ManifestKind, Backup: "b", Objects: nil}); err != nil {
		t.Fatal(err)
	}
	data := read(t, fs, layout.ManifestKey("b"))
	if err := fs.Put(ctx, layout.ManifestKey("b2"), strings.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if _, err := GetManifest(ctx, fs, layout, "b2", 1<<20); err == nil || !strings.Contains(err.Error(), `of backup "b"`) {
		t.Errorf("another backup's manifest: %v", err)
	}
}

// TestHashingCutUpload: an upload whose source fails records nothing.
func TestHashingCutUpload(t *testing.T) {
	ctx := context.Background()
	fs, err := NewFilesystem(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := NewHashing(fs)
	if err := h.Put(ctx, "backups/b/b.tar.gz", strings.NewReader("whole")); err != nil {
		t.Fatal(err)
	}
	if err := h.Put(ctx, "backups/b/b.tar.gz", &failingReader{n: 100}); err == nil {
		t.Fatal("an upload whose source failed succeeded")
	}
	if _, ok := h.sums["backups/b/b.tar.gz"]; ok {
		t.Error("a failed upload's record kept")
	}
}
