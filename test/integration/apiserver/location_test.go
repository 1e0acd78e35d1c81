package apiserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// waitLocation polls a storage location until cond holds.
func waitLocation(t *testing.T, s *framework.Server, name string, cond func(*velerov1.BackupStorageLocation) bool) *velerov1.BackupStorageLocation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var l *velerov1.BackupStorageLocation
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var err error
		l, err = s.Clientset.VeleroV1().BackupStorageLocations(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return cond(l), nil
	})
	if err != nil {
		t.Fatalf("location %s: condition not reached: %v (last %+v)", name, err, l)
	}
	return l
}

// TestStorageLocations: the default location made at first start, the
// availability check, and a single default per namespace.
func TestStorageLocations(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{Args: []string{"--location-usage-interval=1s"}})
	ctx := context.Background()

	def := waitLocation(t, s, "default", func(l *velerov1.BackupStorageLocation) bool {
		return l.Status.Phase == velerov1.BackupStorageLocationPhaseAvailable
	})
	if want := filepath.Join(s.DataDir, "backups"); def.Spec.Provider != "filesystem" || def.Spec.ObjectStorage.Bucket != want || !def.Spec.Default {
		t.Errorf("default location: %+v, want a default filesystem location at %s", def.Spec, want)
	}
	if fi, err := os.Stat(def.Spec.ObjectStorage.Bucket); err != nil || !fi.IsDir() {
		t.Errorf("the default location's directory: %v", err)
	}
	// Measured every second here (status.usage): nothing there but the
	// file of this test.
	putGzip(t, filepath.Join(def.Spec.ObjectStorage.Bucket, "backups", "old", "old-logs.gz"), "a log")
	if _, err := s.Clientset.VeleroV1().BackupStorageLocations(ns).Patch(ctx, "default", types.MergePatchType,
		[]byte(`{"spec":{"validationFrequency":"1s"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	measured := waitLocation(t, s, "default", func(l *velerov1.BackupStorageLocation) bool {
		u := l.Status.Usage
		return len(u) > 0 && u[len(u)-1].Objects == 1
	})
	if u := measured.Status.Usage; u[len(u)-1].Bytes == 0 || !u[len(u)-1].Time.Equal(measured.Status.LastValidationTime) {
		t.Errorf("the default location's usage: %+v, checked at %v", u, measured.Status.LastValidationTime)
	}

	// A location that cannot be used is Unavailable, with the reason.
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Clientset.VeleroV1().BackupStorageLocations(ns).Create(ctx, &velerov1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Name: "broken", Namespace: ns},
		Spec: velerov1.BackupStorageLocationSpec{Provider: "filesystem",
			StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: filepath.Join(file, "sub")}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	broken := waitLocation(t, s, "broken", func(l *velerov1.BackupStorageLocation) bool { return l.Status.Phase != "" })
	if broken.Status.Phase != velerov1.BackupStorageLocationPhaseUnavailable || !strings.Contains(broken.Status.Message, "not a directory") ||
		broken.Status.LastValidationTime == nil {
		t.Errorf("unusable location: phase %q message %q", broken.Status.Phase, broken.Status.Message)
	}
	// An unknown provider is Unavailable too, saying what is supported.
	if _, err := s.Clientset.VeleroV1().BackupStorageLocations(ns).Create(ctx, &velerov1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Name: "gcs", Namespace: ns},
		Spec: velerov1.BackupStorageLocationSpec{Provider: "gcp",
			StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: "b"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gcs := waitLocation(t, s, "gcs", func(l *velerov1.BackupStorageLocation) bool { return l.Status.Phase != "" })
	if gcs.Status.Phase != velerov1.BackupStorageLocationPhaseUnavailable || !strings.Contains(gcs.Status.Message, `provider "gcp" is not supported`) {
		t.Errorf("unsupported provider: phase %q message %q", gcs.Status.Phase, gcs.Status.Message)
	}

	// A new default location takes over; the older one is unmarked, and
	// new backups go to the new one.
	createFilesystemLocation(t, s, "local")
	waitLocation(t, s, "default", func(l *velerov1.BackupStorageLocation) bool { return !l.Spec.Default })
	// Of one namespace: a backup of all would take the VMs of the tests
	// running beside this one (the system libvirt is shared).
	b, err := s.Clientset.VeleroV1().Backups(ns).Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "b1", Namespace: ns},
		Spec: velerov1.BackupSpec{IncludedNamespaces: []string{"app"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Spec.StorageLocation != "local" {
		t.Errorf("backup storage location = %q, want the new default \"local\"", b.Spec.StorageLocation)
	}
	// A backup created right after a new default location goes to it, not
	// waiting for the older default to be unmarked (the watch cache may not
	// have the new one yet). Names sort after the earlier ones: two
	// defaults created in one second are told apart by name.
	for i := range 5 {
		name := fmt.Sprintf("zz-%d", i)
		createFilesystemLocation(t, s, name)
		b, err := s.Clientset.VeleroV1().Backups(ns).Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "right-after-" + name, Namespace: ns},
			Spec: velerov1.BackupSpec{IncludedNamespaces: []string{"app"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if b.Spec.StorageLocation != name {
			t.Errorf("backup created right after the default location %s: its location is %q", name, b.Spec.StorageLocation)
		}
	}

	// Deleting the default location is respected across restarts.
	if err := s.Clientset.VeleroV1().BackupStorageLocations(ns).Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Restart(false)
	if _, err := s.Clientset.VeleroV1().BackupStorageLocations(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
		t.Errorf("the deleted default location came back after a restart")
	}
}
