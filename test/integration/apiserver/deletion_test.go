package apiserver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// waitProcessed waits for a DeleteBackupRequest to be Processed.
func waitProcessed(t *testing.T, s *framework.Server, name string) *velerov1.DeleteBackupRequest {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var dbr *velerov1.DeleteBackupRequest
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var err error
		dbr, err = s.Clientset.VeleroV1().DeleteBackupRequests(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && dbr.Status.Phase == velerov1.DeleteBackupRequestPhaseProcessed, nil
	})
	if err != nil {
		t.Fatalf("delete request %s not processed: %v (last %+v)", name, err, dbr)
	}
	return dbr
}

func deleteRequest(t *testing.T, s *framework.Server, name, backup string) {
	t.Helper()
	if _, err := s.Clientset.VeleroV1().DeleteBackupRequests(ns).Create(context.Background(), &velerov1.DeleteBackupRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       velerov1.DeleteBackupRequestSpec{BackupName: backup},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteBackupRequests: `velero backup delete` removes the backup's
// data, its restores and the backup; a missing backup is an error on the
// request; a running backup is cancelled first and deleted once stopped.
func TestDeleteBackupRequests(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{Args: withoutBackupEngine})
	ctx := context.Background()
	bucket := createFilesystemLocation(t, s, "local")

	createBackup(t, s, "b1", "shop")
	setBackupPhase(t, s, "b1", velerov1.BackupPhaseCompleted)
	if _, err := s.Clientset.VeleroV1().Restores(ns).Create(ctx, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "r1", Namespace: ns},
		Spec: velerov1.RestoreSpec{BackupName: "b1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"backups/b1/b1.tar.gz", "backups/b1/b1-logs.gz", "backups/b1/velero-backup.json", "restores/r1/restore-r1-logs.gz", "backups/other/other.tar.gz"} {
		putGzip(t, filepath.Join(bucket, f), "x")
	}

	veleroCLI(t, s, "backup", "delete", "b1", "--confirm")
	dbrs, err := s.Clientset.VeleroV1().DeleteBackupRequests(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(dbrs.Items) != 1 {
		t.Fatalf("delete requests after velero backup delete: %v, %v", dbrs, err)
	}
	dbr := waitProcessed(t, s, dbrs.Items[0].Name)
	if len(dbr.Status.Errors) != 0 {
		t.Errorf("delete request errors: %v", dbr.Status.Errors)
	}
	// The request is Processed once it has deleted them; each goes when
	// its finalizer's cleanup is done.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, errB := s.Clientset.VeleroV1().Backups(ns).Get(ctx, "b1", metav1.GetOptions{})
		_, errR := s.Clientset.VeleroV1().Restores(ns).Get(ctx, "r1", metav1.GetOptions{})
		return apierrors.IsNotFound(errB) && apierrors.IsNotFound(errR), nil
	}); err != nil {
		_, errB := s.Clientset.VeleroV1().Backups(ns).Get(ctx, "b1", metav1.GetOptions{})
		_, errR := s.Clientset.VeleroV1().Restores(ns).Get(ctx, "r1", metav1.GetOptions{})
		t.Errorf("backup and its restore after deletion: %v, %v, want NotFound", errB, errR)
	}
	for _, gone := range []string{"backups/b1", "restores/r1"} {
		if entries, _ := os.ReadDir(filepath.Join(bucket, gone)); len(entries) != 0 {
			t.Errorf("%s still holds %d files", gone, len(entries))
		}
	}
	if _, err := os.Stat(filepath.Join(bucket, "backups/other/other.tar.gz")); err != nil {
		t.Errorf("another backup's data was touched: %v", err)
	}

	// A request for a backup that does not exist ends with the reason.
	deleteRequest(t, s, "missing", "no-such-backup")
	if dbr := waitProcessed(t, s, "missing"); len(dbr.Status.Errors) != 1 || !strings.Contains(dbr.Status.Errors[0], "not found") {
		t.Errorf("request for a missing backup: errors %v", dbr.Status.Errors)
	}

	// A running backup is cancelled, then deleted once it has stopped.
	createBackup(t, s, "running", "billing")
	waitQueue(t, s, map[string]string{"running": "ReadyToStart/0"})
	setBackupPhase(t, s, "running", velerov1.BackupPhaseInProgress)
	deleteRequest(t, s, "del-running", "running")
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := wait.PollUntilContextCancel(wctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		b, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, "running", metav1.GetOptions{})
		return err == nil && b.Spec.Cancel, nil
	}); err != nil {
		t.Fatalf("the running backup was not asked to cancel: %v", err)
	}
	if dbr, err := s.Clientset.VeleroV1().DeleteBackupRequests(ns).Get(ctx, "del-running", metav1.GetOptions{}); err != nil ||
		dbr.Status.Phase != velerov1.DeleteBackupRequestPhaseInProgress {
		t.Errorf("request while the backup runs: %+v, %v", dbr.Status, err)
	}
	setBackupPhase(t, s, "running", velerov1.BackupPhaseFailed) // what the backup engine does after a cancel
	waitProcessed(t, s, "del-running")
	// Gone once its finalizer's cleanup is done, after the request.
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = s.Clientset.VeleroV1().Backups(ns).Get(ctx, "running", metav1.GetOptions{})
		return apierrors.IsNotFound(last), nil
	}); err != nil {
		t.Errorf("cancelled backup after deletion: %v, want NotFound", last)
	}
}
