package objectstore

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

func TestLayoutKeys(t *testing.T) {
	cases := []struct {
		prefix string
		kind   velerov1.DownloadTargetKind
		name   string
		want   string
	}{
		{"", velerov1.DownloadTargetKindBackupContents, "b1", "backups/b1/b1.tar.gz"},
		{"", velerov1.DownloadTargetKindBackupLog, "b1", "backups/b1/b1-logs.gz"},
		{"cluster-a", velerov1.DownloadTargetKindBackupResults, "b1", "cluster-a/backups/b1/b1-results.gz"},
		{"/cluster-a/", velerov1.DownloadTargetKindBackupResourceList, "b1", "cluster-a/backups/b1/b1-resource-list.json.gz"},
		{"", velerov1.DownloadTargetKindBackupItemOperations, "b1", "backups/b1/b1-itemoperations.json.gz"},
		{"", velerov1.DownloadTargetKindBackupVolumeSnapshots, "b1", "backups/b1/b1-volumesnapshots.json.gz"},
		{"", velerov1.DownloadTargetKindCSIBackupVolumeSnapshots, "b1", "backups/b1/b1-csi-volumesnapshots.json.gz"},
		{"", velerov1.DownloadTargetKindCSIBackupVolumeSnapshotContents, "b1", "backups/b1/b1-csi-volumesnapshotcontents.json.gz"},
		{"", velerov1.DownloadTargetKindBackupVolumeInfos, "b1", "backups/b1/b1-volumeinfo.json.gz"},
		{"", velerov1.DownloadTargetKindRestoreLog, "r1", "restores/r1/restore-r1-logs.gz"},
		{"", velerov1.DownloadTargetKindRestoreResults, "r1", "restores/r1/restore-r1-results.gz"},
		{"", velerov1.DownloadTargetKindRestoreResourceList, "r1", "restores/r1/restore-r1-resource-list.json.gz"},
		{"", velerov1.DownloadTargetKindRestoreItemOperations, "r1", "restores/r1/restore-r1-itemoperations.json.gz"},
		{"", velerov1.DownloadTargetKindRestoreVolumeInfo, "r1", "restores/r1/r1-volumeinfo.json.gz"},
	}
	for _, c := range cases {
		got, err := NewLayout(c.prefix).Key(c.kind, c.name)
		if err != nil || got != c.want {
			t.Errorf("Key(%q, %s, %s) = %q, %v; want %q", c.prefix, c.kind, c.name, got, err, c.want)
		}
	}
	if _, err := NewLayout("").Key("Bogus", "x"); err == nil {
		t.Errorf("unknown kind: no error")
	}
	if got := NewLayout("p").BackupMetadataKey("b1"); got != "p/backups/b1/velero-backup.json" {
		t.Errorf("BackupMetadataKey = %q", got)
	}
}

func TestFilesystem(t *testing.T) {
	ctx := context.Background()
	fs, err := NewFilesystem(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Get(ctx, "backups/b1/b1-logs.gz"); !errors.Is(err, ErrNotFound) {
		t.Errorf("get of a missing object: %v, want ErrNotFound", err)
	}
	for _, k := range []string{"backups/b1/b1-logs.gz", "backups/b1/velero-backup.json", "restores/r1/restore-r1-logs.gz"} {
		if err := fs.Put(ctx, k, strings.NewReader("data of "+k)); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	if err := fs.Put(ctx, "backups/b1/b1-logs.gz", strings.NewReader("second")); err != nil {
		t.Fatalf("overwrite: %v", err)
	}
	r, err := fs.Get(ctx, "backups/b1/b1-logs.gz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r)
	r.Close()
	if string(b) != "second" {
		t.Errorf("get after overwrite = %q", b)
	}
	keys, err := fs.List(ctx, "backups/")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"backups/b1/b1-logs.gz", "backups/b1/velero-backup.json"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("list = %v, want %v", keys, want)
	}
	if err := fs.Delete(ctx, "backups/b1/b1-logs.gz"); err != nil {
		t.Fatal(err)
	}
	if err := fs.Delete(ctx, "backups/b1/b1-logs.gz"); err != nil {
		t.Errorf("deleting a missing object: %v", err)
	}
	for _, bad := range []string{"", "../escape", "backups/../../escape", "/abs", "dir/", "a//b"} {
		if _, err := fs.Get(ctx, bad); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("key %q: got %v, want an invalid-key error", bad, err)
		}
	}
	if _, err := NewFilesystem("relative/dir"); err == nil {
		t.Errorf("relative root accepted")
	}
}

func TestFilesystemProbe(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fs, _ := NewFilesystem(dir + "/not/yet/there")
	if err := fs.Probe(ctx); err != nil {
		t.Errorf("probe of a creatable directory: %v", err)
	}
	if keys, _ := fs.List(ctx, ""); len(keys) != 0 {
		t.Errorf("the probe left %v behind", keys)
	}
	// A path under a regular file cannot be a directory.
	if err := os.WriteFile(dir+"/file", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad, _ := NewFilesystem(dir + "/file/sub")
	if err := bad.Probe(ctx); err == nil {
		t.Errorf("probe under a regular file succeeded")
	}
}

// TestDeletePrefixRemovesInterruptedUploads: deleting a prefix removes the
// objects but those kept, and the temporary file of a Put a crash
// interrupted, also through the stores over the filesystem's (an encrypted
// location's, a backup's that records its manifest); other prefixes are
// left alone.
func TestDeletePrefixRemovesInterruptedUploads(t *testing.T) {
	keys := testKeys(t)
	for name, over := range map[string]func(Store) Store{
		"the filesystem's":                         func(s Store) Store { return s },
		"an encrypted location's":                  func(s Store) Store { return Encrypted{Store: s, Keys: keys} },
		"a backup's, over an encrypted location's": func(s Store) Store { return NewHashing(Encrypted{Store: s, Keys: keys}) },
	} {
		t.Run(name, func(t *testing.T) { testDeletePrefix(t, over) })
	}
}

func testDeletePrefix(t *testing.T, over func(Store) Store) {
	root := t.TempDir()
	filesystem, err := NewFilesystem(root)
	if err != nil {
		t.Fatal(err)
	}
	fs := over(filesystem)
	ctx := context.Background()
	for _, k := range []string{"backups/b1/b1.tar.gz", "backups/b1/b1-logs.gz", "backups/b2/b2.tar.gz"} {
		if err := fs.Put(ctx, k, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
	for _, leftover := range []string{"backups/b1/.put-123", "backups/b2/.put-456"} {
		if err := os.WriteFile(filepath.Join(root, leftover), []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := DeletePrefix(ctx, fs, "backups/b1/", "backups/b1/b1-logs.gz"); err != nil {
		t.Fatal(err)
	}
	var left []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			left = append(left, rel)
		}
		return nil
	})
	want := []string{"backups/b1/b1-logs.gz", "backups/b2/.put-456", "backups/b2/b2.tar.gz"}
	if strings.Join(left, ",") != strings.Join(want, ",") {
		t.Errorf("left %v, want %v", left, want)
	}
}
