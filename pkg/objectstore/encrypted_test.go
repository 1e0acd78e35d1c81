package objectstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/encryption"
)

func identitiesFile(t *testing.T) (string, *age.X25519Identity) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "keys.txt")
	if err := os.WriteFile(path, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, id
}

// testKeys are the keys of a new identity.
func testKeys(t *testing.T) *encryption.Keys {
	t.Helper()
	path, _ := identitiesFile(t)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := encryption.ParseKeys(data, "")
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestEncryptedConformance: an encrypted store keeps every promise of a
// store (an upload cut short leaves nothing), and what lands on disk is
// age files only.
func TestEncryptedConformance(t *testing.T) {
	dir := t.TempDir()
	fs, err := NewFilesystem(dir)
	if err != nil {
		t.Fatal(err)
	}
	testStore(t, Encrypted{Store: fs, Keys: testKeys(t)}, 5<<20)
	for _, key := range []string{"backups/b1/velero-backup.json", "backups/big/big.tar.gz", "restores/r1/restore-r1-logs.gz"} {
		raw := read(t, fs, key)
		if !strings.HasPrefix(raw, encryption.Header) || strings.Contains(raw, "data of") {
			t.Errorf("%s on disk: %.40q, want an age file", key, raw)
		}
	}
}

// TestOpenEncrypted: a location whose config names identities opens as an
// encrypted store; one whose identities cannot be read does not open; a
// tenant's location reads them only from the copy the tenant engine made.
func TestOpenEncrypted(t *testing.T) {
	ctx := context.Background()
	path, id := identitiesFile(t)
	location := func(config map[string]string) *velerov1.BackupStorageLocation {
		return &velerov1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: "sealed", Namespace: "velero"},
			Spec: velerov1.BackupStorageLocationSpec{Provider: ProviderFilesystem, Config: config,
				StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: t.TempDir()}}}}
	}
	t.Run("identities in a file", func(t *testing.T) {
		bsl := location(map[string]string{encryption.ConfigIdentitiesFile: path})
		store, _, err := Opener{}.Open(ctx, bsl)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Put(ctx, "backups/b/velero-backup.json", strings.NewReader(`{"kind":"Backup"}`)); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(bsl.Spec.ObjectStorage.Bucket, "backups", "b", "velero-backup.json"))
		if err != nil || !bytes.HasPrefix(raw, []byte(encryption.Header)) {
			t.Fatalf("on disk: %.40q (%v), want an age file", raw, err)
		}
		if got := read(t, store, "backups/b/velero-backup.json"); got != `{"kind":"Backup"}` {
			t.Errorf("read back %q", got)
		}
	})
	secrets := func(want string) SecretReader {
		return func(_ context.Context, namespace, name, key string) ([]byte, error) {
			if namespace+"/"+name+"/"+key != want {
				return nil, errors.New("no such Secret key")
			}
			return []byte(id.String()), nil
		}
	}
	tenant := func(config map[string]string) *velerov1.BackupStorageLocation {
		bsl := location(config)
		bsl.Name = "nacuuid-1"
		bsl.Labels = map[string]string{oadpv1alpha1.NabslOriginNACUUIDLabel: "nacuuid-1"}
		bsl.Spec.Credential = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "nacuuid-1"}, Key: "cloud"}
		return bsl
	}
	for _, tc := range []struct {
		name    string
		opener  Opener
		bsl     *velerov1.BackupStorageLocation
		refused string // "" when it opens
	}{
		{"identities in a Secret, its default key", Opener{Secrets: secrets("velero/keys/identities")},
			location(map[string]string{encryption.ConfigSecret: "keys"}), ""},
		{"identities in a Secret, without Secrets to read", Opener{},
			location(map[string]string{encryption.ConfigSecret: "keys"}), "reads no Secrets"},
		{"a missing file", Opener{}, location(map[string]string{encryption.ConfigIdentitiesFile: path + ".gone"}), "no such file"},
		{"no identity in the file", Opener{}, location(map[string]string{encryption.ConfigIdentitiesFile: "/dev/null"}), "no identities found"},
		{"a tenant's copy", Opener{Secrets: secrets("velero/nacuuid-1/" + encryption.TenantCopyKey)},
			tenant(map[string]string{encryption.ConfigSecret: "nacuuid-1", encryption.ConfigSecretKey: encryption.TenantCopyKey}), ""},
		{"a tenant's location naming another Secret", Opener{Secrets: secrets("velero/admin-keys/identities")},
			tenant(map[string]string{encryption.ConfigSecret: "admin-keys"}), "only from the copy of its own Secret"},
		{"a tenant's location naming a file of the server", Opener{},
			tenant(map[string]string{encryption.ConfigIdentitiesFile: path}), "only from the copy of its own Secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, _, err := tc.opener.Open(ctx, tc.bsl)
			if tc.refused == "" {
				if _, ok := store.(Encrypted); err != nil || !ok {
					t.Errorf("opened %T, %v; want an encrypted store", store, err)
				}
				return
			}
			if !errors.Is(err, ErrEncryptionKeys) || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("error %v, want ErrEncryptionKeys saying %q", err, tc.refused)
			}
		})
	}
}
