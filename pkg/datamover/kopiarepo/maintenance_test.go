package kopiarepo

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/kopia/kopia/repo/maintenance"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestMaintenance: the maintenance kopia's schedule says is due runs (the
// first a full one, then none until the quick cycle); with kopia's
// default safety a forgotten snapshot's data stays after a full
// maintenance (it is freed over later ones); with SafetyNone and a
// shorter full interval, the next full maintenance frees it, leaving the
// bucket close to the repository's fixed metadata.
func TestMaintenance(t *testing.T) {
	ctx := context.Background()
	bucket := t.TempDir()
	r := newRepository(t, bucket)
	empty := framework.DirBytes(t, bucket)

	volume := t.TempDir()
	data := make([]byte, 8<<20)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	writeTree(t, volume, map[string][]byte{"data.bin": data, "small/a.json": []byte(`{"a":1}`)})
	up, err := r.Upload(ctx, volume, SourcePath("shop", "db"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Forget(ctx, up.SnapshotID); err != nil {
		t.Fatal(err)
	}
	withData := framework.DirBytes(t, bucket)
	if withData < empty+int64(len(data)) {
		t.Fatalf("the bucket holds %d bytes after the upload, %d before: the data is not in it", withData, empty)
	}

	t.Run("kopia's schedule decides, and its default safety keeps the data a while", func(t *testing.T) {
		mode, err := r.Maintain(ctx, Maintenance{})
		if err != nil || mode != maintenance.ModeFull {
			t.Fatalf("the first maintenance: %s, %v; want a full one", mode, err)
		}
		if mode, err := r.Maintain(ctx, Maintenance{}); err != nil || mode != maintenance.ModeNone {
			t.Errorf("the maintenance right after: %s, %v; want none due", mode, err)
		}
		if got := framework.DirBytes(t, bucket); got < empty+int64(len(data)) {
			t.Errorf("the bucket holds %d bytes after a safe full maintenance, want the forgotten data (%d bytes) still there", got, len(data))
		}
	})
	t.Run("a shorter full interval and no safety free the data at the next full maintenance", func(t *testing.T) {
		var mode maintenance.Mode
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			var err error
			mode, err = r.Maintain(ctx, Maintenance{FullInterval: time.Second, Unsafe: true})
			return mode == maintenance.ModeFull, err
		}); err != nil {
			t.Fatalf("no full maintenance due within 30 s of a 1 s interval (last: %s): %v", mode, err)
		}
		got := framework.DirBytes(t, bucket)
		t.Logf("bucket: %d bytes empty, %d with the data, %d after the full maintenance", empty, withData, got)
		if got > empty+256<<10 {
			t.Errorf("the bucket holds %d bytes after the full maintenance, %d when empty: the forgotten data was not freed", got, empty)
		}
	})
}
