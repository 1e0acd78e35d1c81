package apiserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/conformance"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestStatusBelongsToTheServer: the status of a resource with a life is
// written by the server's engines only; a cluster admin's write through
// the status subresource (update or patch) is refused with 422, and the
// phase does not move. Even as an engine, a phase change the transition
// table does not list is refused: a Completed backup never becomes
// ReadyToStart again.
func TestStatusBelongsToTheServer(t *testing.T) {
	s := apiServer(t)
	ctx := context.Background()
	createBackup(t, s, "done", "app")
	done := setBackupPhase(t, s, "done", velerov1.BackupPhaseCompleted)

	admin := s.Clientset.VeleroV1().Backups(ns)
	moved := done.DeepCopy()
	moved.Status.Phase = velerov1.BackupPhaseReadyToStart
	if _, err := admin.UpdateStatus(ctx, moved, metav1.UpdateOptions{}); !invalidAt(err, "status", "written by the server's engines only") {
		t.Errorf("admin moving a Completed backup to ReadyToStart: %v, want 422 at status", err)
	}
	if _, err := admin.Patch(ctx, "done", types.MergePatchType, []byte(`{"status":{"errors":7}}`), metav1.PatchOptions{}, "status"); !invalidAt(err, "status", "written by the server's engines only") {
		t.Errorf("admin patching a backup's status: %v, want 422 at status", err)
	}
	if _, err := admin.Patch(ctx, "done", types.MergePatchType, []byte(`{"metadata":{"labels":{"seen":"yes"}}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Errorf("admin patching only metadata through the status subresource: %v", err)
	}

	engine := s.EngineClientset().VeleroV1().Backups(ns)
	cur, err := engine.Get(ctx, "done", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Status.Phase = velerov1.BackupPhaseReadyToStart
	if _, err := engine.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); !invalidAt(err, "status.phase", "terminal phase Completed cannot move back to ReadyToStart") {
		t.Errorf("an engine moving a Completed backup to ReadyToStart: %v, want 422 at status.phase", err)
	}
	if got, _ := admin.Get(ctx, "done", metav1.GetOptions{}); got.Status.Phase != velerov1.BackupPhaseCompleted {
		t.Errorf("backup is %s after the refused writes, want Completed", got.Status.Phase)
	}

	// The queue sequence is the server's: a client cannot set it on
	// create nor change it on update.
	if _, err := admin.Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "jumper", Namespace: ns,
		Annotations: map[string]string{velerov1.QueueSequenceAnnotation: "-5"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	queued := waitBackup(t, s, "jumper", "queued", func(b *velerov1.Backup) bool { return b.Status.Phase != "" })
	if seq := queued.Annotations[velerov1.QueueSequenceAnnotation]; seq == "-5" || seq == "" {
		t.Errorf("queue sequence of a backup created with -5: %q, want the server's", seq)
	}
	patch := []byte(`{"metadata":{"annotations":{"` + velerov1.QueueSequenceAnnotation + `":"0"}}}`)
	if got, err := admin.Patch(ctx, "jumper", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil || got.Annotations[velerov1.QueueSequenceAnnotation] != queued.Annotations[velerov1.QueueSequenceAnnotation] {
		t.Errorf("patching the queue sequence: %v, sequence %q, want it kept at %q", err, got.Annotations[velerov1.QueueSequenceAnnotation], queued.Annotations[velerov1.QueueSequenceAnnotation])
	}

	// Restores: namespaceMapping is checked when written.
	_, err = s.Clientset.VeleroV1().Restores(ns).Create(ctx, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: ns},
		Spec: velerov1.RestoreSpec{BackupName: "done", NamespaceMapping: map[string]string{"app": ""}}}, metav1.CreateOptions{})
	if !invalidAt(err, "spec.namespaceMapping[app]", "both namespaces must be named") {
		t.Errorf("restore mapping a namespace to nothing: %v, want 422 at spec.namespaceMapping[app]", err)
	}
}

// TestVMBackupCancelRules: a VirtualMachineBackup is cancelled as a Backup
// is: not once it has ended (409, by the subresource or by adding the
// annotation), never un-cancelled (422, through the resource or its
// status), and the status of one that has ended does not change.
func TestVMBackupCancelRules(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{Args: []string{"--disable-controllers=vmbackup,vmcbt"}})
	ctx := context.Background()
	const vmNS = "vms"
	createVMBackup(t, s, vmNS, "running", "vm1", false, "out", false)
	createVMBackup(t, s, vmNS, "ended", "vm2", false, "out", false)
	endVMBackup(t, s, vmNS, "ended", kv.ConditionComplete, "done")

	vmbs := s.Clientset.BackupV1alpha1().VirtualMachineBackups(vmNS)
	cancel := func(name string) error {
		return s.Clientset.BackupV1alpha1().RESTClient().Post().Namespace(vmNS).Resource("virtualmachinebackups").Name(name).SubResource("cancel").Do(ctx).Error()
	}
	if err := cancel("ended"); !apierrors.IsConflict(err) {
		t.Errorf("cancel of an ended VM backup: %v, want 409", err)
	}
	annotate := []byte(`{"metadata":{"annotations":{"` + kv.CancelAnnotation + `":"now"}}}`)
	if _, err := vmbs.Patch(ctx, "ended", types.MergePatchType, annotate, metav1.PatchOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("adding the cancel annotation to an ended VM backup: %v, want 409", err)
	}

	if err := cancel("running"); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	uncancel := []byte(`{"metadata":{"annotations":{"` + kv.CancelAnnotation + `":null}}}`)
	if _, err := vmbs.Patch(ctx, "running", types.MergePatchType, uncancel, metav1.PatchOptions{}); !invalidAt(err, "metadata.annotations["+kv.CancelAnnotation+"]", "cannot be un-cancelled") {
		t.Errorf("removing the cancel annotation: %v, want 422", err)
	}
	if _, err := s.EngineClientset().BackupV1alpha1().VirtualMachineBackups(vmNS).Patch(ctx, "running", types.MergePatchType, uncancel, metav1.PatchOptions{}, "status"); !invalidAt(err, "metadata.annotations["+kv.CancelAnnotation+"]", "cannot be un-cancelled") {
		t.Errorf("removing the cancel annotation through the status: %v, want 422", err)
	}
	if got, err := vmbs.Get(ctx, "running", metav1.GetOptions{}); err != nil || got.Annotations[kv.CancelAnnotation] == "" {
		t.Errorf("after the refused un-cancels: %v, annotations %v", err, got.Annotations)
	}

	fail := []byte(`{"status":{"conditions":[{"type":"Failed","status":"True","reason":"Again","message":"m","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`)
	if _, err := s.EngineClientset().BackupV1alpha1().VirtualMachineBackups(vmNS).Patch(ctx, "ended", types.MergePatchType, fail, metav1.PatchOptions{}, "status"); !invalidAt(err, "status.conditions", "") {
		t.Errorf("an engine failing a completed VM backup: %v, want 422 at status.conditions", err)
	}
}

// TestMetricsAfterBackup: a backup's transitions are counted at /metrics
// with Velero's names and labels.
func TestMetricsAfterBackup(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	createBackup(t, s, "counted", "app")
	b := waitBackup(t, s, "counted", "finished", finished)
	if b.Status.Phase != velerov1.BackupPhaseCompleted {
		t.Fatalf("backup: %s %q", b.Status.Phase, b.Status.FailureReason)
	}
	// Each engine wrote the status under its own field manager.
	for _, engine := range []string{velerov1.EngineBackupQueue, velerov1.EngineBackup} {
		found := false
		for _, f := range b.ManagedFields {
			found = found || (f.Manager == engine && f.Subresource == "status")
		}
		if !found {
			t.Errorf("no status field manager %s among %v", engine, conformance.Managers(b))
		}
	}
	// The engines' status writer tells its observers after the write, so
	// a client that has seen the phase may scrape before they have run.
	want := []string{
		`velero_backup_attempt_total{schedule=""} 1`,
		`velero_backup_success_total{schedule=""} 1`,
		`velero_backup_last_status{schedule=""} 1`,
		`velero_backup_duration_seconds_count{schedule=""} 1`,
		`# TYPE velero_backup_last_successful_timestamp gauge`,
		`velero_backup_tarball_size_bytes{schedule=""} `,
		// Read from the objects at the engines' start: backups of no
		// schedule have every series (a first failure shows as an
		// increase), the totals, the locations, the queue.
		`velero_backup_failure_total{schedule=""} 0`,
		`velero_restore_failed_total{schedule=""} 0`,
		`velero_volume_snapshot_attempt_total{schedule=""} 0`,
		`velero_csi_snapshot_attempt_total{backupName="",schedule=""} 0`,
		`# TYPE velero_backup_total gauge`,
		`velero_backup_location_status_gauge{backup_location_name="default"}`,
		`# TYPE backstop_backup_queue_length gauge`,
	}
	var missing []string
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		raw, err := s.Clientset.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return false, fmt.Errorf("GET /metrics: %w", err)
		}
		missing = missing[:0]
		for _, line := range want {
			if !strings.Contains(string(raw), line) {
				missing = append(missing, line)
			}
		}
		if strings.Contains(string(raw), `velero_backup_tarball_size_bytes{schedule=""} 0`+"\n") {
			missing = append(missing, "a tarball size above 0")
		}
		return len(missing) == 0, nil
	}); err != nil {
		t.Errorf("/metrics: %v; lines missing: %q", err, missing)
	}
}

// TestFinalizersOwnCleanup: deleting a Backup (not through a
// DeleteBackupRequest) or a Restore holds the object, with its finalizer,
// until the engine has deleted its data from the storage location; then
// the object is gone and so are its files.
func TestFinalizersOwnCleanup(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	createBackup(t, s, "kept", "app")
	b := waitBackup(t, s, "kept", "finished", finished)
	if b.Status.Phase != velerov1.BackupPhaseCompleted || !slices.Contains(b.Finalizers, velerov1.BackupDataFinalizer) {
		t.Fatalf("backup: %s %q, finalizers %v", b.Status.Phase, b.Status.FailureReason, b.Finalizers)
	}
	restore, err := s.Clientset.VeleroV1().Restores(ns).Create(ctx, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "r1", Namespace: ns},
		Spec: velerov1.RestoreSpec{BackupName: "kept"}}, metav1.CreateOptions{})
	if err != nil || !slices.Contains(restore.Finalizers, velerov1.RestoreDataFinalizer) {
		t.Fatalf("restore: %v, finalizers %v", err, restore.Finalizers)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		r, err := s.Clientset.VeleroV1().Restores(ns).Get(ctx, "r1", metav1.GetOptions{})
		return err == nil && r.Status.Phase.Terminal(), nil
	}); err != nil {
		t.Fatalf("restore r1 did not finish: %v", err)
	}

	backupDir := filepath.Join(s.DataDir, "backups", "backups", "kept")
	restoreDir := filepath.Join(s.DataDir, "backups", "restores", "r1")
	for _, dir := range []string{backupDir, restoreDir} {
		if entries, err := os.ReadDir(dir); err != nil || len(entries) == 0 {
			t.Fatalf("%s before the deletion: %v, %d files", dir, err, len(entries))
		}
	}
	if err := s.Clientset.VeleroV1().Backups(ns).Delete(ctx, "kept", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone := func(get func() error) bool {
		return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return apierrors.IsNotFound(get()), nil
		}) == nil
	}
	if !gone(func() error {
		_, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, "kept", metav1.GetOptions{})
		return err
	}) {
		t.Fatal("the deleted backup is still there after a minute")
	}
	if !gone(func() error {
		_, err := s.Clientset.VeleroV1().Restores(ns).Get(ctx, "r1", metav1.GetOptions{})
		return err
	}) {
		t.Fatal("the restore of the deleted backup is still there after a minute")
	}
	for _, dir := range []string{backupDir, restoreDir} {
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			t.Errorf("%s still holds %d files after the deletion", dir, len(entries))
		}
	}
}
