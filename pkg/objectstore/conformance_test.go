package objectstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// failingReader yields n bytes, then an error: an upload cut short.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errors.New("source broke")
	}
	if len(p) > r.n {
		p = p[:r.n]
	}
	for i := range p {
		p[i] = 'x'
	}
	r.n -= len(p)
	return len(p), nil
}

// testStore checks what every Store promises.
func testStore(t *testing.T, store Store, big int) {
	ctx := context.Background()
	if _, err := store.Get(ctx, "backups/b1/b1-logs.gz"); !errors.Is(err, ErrNotFound) {
		t.Errorf("get of a missing object: %v, want ErrNotFound", err)
	}
	for _, k := range []string{"backups/b1/b1-logs.gz", "backups/b1/velero-backup.json", "backups/b10/velero-backup.json", "restores/r1/restore-r1-logs.gz"} {
		if err := store.Put(ctx, k, strings.NewReader("data of "+k)); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	if err := store.Put(ctx, "backups/b1/b1-logs.gz", strings.NewReader("second")); err != nil {
		t.Fatalf("overwrite: %v", err)
	}
	if got := read(t, store, "backups/b1/b1-logs.gz"); got != "second" {
		t.Errorf("get after overwrite = %q", got)
	}
	keys, err := store.List(ctx, "backups/b1/")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"backups/b1/b1-logs.gz", "backups/b1/velero-backup.json"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("list = %v, want %v", keys, want)
	}
	// Usage: the objects as they are now (the overwritten one once), as
	// stored (an encrypted store's are larger than what was put).
	_, encrypted := store.(Encrypted)
	usageIs := func(got, want Usage) bool {
		if encrypted {
			return got.Objects == want.Objects && got.Bytes > want.Bytes
		}
		return got == want
	}
	wantUsage := Usage{Objects: 3, Bytes: int64(len("second") + len("data of backups/b1/velero-backup.json") + len("data of backups/b10/velero-backup.json"))}
	if u, err := MeasureUsage(ctx, store, "backups/"); err != nil || !usageIs(u, wantUsage) {
		t.Errorf("usage of backups/ = %+v, %v; want %+v", u, err, wantUsage)
	}
	wantUsage.Objects++
	wantUsage.Bytes += int64(len("data of restores/r1/restore-r1-logs.gz"))
	if u, err := MeasureUsage(ctx, store, ""); err != nil || !usageIs(u, wantUsage) {
		t.Errorf("usage of the whole store = %+v, %v; want %+v", u, err, wantUsage)
	}
	// The backups are the directories with a velero-backup.json.
	if err := store.Put(ctx, "backups/nometa/nometa.tar.gz", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	var names []string
	if err := NewLayout("").WalkBackupNames(ctx, store, func(n string) error { names = append(names, n); return nil }); err != nil || !reflect.DeepEqual(names, []string{"b1", "b10"}) {
		t.Errorf("backup names = %v (%v), want [b1 b10]", names, err)
	}
	if err := store.Delete(ctx, "backups/b1/b1-logs.gz"); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, "backups/b1/b1-logs.gz"); err != nil {
		t.Errorf("deleting a missing object: %v", err)
	}
	if _, err := store.Get(ctx, "backups/b1/b1-logs.gz"); !errors.Is(err, ErrNotFound) {
		t.Errorf("get after delete: %v, want ErrNotFound", err)
	}

	// A large object of unknown size streams in and comes back whole.
	data := make([]byte, big)
	rand.New(rand.NewSource(1)).Read(data)
	if err := store.Put(ctx, "backups/big/big.tar.gz", io.MultiReader(bytes.NewReader(data))); err != nil {
		t.Fatalf("put of %d bytes: %v", big, err)
	}
	if got := read(t, store, "backups/big/big.tar.gz"); sha256.Sum256([]byte(got)) != sha256.Sum256(data) {
		t.Errorf("the %d-byte object came back as %d different bytes", big, len(got))
	}
	// An upload whose source fails leaves nothing, not a part.
	if err := store.Put(ctx, "backups/cut/cut.tar.gz", &failingReader{n: big / 2}); err == nil {
		t.Error("an upload whose source failed succeeded")
	}
	if _, err := store.Get(ctx, "backups/cut/cut.tar.gz"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after a failed upload: %v, want ErrNotFound", err)
	}
	if keys, _ := store.List(ctx, "backups/cut/"); len(keys) != 0 {
		t.Errorf("a failed upload left %v", keys)
	}
	if err := store.Probe(ctx); err != nil {
		t.Errorf("probe: %v", err)
	}
}

