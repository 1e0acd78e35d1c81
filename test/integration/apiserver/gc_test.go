package apiserver

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// expireAt sets a backup Completed with the given expiration, as the
// backup engine does when it finishes.
func expireAt(t *testing.T, s *framework.Server, name string, at time.Time) {
	t.Helper()
	walkBackup(t, s, name, velerov1.BackupPhaseCompleted, func(st *velerov1.BackupStatus) {
		st.Expiration = &metav1.Time{Time: at}
	})
}

// TestExpiredBackupsAreCollected: a backup past its expiration is deleted
// (through a DeleteBackupRequest) when it expires; one whose location is
// unavailable is kept and labelled with the reason.
func TestExpiredBackupsAreCollected(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{Args: withoutBackupEngine})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	createFilesystemLocation(t, s, "local")

	createBackup(t, s, "expired", "a")
	createBackup(t, s, "soon", "b")
	createBackup(t, s, "later", "c")
	expireAt(t, s, "expired", time.Now().Add(-time.Hour))
	expireAt(t, s, "soon", time.Now().Add(2*time.Second))
	expireAt(t, s, "later", time.Now().Add(time.Hour))

	for _, name := range []string{"expired", "soon"} {
		if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}); err != nil {
			t.Errorf("backup %s was not collected: %v", name, err)
		}
	}
	dbrs, err := s.Clientset.VeleroV1().DeleteBackupRequests(ns).List(ctx, metav1.ListOptions{LabelSelector: velerov1.BackupNameLabel + "=expired"})
	if err != nil || len(dbrs.Items) != 1 {
		t.Errorf("deletion requests for the expired backup: %v, %v", dbrs, err)
	}
	if _, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, "later", metav1.GetOptions{}); err != nil {
		t.Errorf("a backup not yet expired was collected: %v", err)
	}

	// An expired backup in a location that does not exist is kept, labelled.
	if _, err := s.Clientset.VeleroV1().Backups(ns).Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: ns},
		Spec: velerov1.BackupSpec{StorageLocation: "gone"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expireAt(t, s, "orphan", time.Now().Add(-time.Minute))
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		b, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, "orphan", metav1.GetOptions{})
		return err == nil && b.Labels["velero.io/gc-failure"] == "BSLNotFound", nil
	}); err != nil {
		t.Errorf("expired backup in a missing location: not labelled BSLNotFound: %v", err)
	}
}
