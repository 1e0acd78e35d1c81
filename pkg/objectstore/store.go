package objectstore

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/encryption"
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
	// Walk calls fn with each key under prefix, as the store lists them,
	// holding none of them: memory stays flat in the bucket's size. An
	// error from fn ends the walk and is returned.
	Walk(ctx context.Context, prefix string, fn func(key string) error) error
	// Probe checks that the store can be written and read now.
	Probe(ctx context.Context) error
}

// Providers Backstop implements.
const (
	ProviderFilesystem = "filesystem"
)

// SecretReader returns one key of a Secret of namespace.
type SecretReader func(ctx context.Context, namespace, name, key string) ([]byte, error)

// Opener opens the object stores of storage locations.
type Opener struct {
	// Secrets reads the Secrets locations refer to (spec.credential,
	// objectStorage.caCertRef); nil when the server reads none
	// (standalone mode serves no Secrets).
	Secrets SecretReader
	// TenantEndpoints returns the hosts, addresses and CIDRs the admin's
	// policy lets tenants' locations reach although EndpointGuard refuses
	// them (nil: none).
	TenantEndpoints func(ctx context.Context) ([]string, error)
	// TenantDenied are networks tenants' locations never reach besides
	// those EndpointGuard always refuses (the cluster's service network).
	TenantDenied []netip.Prefix
}

// IsTenantLocation reports whether a storage location was made for a
// tenant (a NonAdminBackupStorageLocation's): its endpoint and credentials
// are the tenant's.
func IsTenantLocation(bsl *velerov1.BackupStorageLocation) bool {
	return bsl.Labels[oadpv1alpha1.NabslOriginNACUUIDLabel] != ""
}

// Open opens the object store of a BackupStorageLocation; of one that
// requires encryption, the store that encrypts what it writes there
// (Encrypted), or an error when its keys cannot be read.
func (o Opener) Open(ctx context.Context, bsl *velerov1.BackupStorageLocation) (Store, Layout, error) {
	store, layout, err := o.open(ctx, bsl)
	if err != nil || !encryption.Required(bsl.Spec.Config) {
		return store, layout, err
	}
	keys, err := o.keysOf(ctx, bsl)
	if err != nil {
		return nil, Layout{}, err
	}
	return Encrypted{Store: store, Keys: keys}, layout, nil
}

// open opens a location's store as its provider stores objects.
func (o Opener) open(ctx context.Context, bsl *velerov1.BackupStorageLocation) (Store, Layout, error) {
	if bsl.Spec.ObjectStorage == nil {
		return nil, Layout{}, fmt.Errorf("backup storage location %s has no objectStorage", bsl.Name)
	}
	layout := NewLayout(bsl.Spec.ObjectStorage.Prefix)
	lockMode, err := velerov1.ObjectLockMode(bsl.Spec.Config)
	if err != nil {
		return nil, Layout{}, fmt.Errorf("backup storage location %s: config %s: %w", bsl.Name, velerov1.ObjectLockModeConfigKey, err)
	}
	switch {
	case IsServedByBackstop(bsl.Spec.Provider):
		if lockMode != "" {
			return nil, Layout{}, fmt.Errorf("backup storage location %s: the filesystem provider cannot lock objects (config %s)", bsl.Name, velerov1.ObjectLockModeConfigKey)
		}
		fs, err := NewFilesystem(bsl.Spec.ObjectStorage.Bucket)
		return fs, layout, err
	case isS3(bsl.Spec.Provider):
		opts, err := o.S3Of(ctx, bsl)
		if err != nil {
			return nil, Layout{}, err
		}
		store, err := NewS3(opts)
		if err != nil {
			return nil, Layout{}, fmt.Errorf("backup storage location %s: %w", bsl.Name, err)
		}
		if lockMode != "" {
			return &Locked{S3: store, Mode: lockMode}, layout, nil
		}
		return store, layout, nil
	default:
		return nil, Layout{}, fmt.Errorf("backup storage location %s: provider %q is not supported (supported: %s, %s)",
			bsl.Name, bsl.Spec.Provider, ProviderFilesystem, ProviderAWS)
	}
}

// IsS3 reports whether a location's objects are in an S3 bucket.
func IsS3(bsl *velerov1.BackupStorageLocation) bool { return isS3(bsl.Spec.Provider) }