func read(t *testing.T, store Store, key string) string {
	t.Helper()
	r, err := store.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return string(b)
}

func TestFilesystemConformance(t *testing.T) {
	fs, err := NewFilesystem(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	testStore(t, fs, 5<<20)
}

// TestS3 runs the store checks against a real S3 server (versitygw) on
// loopback, through a storage location as users write it: provider aws,
// s3Url, path-style, a credentials file with a profile, a prefix.
func TestS3(t *testing.T) {
	srv := framework.StartS3(t)
	srv.MakeBucket(t, "velero")
	bsl := &velerov1.BackupStorageLocation{Spec: velerov1.BackupStorageLocationSpec{
		Provider:    "aws",
		StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: "velero", Prefix: "cluster-a"}},
		Config: map[string]string{S3ConfigURL: srv.Endpoint, S3ConfigRegion: "us-east-1", S3ConfigForcePathStyle: "true",
			S3ConfigCredentialsFile: srv.CredentialsFile(t, "backups"), S3ConfigProfile: "backups"},
	}}
	bsl.Name = "s3"
	store, layout, err := Opener{}.Open(context.Background(), bsl)
	if err != nil {
		t.Fatal(err)
	}
	if got := layout.BackupMetadataKey("b1"); got != "cluster-a/backups/b1/velero-backup.json" {
		t.Errorf("layout: %s", got)
	}
	// Larger than one 16 MiB part: a multipart upload.
	testStore(t, store, 40<<20)

	// Wrong credentials, a missing bucket: the probe says what is wrong.
	wrong := bsl.DeepCopy()
	wrong.Spec.Config[S3ConfigProfile] = "default"
	if _, _, err := (Opener{}).Open(context.Background(), wrong); err == nil || !strings.Contains(err.Error(), `no profile "default"`) {
		t.Errorf("a profile missing from the credentials file: %v", err)
	}
	missing := bsl.DeepCopy()
	missing.Spec.ObjectStorage.Bucket = "nope"
	s, _, err := Opener{}.Open(context.Background(), missing)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Probe(context.Background()); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("probe of a missing bucket: %v", err)
	}
	// A Secret reference needs a server that reads Secrets.
	secretRef := bsl.DeepCopy()
	secretRef.Spec.Credential = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cloud-credentials"}, Key: "cloud"}
	if _, _, err := (Opener{}).Open(context.Background(), secretRef); err == nil || !strings.Contains(err.Error(), "reads no Secrets") {
		t.Errorf("a Secret reference without a Secret reader: %v", err)
	}
	read := 0
	withSecrets := Opener{Secrets: func(_ context.Context, namespace, name, key string) ([]byte, error) {
		read++
		if name != "cloud-credentials" || key != "cloud" {
			t.Errorf("read Secret %s key %s", name, key)
		}
		return []byte("[backups]\naws_access_key_id=" + srv.AccessKey + "\naws_secret_access_key=" + srv.SecretKey + "\n"), nil
	}}
	delete(secretRef.Spec.Config, S3ConfigCredentialsFile)
	s, _, err = withSecrets.Open(context.Background(), secretRef)
	if err != nil || read != 1 {
		t.Fatalf("open with a Secret: %v (read %d)", err, read)
	}
	if err := s.Probe(context.Background()); err != nil {
		t.Errorf("probe with credentials from a Secret: %v", err)
	}
}
