package objectstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/encryption"
)

// Encrypted is the store of a location that requires encryption: every
// object is encrypted as it is written and decrypted as it is read
// (pkg/encryption), so that every engine's writes and reads (the backup's
// tarball, logs and records, restores' logs and results, download links,
// backup sync) go through it unchanged. An object written before the
// location required encryption reads as it is.
type Encrypted struct {
	Store
	Keys *encryption.Keys
}

// Usage measures the encrypted objects as stored.
func (s Encrypted) Usage(ctx context.Context, prefix string) (Usage, error) {
	return MeasureUsage(ctx, s.Store, prefix)
}

// Put encrypts r into key.
func (s Encrypted) Put(ctx context.Context, key string, r io.Reader) error {
	sealed, err := s.Keys.Encrypt(r)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return s.Store.Put(ctx, key, sealed)
}

// Get opens key, decrypting it as it is read.
func (s Encrypted) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := s.Store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	plain, err := s.Keys.Decrypt(rc)
	if err != nil {
		_ = rc.Close()
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return readCloser{Reader: plain, Closer: rc}, nil
}

// Unwrap is the store the objects are in.
func (s Encrypted) Unwrap() Store { return s.Store }

type readCloser struct {
	io.Reader
	io.Closer
}

// ErrEncryptionKeys wraps why a location that requires encryption has no
// usable keys: nothing is written there then, never in plaintext.
var ErrEncryptionKeys = errors.New("the location's encryption keys")

// keysOf reads the keys of a location that requires encryption: its
// identities from the Secret (or, standalone, the file) its config names,
// and the recipients its config adds.
func (o Opener) keysOf(ctx context.Context, bsl *velerov1.BackupStorageLocation) (*encryption.Keys, error) {
	config := bsl.Spec.Config
	var identities []byte
	var err error
	switch name, file := config[encryption.ConfigSecret], config[encryption.ConfigIdentitiesFile]; {
	case IsTenantLocation(bsl) && (file != "" || name != bsl.Labels[oadpv1alpha1.NabslOriginNACUUIDLabel] || config[encryption.ConfigSecretKey] != encryption.TenantCopyKey):
		// The Secret the tenant engine copied the tenant's keys into
		// (with its credentials), under the location's NACUUID.
		return nil, fmt.Errorf("backup storage location %s: %w: a tenant's location reads them only from the copy of its own Secret", bsl.Name, ErrEncryptionKeys)
	case name != "" && o.Secrets == nil:
		return nil, fmt.Errorf("backup storage location %s: %w: config %s names Secret %s, but this server reads no Secrets (standalone mode): put the identities in a file and name it in config %s",
			bsl.Name, ErrEncryptionKeys, encryption.ConfigSecret, name, encryption.ConfigIdentitiesFile)
	case name != "":
		key := config[encryption.ConfigSecretKey]
		if key == "" {
			key = encryption.DefaultSecretKey
		}
		if identities, err = o.Secrets(ctx, bsl.Namespace, name, key); err != nil {
			err = fmt.Errorf("config %s: %w", encryption.ConfigSecret, err)
		}
	default:
		identities, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("backup storage location %s: %w: %w", bsl.Name, ErrEncryptionKeys, err)
	}
	keys, err := encryption.ParseKeys(identities, config[encryption.ConfigRecipients])
	if err != nil {
		return nil, fmt.Errorf("backup storage location %s: %w: %w", bsl.Name, ErrEncryptionKeys, err)
	}
	return keys, nil
}
