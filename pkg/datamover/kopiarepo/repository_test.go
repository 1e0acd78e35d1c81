package kopiarepo

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/backstop-io/backstop/test/integration/framework"
	"github.com/kopia/kopia/repo/format"
	"github.com/kopia/kopia/repo/maintenance"
)

// writeTree writes files (relative path → content) under dir.
func writeTree(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// newRepository creates a repository in the directory dir (the test's
// password), closed when the test ends.
func newRepository(t *testing.T, dir string) *Repository {
	t.Helper()
	ctx := context.Background()
	st, err := FilesystemStorage(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, Config{Storage: st, Password: "static-passw0rd", Dir: t.TempDir(), Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(ctx) })
	return r
}

// readTree reads every regular file under dir.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files, err := framework.ReadTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func sameTree(t *testing.T, what string, want, got map[string][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d files, want %d", what, len(got), len(want))
	}
	for name, data := range want {
		if !bytes.Equal(got[name], data) {
			t.Errorf("%s: %s differs (%d bytes, want %d)", what, name, len(got[name]), len(data))
		}
	}
}

// TestRepository: a volume's files uploaded into a new repository in
// Velero's layout, uploaded again after a small change (only the change is
// written), each snapshot restored byte for byte, the repository opened
// again from another directory (and refused with a wrong password), a
// snapshot forgotten.
func TestRepository(t *testing.T) {
	ctx := context.Background()
	bucket := t.TempDir()
	st, err := FilesystemStorage(ctx, filepath.Join(bucket, Prefix("/backups/", "shop")))
	if err != nil {
		t.Fatal(err)
	}
	volume := t.TempDir()
	big := make([]byte, 8<<20)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"data/orders.bin": big}
	for i := range 300 {
		files[fmt.Sprintf("data/small/%02d/item-%03d.json", i%10, i)] = fmt.Appendf(nil, `{"item":%d}`, i)
	}
	writeTree(t, volume, files)

	r, err := Open(ctx, Config{Storage: st, Password: "static-passw0rd", Dir: t.TempDir(), Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	source := SourcePath("shop", "data")
	var reported int64
	first, err := r.Upload(ctx, volume, source, map[string]string{"velero.io/async-operation-id": "du-1"}, func(done, _ int64) { reported = done })
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, data := range files {
		size += int64(len(data))
	}
	t.Run("the first upload", func(t *testing.T) {
		if first.TotalBytes != size || first.UploadedBytes < int64(len(big)) || reported == 0 {
			t.Errorf("first upload %+v, progress %d; want %d bytes in it, at least the big file's written", first, reported, size)
		}
		// The filesystem storage names a blob <id>.f.
		if _, err := os.Stat(filepath.Join(bucket, "backups", "kopia", "shop", "kopia.repository.f")); err != nil {
			t.Errorf("the repository is not at <prefix>/kopia/<namespace>/: %v", err)
		}
	})

	changed := []byte(`{"item":7,"changed":true}`)
	writeTree(t, volume, map[string][]byte{"data/small/07/item-007.json": changed})
	second, err := r.Upload(ctx, volume, source, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("the second upload writes the change only", func(t *testing.T) {
		// The change, and the metadata of the directories above it.
		if second.UploadedBytes <= 0 || second.UploadedBytes > 1<<20 {
			t.Errorf("second upload wrote %d bytes after a %d-byte change", second.UploadedBytes, len(changed))
		}
	})
	t.Run("the snapshots as Velero makes them", func(t *testing.T) {
		all, err := r.Snapshots(ctx, source)
		if err != nil || len(all) != 2 {
			t.Fatalf("snapshots of %s: %d, %v; want 2", source, len(all), err)
		}
		for _, m := range all {
			if m.Source.Path != "snapshot-data-upload-download/kopia/shop/data" || m.Source.UserName != "default" || m.Source.Host != "default" ||
				m.Tags[RequesterTag] != Requester || m.Tags[UploaderTag] != Uploader || m.Description != "Kopia Uploader" {
				t.Errorf("snapshot %s: source %v, tags %v, description %q", m.ID, m.Source, m.Tags, m.Description)
			}
		}
	})
	t.Run("each snapshot restored", func(t *testing.T) {
		target := t.TempDir()
		if _, err := r.Restore(ctx, first.SnapshotID, target, nil); err != nil {
			t.Fatal(err)
		}
		sameTree(t, "the first snapshot", files, readTree(t, target))
		target = t.TempDir()
		if _, err := r.Restore(ctx, second.SnapshotID, target, nil); err != nil {
			t.Fatal(err)
		}
		files["data/small/07/item-007.json"] = changed
		sameTree(t, "the second snapshot", files, readTree(t, target))
	})
	t.Run("set up as Velero sets a repository up", func(t *testing.T) {
		var formatBlob, markerBlob blobBuffer
		if err := st.GetBlob(ctx, format.KopiaRepositoryBlobID, 0, -1, &formatBlob); err != nil {
			t.Fatal(err)
		}
		f, err := format.ParseKopiaRepositoryJSON(formatBlob.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if err := st.GetBlob(ctx, MarkerBlob, 0, -1, &markerBlob); err != nil {
			t.Fatalf("Velero's marker: %v", err)
		}
		var m marker
		if err := json.Unmarshal(markerBlob.Bytes(), &m); err != nil || !bytes.Equal(m.UniqueID, f.UniqueID) || len(m.UniqueID) == 0 {
			t.Errorf("marker %s (%v), want the repository's unique ID %x", markerBlob.Bytes(), err, f.UniqueID)
		}
		params, err := maintenance.GetParams(ctx, r.rep)
		if err != nil || params.Owner != "default@default" || params.FullCycle.Interval != maintenance.DefaultParams().FullCycle.Interval {
			t.Errorf("maintenance parameters %+v, %v; want kopia's defaults owned by default@default", params, err)
		}
	})
	t.Run("opened without creating, where there is none", func(t *testing.T) {
		none, err := FilesystemStorage(ctx, filepath.Join(bucket, Prefix("/backups/", "other")))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Open(ctx, Config{Storage: none, Password: "static-passw0rd", Dir: t.TempDir()}); !errors.Is(err, ErrNoRepository) {
			t.Errorf("opened where there is no repository: %v, want ErrNoRepository", err)
		}
		if _, err := os.Stat(filepath.Join(bucket, "backups", "kopia", "other", "kopia.repository.f")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("opening where there is none made a repository: %v", err)
		}
	})
	t.Run("opened again elsewhere", func(t *testing.T) {
		if _, err := Open(ctx, Config{Storage: st, Password: "wrong", Dir: t.TempDir()}); !errors.Is(err, ErrWrongPassword) {
			t.Errorf("opened with a wrong password: %v", err)
		}
		again, err := Open(ctx, Config{Storage: st, Password: "static-passw0rd", Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer again.Close(ctx)
		if res, err := again.Restore(ctx, second.SnapshotID, t.TempDir(), nil); err != nil || res.Bytes != second.TotalBytes {
			t.Errorf("restored %d bytes, %v; want %d", res.Bytes, err, second.TotalBytes)
		}
	})
	t.Run("forgotten", func(t *testing.T) {
		if err := r.Forget(ctx, first.SnapshotID); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Restore(ctx, first.SnapshotID, t.TempDir(), nil); err == nil {
			t.Error("a forgotten snapshot restored")
		}
		if err := r.Forget(ctx, first.SnapshotID); err != nil {
			t.Errorf("forgetting it again: %v", err)
		}
	})
	t.Run("a cancelled upload saves no snapshot", func(t *testing.T) {
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := r.Upload(cancelled, volume, source, nil, nil); !errors.Is(err, ErrCanceled) {
			t.Errorf("upload with its context ended: %v, want ErrCanceled", err)
		}
		all, err := r.Snapshots(ctx, source)
		if err != nil || len(all) != 1 || string(all[0].ID) != second.SnapshotID {
			t.Errorf("snapshots after the cancelled upload: %v (%v), want the second only", all, err)
		}
	})
}

// TestConnectionsSeeEachOther: two connections open on one repository at
// once (two engines', two nodes') each see what the other wrote since it
// opened: a snapshot uploaded, then forgotten.
func TestConnectionsSeeEachOther(t *testing.T) {
	ctx := context.Background()
	st, err := FilesystemStorage(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mover, err := Open(ctx, Config{Storage: st, Password: "static-passw0rd", Dir: t.TempDir(), Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer mover.Close(ctx)
	deletion, err := Open(ctx, Config{Storage: st, Password: "static-passw0rd", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer deletion.Close(ctx)
	volume := t.TempDir()
	writeTree(t, volume, map[string][]byte{"orders.json": []byte(`{"orders":[1]}`)})
	source := SourcePath("shop", "db")
	up, err := mover.Upload(ctx, volume, source, map[string]string{"velero.io/async-operation-id": "du-7"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tags, err := deletion.TagsOf(ctx, up.SnapshotID); err != nil || tags["velero.io/async-operation-id"] != "du-7" {
		t.Fatalf("the other connection reads the new snapshot's tags %v, %v", tags, err)
	}
	if err := deletion.Forget(ctx, up.SnapshotID); err != nil {
		t.Fatal(err)
	}
	if all, err := mover.Snapshots(ctx, source); err != nil || len(all) != 0 {
		t.Errorf("the uploading connection lists %d snapshots after the other forgot it (%v), want none", len(all), err)
	}
}

// TestConnectionKeepsNoCache: a connection keeps its configuration, and
// nothing else, in its own directory, made absolute when given relative
// (a relative --data-dir), and no cache on disk: kopia's caches take file
// names from the bucket's listing unchecked, and would put them under the
// process's working directory for a relative one.
func TestConnectionKeepsNoCache(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	t.Chdir(work)
	st, err := FilesystemStorage(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, Config{Storage: st, Password: "static-passw0rd", Dir: filepath.Join("connections", "1"), Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	volume := t.TempDir()
	writeTree(t, volume, map[string][]byte{"a": []byte("data")})
	up, err := r.Upload(ctx, volume, SourcePath("ns", "claim"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Restore(ctx, up.SnapshotID, t.TempDir(), nil); err != nil {
		t.Fatal(err)
	}
	files := readTree(t, work)
	var names []string
	for name := range files {
		names = append(names, name)
	}
	if len(files) != 1 || files[filepath.Join("connections", "1", "repository.config")] == nil {
		t.Fatalf("the working directory holds %v, want the connection's configuration only", names)
	}
	var config struct {
		Caching map[string]any `json:"caching"`
	}
	if err := json.Unmarshal(files[filepath.Join("connections", "1", "repository.config")], &config); err != nil {
		t.Fatal(err)
	}
	if len(config.Caching) != 0 {
		t.Errorf("the connection's caching: %v, want none", config.Caching)
	}
}
