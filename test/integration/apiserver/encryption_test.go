package apiserver

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/encryption"
	"github.com/backstop-io/backstop/pkg/objectstore"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestEncryptedLocation: a location that requires encryption (its age
// identities in a file of the server, standalone; an offline recipient
// besides) holds only age files, none with a byte of what it backed up in
// the clear; the velero CLI reads its logs and details through the server;
// keys rotate (a key added: old backups restore, new ones are encrypted
// to the new key only; the old key removed: its backups no longer open,
// and say so); a server that syncs the bucket with the new key alone
// takes the backups it can open and logs the others; a location whose
// keys cannot be read is Unavailable, and a backup there writes nothing.
func TestEncryptedLocation(t *testing.T) {
	t.Parallel()
	framework.StorageIndependent(t, "encrypted storage locations (the object store and its keys)")
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	// The marker is in the backed-up objects: a label of a tracker.
	marker := "marker-" + hex.EncodeToString(framework.RandomBytes(t, 12))
	createTracker(t, s, "app", "t1", map[string]string{"secret": marker})

	newKey := func() *age.X25519Identity {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	k1, k2, offline := newKey(), newKey(), newKey()
	keysFile := filepath.Join(t.TempDir(), "keys.txt")
	writeKeys := func(t *testing.T, ids ...*age.X25519Identity) {
		t.Helper()
		var b strings.Builder
		for _, id := range ids {
			b.WriteString("# " + id.Recipient().String() + "\n" + id.String() + "\n")
		}
		if err := os.WriteFile(keysFile, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeKeys(t, k1)
	bucket := t.TempDir()
	location := func(name, bucket string, config map[string]string) *velerov1.BackupStorageLocation {
		return &velerov1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: velerov1.BackupStorageLocationSpec{Provider: "filesystem", Config: config,
				StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: bucket}}}}
	}
	sealedConfig := map[string]string{encryption.ConfigIdentitiesFile: keysFile, encryption.ConfigRecipients: offline.Recipient().String()}
	backupTo := func(t *testing.T, name string) *velerov1.Backup {
		t.Helper()
		if _, err := s.Clientset.VeleroV1().Backups(ns).Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: velerov1.BackupSpec{IncludedNamespaces: []string{"app"}, StorageLocation: "sealed"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return waitBackup(t, s, name, "finished", finished)
	}
	// objects are a backup's files in the bucket, with their bytes.
	objects := func(t *testing.T, backup string) map[string][]byte {
		t.Helper()
		out, err := framework.ReadTree(filepath.Join(bucket, "backups", backup))
		if err != nil || len(out) == 0 {
			t.Fatalf("the files of backup %s: %v (%d)", backup, err, len(out))
		}
		return out
	}
	// opens says whether an age identity opens data, and the plaintext,
	// gunzipped when it is gzip.
	opens := func(data []byte, id age.Identity) (string, bool) {
		r, err := age.Decrypt(bytes.NewReader(data), id)
		if err != nil {
			return "", false
		}
		plain, err := io.ReadAll(r)
		if err != nil {
			return "", false
		}
		if zr, err := gzip.NewReader(bytes.NewReader(plain)); err == nil {
			if unzipped, err := io.ReadAll(zr); err == nil {
				return string(unzipped), true
			}
		}
		return string(plain), true
	}
	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow()
		}
	}

	step("refused at admission: keys that cannot be", func(t *testing.T) {
		for key, value := range map[string]string{
			encryption.ConfigRecipients:     "AGE-SECRET-KEY-1QQQQ",
			encryption.ConfigIdentitiesFile: "keys.txt",
		} {
			config := map[string]string{encryption.ConfigIdentitiesFile: keysFile}
			config[key] = value
			_, err := s.Clientset.VeleroV1().BackupStorageLocations(ns).Create(ctx, location("refused", t.TempDir(), config), metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.config["+key+"]") || strings.Contains(err.Error(), "AGE-SECRET-KEY") {
				t.Errorf("config %s=%s: %v, want 422 naming the field (and no key)", key, value, err)
			}
		}
	})

	step("a location whose keys cannot be read is Unavailable, and a backup there writes nothing", func(t *testing.T) {
		nowhere := t.TempDir()
		if _, err := s.Clientset.VeleroV1().BackupStorageLocations(ns).Create(ctx, location("no-keys", nowhere,
			map[string]string{encryption.ConfigIdentitiesFile: filepath.Join(t.TempDir(), "missing.txt")}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		l := waitLocation(t, s, "no-keys", func(l *velerov1.BackupStorageLocation) bool { return l.Status.Phase != "" })
		if l.Status.Phase != velerov1.BackupStorageLocationPhaseUnavailable || !strings.Contains(l.Status.Message, "encryption keys") {
			t.Errorf("location no-keys: %s %q, want Unavailable naming its encryption keys", l.Status.Phase, l.Status.Message)
		}
		if b := createBackupTo(t, s, "into-no-keys", "no-keys"); b.Status.Phase != velerov1.BackupPhaseFailedValidation {
			t.Errorf("backup into a location without keys: %s, want FailedValidation", b.Status.Phase)
		}
		if files := filesUnder(t, nowhere); len(files) != 0 {
			t.Errorf("written to the location without keys: %v", files)
		}
	})

	step("every object of a backup is an age file with nothing of it in the clear", func(t *testing.T) {
		if _, err := s.Clientset.VeleroV1().BackupStorageLocations(ns).Create(ctx, location("sealed", bucket, sealedConfig), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitLocation(t, s, "sealed", func(l *velerov1.BackupStorageLocation) bool {
			return l.Status.Phase == velerov1.BackupStorageLocationPhaseAvailable
		})
		if b := backupTo(t, "one"); b.Status.Phase != velerov1.BackupPhaseCompleted {
			t.Fatalf("backup one: %s %q", b.Status.Phase, b.Status.FailureReason)
		}
		files := objects(t, "one")
		for name, data := range files {
			if !bytes.HasPrefix(data, []byte(encryption.Header)) || bytes.Contains(data, []byte(marker)) {
				t.Errorf("%s: %d bytes not an age file, or holding what was backed up: %.40q", name, len(data), data)
			}
			if _, ok := opens(data, k1); !ok {
				t.Errorf("%s: the location's key does not open it", name)
			}
		}
		// The manifest, encrypted too, lists the others' plaintext.
		plain := map[string][]byte{}
		for name, data := range files {
			r, err := age.Decrypt(bytes.NewReader(data), k1)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if plain[name], err = io.ReadAll(r); err != nil {
				t.Fatal(err)
			}
		}
		var m objectstore.Manifest
		if err := json.Unmarshal(plain[objectstore.ManifestFile], &m); err != nil || len(m.Objects) != len(files)-1 {
			t.Fatalf("the manifest: %v, %d objects for %d files", err, len(m.Objects), len(files))
		}
		for _, o := range m.Objects {
			if sum := sha256.Sum256(plain[o.Name]); hex.EncodeToString(sum[:]) != o.SHA256 || int64(len(plain[o.Name])) != o.Size {
				t.Errorf("the manifest's %+v: the object's plaintext has %d bytes, sha256 %x", o, len(plain[o.Name]), sum)
			}
		}
		// The check above could fail: the offline key opens the tarball,
		// which holds the marker.
		if plain, ok := opens(files["one.tar.gz"], offline); !ok || !strings.Contains(plain, marker) {
			t.Errorf("the tarball opened with the offline key: %v, holding the marker: %v", ok, strings.Contains(plain, marker))
		}
	})

	step("a verification reads every object back through the location's keys", func(t *testing.T) {
		b := requestVerification(t, s, "one", "sealed")
		if v, c := b.Status.Verification, verifiedCondition(b); c.Status != metav1.ConditionTrue || v.Objects != len(objects(t, "one"))-1 || v.Items == 0 {
			t.Errorf("condition %+v, verification %+v", c, v)
		}
	})

	step("the velero CLI reads the backup's logs and details through the server", func(t *testing.T) {
		requireContains(t, "backup logs", veleroCLI(t, s, "backup", "logs", "one"), "Backup completed")
		out := veleroCLI(t, s, "backup", "describe", "one", "--details")
		requireContains(t, "backup describe --details", out, "Completed", "t1")
		if strings.Contains(out, "<error") {
			t.Errorf("backup describe --details reports an error:\n%s", out)
		}
	})

	step("a key added: new backups are encrypted to it alone, old ones still restore", func(t *testing.T) {
		writeKeys(t, k1, k2)
		if b := backupTo(t, "two"); b.Status.Phase != velerov1.BackupPhaseCompleted {
			t.Fatalf("backup two: %s %q", b.Status.Phase, b.Status.FailureReason)
		}
		for name, data := range objects(t, "two") {
			_, byNew := opens(data, k2)
			_, byOld := opens(data, k1)
			if !byNew || byOld {
				t.Errorf("%s of backup two: opened by the new key %v, by the old %v; want the new only", name, byNew, byOld)
			}
		}
		r := createRestore(t, s, "one-restored", velerov1.RestoreSpec{BackupName: "one", NamespaceMapping: map[string]string{"app": "app-one"}})
		if r.Status.Phase != velerov1.RestorePhaseCompleted {
			t.Fatalf("restore of backup one after the rotation: %s %q", r.Status.Phase, r.Status.FailureReason)
		}
		if got := getTracker(t, s, "app-one", "t1"); got.Labels["secret"] != marker {
			t.Errorf("the restored tracker's labels %v", got.Labels)
		}
	})

	step("the old key removed: its backups no longer open, and say why", func(t *testing.T) {
		writeKeys(t, k2)
		r := createRestore(t, s, "one-without-its-key", velerov1.RestoreSpec{BackupName: "one", NamespaceMapping: map[string]string{"app": "app-none"}})
		if r.Status.Phase != velerov1.RestorePhaseFailed || !strings.Contains(r.Status.FailureReason, "encrypted to none of the location's keys") {
			t.Errorf("restore of backup one without its key: %s %q", r.Status.Phase, r.Status.FailureReason)
		}
		r = createRestore(t, s, "two-restored", velerov1.RestoreSpec{BackupName: "two", NamespaceMapping: map[string]string{"app": "app-two"}})
		if r.Status.Phase != velerov1.RestorePhaseCompleted {
			t.Errorf("restore of backup two: %s %q", r.Status.Phase, r.Status.FailureReason)
		}
	})

	step("another server syncing the bucket with the new key takes what it can open and logs the rest", func(t *testing.T) {
		other := framework.Start(t, framework.Options{Args: []string{"--backup-sync-period=1s"}})
		l := location("sealed", bucket, sealedConfig)
		l.Spec.AccessMode = velerov1.BackupStorageLocationAccessModeReadOnly
		if _, err := other.Clientset.VeleroV1().BackupStorageLocations(ns).Create(ctx, l, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := other.Clientset.VeleroV1().Backups(ns).Get(ctx, "two", metav1.GetOptions{})
			log, _ := os.ReadFile(filepath.Join(other.DataDir, "server.log"))
			return err == nil && strings.Contains(string(log), "encrypted to none of the location's keys"), nil
		}); err != nil {
			t.Fatalf("backup two not synced, or backup one's key not reported missing: %v", err)
		}
		if _, err := other.Clientset.VeleroV1().Backups(ns).Get(ctx, "one", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("backup one, which the other server cannot open: %v, want it not synced", err)
		}
		log, _ := os.ReadFile(filepath.Join(other.DataDir, "server.log"))
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, "encrypted to none of the location's keys") && !strings.Contains(line, `backup="one"`) {
				t.Errorf("the report names another backup than one: %s", line)
			}
		}
	})
}
