package kopiarepo

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kopia/kopia/repo/blob"
	"github.com/kopia/kopia/repo/format"
)

// DefaultStorageCheckInterval is how often a running upload that has
// written nothing since checks its storage.
const DefaultStorageCheckInterval = 20 * time.Second

// storageCheckTimeout bounds one check (the storage's client retries a
// refused connection, and kopia a failed request).
const storageCheckTimeout = 10 * time.Second

// storageChecks is how many checks in a row must fail before an upload is
// stopped.
const storageChecks = 3

// StorageError is the error of an upload stopped because its storage
// failed (a location gone: its bucket deleted, its server down).
type StorageError struct{ Err error }

func (e *StorageError) Error() string {
	return "the storage location failed while uploading: " + e.Err.Error()
}

func (e *StorageError) Unwrap() error { return e.Err }

// watchStorage returns a context of ctx that ends, with a *StorageError
// as its cause, once the repository's storage has failed storageChecks
// checks in a row while the upload wrote nothing: kopia retries a failed
// write, and every later write retries the failed ones, for as long as the
// upload runs, so a location that is gone would hold it forever. A storage
// that answers is never the reason to stop, however long kopia only reads
// and hashes (what the repository holds is not written again). stop ends
// the watch.
func (r *Repository) watchStorage(ctx context.Context, uploaded *atomic.Int64) (watched context.Context, stop func()) {
	watched, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(r.checkInterval)
		defer t.Stop()
		last, failures := uploaded.Load(), 0
		for {
			select {
			case <-done:
				return
			case <-watched.Done():
				return
			case <-t.C:
			}
			if now := uploaded.Load(); now != last {
				last, failures = now, 0
				continue
			}
			probe, done := context.WithTimeout(watched, storageCheckTimeout)
			_, err := r.storage.GetMetadata(probe, format.KopiaRepositoryBlobID)
			done()
			if watched.Err() != nil {
				return
			}
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("it did not answer within %s", storageCheckTimeout)
			}
			if err == nil {
				failures = 0
				continue
			}
			if errors.Is(err, blob.ErrBlobNotFound) {
				err = fmt.Errorf("the repository is gone from it (no %s): %w", format.KopiaRepositoryBlobID, err)
			}
			if failures++; failures >= storageChecks {
				cancel(&StorageError{Err: err})
				return
			}
		}
	}()
	return watched, func() {
		close(done)
		cancel(nil)
	}
}

// stopped is why an upload's context ended: the storage's failure, or
// ErrCanceled.
func stopped(ctx context.Context) error {
	var se *StorageError
	if errors.As(context.Cause(ctx), &se) {
		return se
	}
	return ErrCanceled
}
