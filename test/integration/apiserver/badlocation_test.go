package apiserver

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// s3Location creates an S3 storage location.
func s3Location(t *testing.T, s *framework.Server, name, endpoint, credentials string, frequency *metav1.Duration) {
	t.Helper()
	if _, err := s.Clientset.VeleroV1().BackupStorageLocations(ns).Create(context.Background(), &velerov1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: velerov1.BackupStorageLocationSpec{
			Provider:            "aws",
			StorageType:         velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: "velero", Prefix: name}},
			Config:              map[string]string{"s3Url": endpoint, "region": "us-east-1", "s3ForcePathStyle": "true", "credentialsFile": credentials},
			ValidationFrequency: frequency,
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// filesUnder lists the files under dir (none when it does not exist).
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func createBackupTo(t *testing.T, s *framework.Server, name, location string) *velerov1.Backup {
	t.Helper()
	if _, err := s.Clientset.VeleroV1().Backups(ns).Create(context.Background(), &velerov1.Backup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       velerov1.BackupSpec{IncludedNamespaces: []string{"shop"}, StorageLocation: location},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return waitBackup(t, s, name, "finished", finished)
}

// TestUnusableStorageLocations: S3 locations with a wrong secret or no
// server behind them are Unavailable with the reason, and backups into
// them fail validation saying so; a location that goes away after its
// check fails the backups and restores that use it with the reason, and
// leaves nothing half-written in the bucket.
func TestUnusableStorageLocations(t *testing.T) {
	t.Parallel()
	framework.StorageIndependent(t, "unusable storage locations (the object store clients)")
	srv := framework.StartS3(t)
	srv.MakeBucket(t, "velero")
	s := framework.Start(t, framework.Options{})
	createTracker(t, s, "shop", "t1", nil)

	wrongSecret := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(wrongSecret, []byte("[default]\naws_access_key_id = "+srv.AccessKey+"\naws_secret_access_key = not-the-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := "http://" + l.Addr().String()
	l.Close()

	for _, c := range []struct {
		name, endpoint, credentials, want string
	}{
		{"wrong-secret", srv.Endpoint, wrongSecret, "access denied"},
		{"no-server", nobody, srv.CredentialsFile(t, "default"), "connection refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s3Location(t, s, c.name, c.endpoint, c.credentials, nil)
			loc := waitLocation(t, s, c.name, func(l *velerov1.BackupStorageLocation) bool { return l.Status.Phase != "" })
			if loc.Status.Phase != velerov1.BackupStorageLocationPhaseUnavailable || !strings.Contains(strings.ToLower(loc.Status.Message), c.want) {
				t.Fatalf("location %s: %s %q, want Unavailable saying %q", c.name, loc.Status.Phase, loc.Status.Message, c.want)
			}
			b := createBackupTo(t, s, "into-"+c.name, c.name)
			if b.Status.Phase != velerov1.BackupPhaseFailedValidation || len(b.Status.ValidationErrors) != 1 ||
				!strings.Contains(b.Status.ValidationErrors[0], `backup storage location "`+c.name+`" is unavailable: `+loc.Status.Message) {
				t.Errorf("backup into %s: %s %v", c.name, b.Status.Phase, b.Status.ValidationErrors)
			}
			if files := filesUnder(t, filepath.Join(srv.Root, "velero", c.name)); len(files) != 0 {
				t.Errorf("files written under %s: %v", c.name, files)
			}
		})
	}

	t.Run("goes-away", func(t *testing.T) {
		away := framework.StartS3(t)
		away.MakeBucket(t, "velero")
		// Checked once an hour: the location stays Available after its
		// server is gone, so the backup and the restore find out.
		s3Location(t, s, "goes-away", away.Endpoint, away.CredentialsFile(t, "default"), &metav1.Duration{Duration: 3600e9})
		waitLocation(t, s, "goes-away", func(l *velerov1.BackupStorageLocation) bool {
			return l.Status.Phase == velerov1.BackupStorageLocationPhaseAvailable
		})
		if b := createBackupTo(t, s, "before", "goes-away"); b.Status.Phase != velerov1.BackupPhaseCompleted {
			t.Fatalf("backup before the server went away: %s %q", b.Status.Phase, b.Status.FailureReason)
		}
		away.Stop()

		b := createBackupTo(t, s, "after", "goes-away")
		if b.Status.Phase != velerov1.BackupPhaseFailed || !strings.Contains(b.Status.FailureReason, "connection refused") {
			t.Errorf("backup after the server went away: %s %q", b.Status.Phase, b.Status.FailureReason)
		}
		if files := filesUnder(t, filepath.Join(away.Root, "velero", "goes-away", "backups", "after")); len(files) != 0 {
			t.Errorf("the failed backup left %v", files)
		}
		r := createRestore(t, s, "from-gone", velerov1.RestoreSpec{BackupName: "before"})
		if r.Status.Phase != velerov1.RestorePhaseFailed || !strings.Contains(r.Status.FailureReason, "connection refused") {
			t.Errorf("restore from a location whose server went away: %s %q", r.Status.Phase, r.Status.FailureReason)
		}

		// Once the location is checked again it is Unavailable, and a
		// restore from it fails validation saying so.
		loc, err := s.Clientset.VeleroV1().BackupStorageLocations(ns).Get(context.Background(), "goes-away", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		loc.Spec.ValidationFrequency = &metav1.Duration{Duration: 1e9}
		if _, err := s.Clientset.VeleroV1().BackupStorageLocations(ns).Update(context.Background(), loc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitLocation(t, s, "goes-away", func(l *velerov1.BackupStorageLocation) bool {
			return l.Status.Phase == velerov1.BackupStorageLocationPhaseUnavailable
		})
		r = createRestore(t, s, "from-unavailable", velerov1.RestoreSpec{BackupName: "before"})
		if r.Status.Phase != velerov1.RestorePhaseFailedValidation || len(r.Status.ValidationErrors) != 1 ||
			!strings.Contains(r.Status.ValidationErrors[0], `the storage location "goes-away" of backup "before" is unavailable`) {
			t.Errorf("restore from an unavailable location: %s %v", r.Status.Phase, r.Status.ValidationErrors)
		}
	})
}
