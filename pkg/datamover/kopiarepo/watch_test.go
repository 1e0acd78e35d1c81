package kopiarepo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestUploadStopsWhenTheStorageGoes: the bucket of a repository deleted
// while an upload (slowed to 4 MiB/s) runs. kopia alone would retry the
// failed writes for as long as the upload feeds it; the upload ends with a
// StorageError saying why.
func TestUploadStopsWhenTheStorageGoes(t *testing.T) {
	if testing.Short() {
		t.Skip("needs versitygw, which make tools builds: not in the fast tier (make test-unit); make test runs it")
	}
	ctx := context.Background()
	srv := framework.StartS3(t)
	st, _ := s3Storage(t, srv, "velero", Prefix("cluster", "shop"))
	volume := t.TempDir()
	writeTree(t, volume, map[string][]byte{"big.bin": framework.RandomBytes(t, 48<<20)})
	r, err := Open(ctx, Config{Storage: st, Password: "static-passw0rd", Dir: t.TempDir(), Create: true,
		UploadBytesPerSecond: 4 << 20, StorageCheckInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = r.Close(closeCtx)
	}()
	var gone bool
	_, err = r.Upload(ctx, volume, SourcePath("shop", "data"), nil, func(done, _ int64) {
		if !gone && done > 0 {
			gone = true
			if err := os.RemoveAll(filepath.Join(srv.Root, "velero")); err != nil {
				t.Error(err)
			}
		}
	})
	var se *StorageError
	if !gone || !errors.As(err, &se) {
		t.Fatalf("the upload after its bucket was deleted: %v (deleted: %v), want a StorageError", err, gone)
	}
	t.Logf("the upload ended: %v", err)
}
