package objectstore

import (
	"context"
	"errors"
	"fmt"
	"io"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

// ErrNotFound is returned for a key with no object.
var ErrNotFound = errors.New("object not found")

// Store is the object store of one location. Keys are slash-separated.
type Store interface {
	// Get opens an object; ErrNotFound if there is none.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Put stores an object atomically: readers see the old one or the new
	// one, never a part.
	Put(ctx context.Context, key string, r io.Reader) error
	// Delete removes an object; deleting a missing one is not an error.
	Delete(ctx context.Context, key string) error
	// List returns the keys under prefix, sorted.
	List(ctx context.Context, prefix string) ([]string, error)
	// Probe checks that the store can be written and read now.
	Probe(ctx context.Context) error
}

// Providers Backstop implements.
const (
	ProviderFilesystem = "filesystem"
)

// ForLocation opens the object store of a BackupStorageLocation.
func ForLocation(bsl *velerov1.BackupStorageLocation) (Store, Layout, error) {
	if bsl.Spec.ObjectStorage == nil {
		return nil, Layout{}, fmt.Errorf("backup storage location %s has no objectStorage", bsl.Name)
	}
	layout := NewLayout(bsl.Spec.ObjectStorage.Prefix)
	switch bsl.Spec.Provider {
	case ProviderFilesystem, "velero.io/" + ProviderFilesystem: // keep in step with IsServedByBackstop
		fs, err := NewFilesystem(bsl.Spec.ObjectStorage.Bucket)
		return fs, layout, err
	default:
		return nil, Layout{}, fmt.Errorf("backup storage location %s: provider %q is not supported (supported: %s)",
			bsl.Name, bsl.Spec.Provider, ProviderFilesystem)
	}
}

// IsServedByBackstop reports whether the files of a provider's locations
// are served to clients by the Backstop server itself (download links)
// rather than by an object store of their own.
func IsServedByBackstop(provider string) bool {
	return provider == ProviderFilesystem || provider == "velero.io/"+ProviderFilesystem
}

// LocationGetter returns a storage location (velero.io/v1), or an error
// when there is none.
type LocationGetter func(ctx context.Context, namespace, name string) (*velerov1.BackupStorageLocation, error)

// OpenTarget opens the file a download target names, in the location of
// that name: ErrNotFound when the location or the file does not exist.
func OpenTarget(ctx context.Context, locations LocationGetter, namespace, location string, kind velerov1.DownloadTargetKind, name string) (io.ReadCloser, error) {
	if location == "" {
		return nil, fmt.Errorf("no storage location: %w", ErrNotFound)
	}
	bsl, err := locations(ctx, namespace, location)
	if err != nil {
		return nil, fmt.Errorf("storage location %s: %v: %w", location, err, ErrNotFound)
	}
	store, layout, err := ForLocation(bsl)
	if err != nil {
		return nil, err
	}
	key, err := layout.Key(kind, name)
	if err != nil {
		return nil, err
	}
	return store.Get(ctx, key)
}