// S3Of reads an S3 location's settings: its config, its credentials and CA
// bundle (from the Secrets it names), and for a tenant's location the
// guard of the endpoints the admin's policy lets it reach.
func (o Opener) S3Of(ctx context.Context, bsl *velerov1.BackupStorageLocation) (S3Options, error) {
	if bsl.Spec.ObjectStorage == nil {
		return S3Options{}, fmt.Errorf("backup storage location %s has no objectStorage", bsl.Name)
	}
	secret, err := o.secret(ctx, bsl, "spec.credential", bsl.Spec.Credential)
	if err != nil {
		return S3Options{}, err
	}
	caCert := bsl.Spec.ObjectStorage.CACert
	if ref := bsl.Spec.ObjectStorage.CACertRef; ref != nil {
		if caCert, err = o.secret(ctx, bsl, "spec.objectStorage.caCertRef", ref); err != nil {
			return S3Options{}, err
		}
	}
	config := bsl.Spec.Config
	if IsTenantLocation(bsl) {
		if config[S3ConfigCredentialsFile] != "" {
			return S3Options{}, fmt.Errorf("backup storage location %s: a tenant's location reads no file of the server (config %s)", bsl.Name, S3ConfigCredentialsFile)
		}
		if len(secret) == 0 {
			return S3Options{}, fmt.Errorf("backup storage location %s: a tenant's location needs credentials (spec.credential): it never uses the server's own", bsl.Name)
		}
	}
	opts, err := s3OptionsOf(bsl.Spec.ObjectStorage.Bucket, config, caCert, secret)
	if err != nil {
		return S3Options{}, fmt.Errorf("backup storage location %s: %w", bsl.Name, err)
	}
	if IsTenantLocation(bsl) {
		guard := &EndpointGuard{Denied: o.TenantDenied}
		if o.TenantEndpoints != nil {
			if guard.Allowed, err = o.TenantEndpoints(ctx); err != nil {
				return S3Options{}, fmt.Errorf("backup storage location %s: reading the endpoints the admin allows: %w", bsl.Name, err)
			}
		}
		opts.Guard = guard
	}
	return opts, nil
}

// secret reads a Secret key a location refers to at field.
func (o Opener) secret(ctx context.Context, bsl *velerov1.BackupStorageLocation, field string, ref *corev1.SecretKeySelector) ([]byte, error) {
	if ref == nil {
		return nil, nil
	}
	if o.Secrets == nil {
		return nil, fmt.Errorf("backup storage location %s: %s names Secret %s, but this server reads no Secrets (standalone mode): put the credentials in a file and name it in config.%s",
			bsl.Name, field, ref.Name, S3ConfigCredentialsFile)
	}
	data, err := o.Secrets(ctx, bsl.Namespace, ref.Name, ref.Key)
	if err != nil {
		return nil, fmt.Errorf("backup storage location %s: %s: %w", bsl.Name, field, err)
	}
	return data, nil
}

// IsServedByBackstop reports whether the files of a provider's locations
// live on this server's disk (the filesystem provider).
func IsServedByBackstop(provider string) bool {
	return provider == ProviderFilesystem || provider == "velero.io/"+ProviderFilesystem
}

// LocationGetter returns a storage location (velero.io/v1), or an error
// when there is none.
type LocationGetter func(ctx context.Context, namespace, name string) (*velerov1.BackupStorageLocation, error)

// Locations finds storage locations and opens their stores.
type Locations struct {
	Get    LocationGetter
	Opener Opener
}

// OpenTarget opens the file a download target names, in the location of
// that name: ErrNotFound when the location or the file does not exist.
func (l Locations) OpenTarget(ctx context.Context, namespace, location string, kind velerov1.DownloadTargetKind, name string) (io.ReadCloser, error) {
	if location == "" {
		return nil, fmt.Errorf("no storage location: %w", ErrNotFound)
	}
	bsl, err := l.Get(ctx, namespace, location)
	if err != nil {
		return nil, fmt.Errorf("storage location %s: %v: %w", location, err, ErrNotFound)
	}
	store, layout, err := l.Opener.Open(ctx, bsl)
	if err != nil {
		return nil, err
	}
	key, err := layout.Key(kind, name)
	if err != nil {
		return nil, err
	}
	return store.Get(ctx, key)
}

// PutGzip stores data gzip-compressed under key, as Velero stores a
// backup's results, item operations and resource list.
func PutGzip(ctx context.Context, store Store, key string, data []byte) error {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	if _, err := gz.Write(data); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	if err := store.Put(ctx, key, &buf); err != nil {
		return fmt.Errorf("uploading %s: %w", key, err)
	}
	return nil
}

// GetGzip reads an object PutGzip stored, uncompressed, refusing one
// over max bytes uncompressed (a bucket is input); ErrNotFound when there
// is none.
func GetGzip(ctx context.Context, store Store, key string, max int64) ([]byte, error) {
	rc, err := store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	gz, err := gzip.NewReader(rc)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", key, err)
	}
	defer gz.Close()
	data, err := io.ReadAll(io.LimitReader(gz, max+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", key, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("reading %s: more than %d bytes uncompressed", key, max)
	}
	return data, nil
}

// DeletePrefix deletes every object under prefix but those named in keep,
// and what interrupted uploads left there (a store that keeps such
// leftovers in view of its own, as the filesystem does its temporary
// files, removes them). Nothing may be writing under prefix.
func DeletePrefix(ctx context.Context, store Store, prefix string, keep ...string) error {
	keys, err := store.List(ctx, prefix)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if slices.Contains(keep, k) {
			continue
		}
		if err := store.Delete(ctx, k); err != nil {
			return err
		}
	}
	// The store that leaves incomplete uploads may be under others
	// (Encrypted, Hashing).
	for s := store; s != nil; {
		if r, ok := s.(interface {
			removeIncomplete(prefix string) error
		}); ok {
			return r.removeIncomplete(prefix)
		}
		u, ok := s.(interface{ Unwrap() Store })
		if !ok {
			break
		}
		s = u.Unwrap()
	}
	return nil
}
