package apiserver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	kvbackupv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// fastOperations polls async operations often, so tests do not wait.
var fastOperations = []string{"--item-operation-sync-frequency=200ms"}

// createVMTracker creates a tracker whose VM's disks Velero backups back
// up into pvc.
func createVMTracker(t *testing.T, s *framework.Server, namespace, name, pvc string) {
	t.Helper()
	group := "kubevirt.io"
	if _, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(namespace).Create(context.Background(), &kvbackupv1alpha1.VirtualMachineBackupTracker{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: map[string]string{"backstop.io/vm-backup-pvc": pvc}},
		Spec: kvbackupv1alpha1.VirtualMachineBackupTrackerSpec{Source: corev1.TypedLocalObjectReference{
			APIGroup: &group, Kind: "VirtualMachine", Name: "vm-" + name}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating tracker %s/%s: %v", namespace, name, err)
	}
}

// endVMBackup sets a VirtualMachineBackup's condition, as the VM backup
// engine does when the backup ends.
func endVMBackup(t *testing.T, s *framework.Server, namespace, name string, cond kvbackupv1alpha1.ConditionType, message string) {
	t.Helper()
	ctx := context.Background()
	vmbs := s.EngineClientset().BackupV1alpha1().VirtualMachineBackups(namespace)
	set := func(conds ...metav1.Condition) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			vmb, err := vmbs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if vmb.Status == nil {
				vmb.Status = &kvbackupv1alpha1.VirtualMachineBackupStatus{}
			}
			vmb.Status.Progress = &kvbackupv1alpha1.BackupProgress{TotalBytes: 4096, BytesDone: 4096}
			for _, c := range conds {
				meta.SetStatusCondition(&vmb.Status.Conditions, c)
			}
			_, err = vmbs.UpdateStatus(ctx, vmb, metav1.UpdateOptions{})
			return err
		})
	}
	// Running first, then the end: the transitions the engine makes.
	err := set(metav1.Condition{Type: string(kvbackupv1alpha1.ConditionProgressing), Status: metav1.ConditionTrue, Reason: kvbackupv1alpha1.ReasonInitiated, Message: "test"})
	if err == nil {
		err = set(metav1.Condition{Type: string(kvbackupv1alpha1.ConditionProgressing), Status: metav1.ConditionFalse, Reason: string(cond), Message: message},
			metav1.Condition{Type: string(cond), Status: metav1.ConditionTrue, Reason: string(cond), Message: message})
	}
	if err != nil {
		t.Fatalf("ending VirtualMachineBackup %s/%s: %v", namespace, name, err)
	}
}

func vmBackupGone(t *testing.T, s *framework.Server, namespace, name string) bool {
	t.Helper()
	_, err := s.Clientset.BackupV1alpha1().VirtualMachineBackups(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return apierrors.IsNotFound(err)
}

// vmBackupAborted waits until the VM backup engine has aborted a
// VirtualMachineBackup (Failed, reason Aborted): its cancel subresource
// was called.
func vmBackupAborted(t *testing.T, s *framework.Server, namespace, name string) {
	t.Helper()
	waitVMBackup(t, s, namespace, name, "aborted", func(b *kvbackupv1alpha1.VirtualMachineBackup) bool {
		c := vmbCondition(b, kvbackupv1alpha1.ConditionFailed)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "Aborted"
	})
}

// operationRecord is an entry of <backup>-itemoperations.json.gz, in
// Velero's itemoperation.BackupOperation JSON.
type operationRecord struct {
	Spec struct {
		BackupName         string `json:"backupName"`
		BackupItemAction   string `json:"backupItemAction"`
		OperationID        string `json:"operationID"`
		ResourceIdentifier struct {
			Group, Resource, Namespace, Name string
		} `json:"resourceIdentifier"`
	} `json:"spec"`
	Status struct {
		Phase      string `json:"phase"`
		Error      string `json:"error"`
		NCompleted int64  `json:"nCompleted"`
		NTotal     int64  `json:"nTotal"`
	} `json:"status"`
}

func itemOperations(t *testing.T, s *framework.Server, backup string) map[string]operationRecord {
	t.Helper()
	var list []operationRecord
	if err := json.Unmarshal([]byte(readGzipFile(t, backupFile(s, backup, "-itemoperations.json.gz"))), &list); err != nil {
		t.Fatalf("item operations of %s: %v", backup, err)
	}
	out := map[string]operationRecord{}
	for _, op := range list {
		out[op.Spec.OperationID] = op
	}
	return out
}

func waiting(b *velerov1.Backup) bool {
	return b.Status.Phase == velerov1.BackupPhaseWaitingForPluginOperations ||
		b.Status.Phase == velerov1.BackupPhaseWaitingForPluginOperationsPartiallyFailed
}

// TestBackupAsyncOperations: a backup that takes trackers annotated with
// a PVC starts a VirtualMachineBackup for each (an async operation) and
// waits for them (WaitingForPluginOperations) before it finalizes; the
// operations' outcomes, timeouts, a cancel and a restart while waiting
// end it as Velero users expect, with the item operations file beside it.
func TestBackupAsyncOperations(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{Args: fastOperations})
	ctx := context.Background()

	t.Run("complete-and-fail", func(t *testing.T) {
		createVMTracker(t, s, "vms", "vm1", "out1")
		createVMTracker(t, s, "vms", "vm2", "out2")
		createTracker(t, s, "vms", "plain", nil)
		createBackup(t, s, "ops", "vms")
		b := waitBackup(t, s, "ops", "waiting for its operations", waiting)
		if b.Status.BackupItemOperationsAttempted != 2 || b.Status.Progress == nil || b.Status.Progress.ItemsBackedUp != 3 {
			t.Errorf("waiting backup: operations attempted %d, progress %+v", b.Status.BackupItemOperationsAttempted, b.Status.Progress)
		}
		vmb, err := s.Clientset.BackupV1alpha1().VirtualMachineBackups("vms").Get(ctx, "ops-vm1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if src := vmb.Spec.Source; src.Kind != "VirtualMachineBackupTracker" || src.Name != "vm1" || vmb.Spec.PvcName == nil || *vmb.Spec.PvcName != "out1" ||
			vmb.Labels["velero.io/backup-name"] != "ops" || vmb.Labels["velero.io/backup-uid"] != string(b.UID) {
			t.Errorf("VirtualMachineBackup ops-vm1: %+v labels %v", vmb.Spec, vmb.Labels)
		}
		if !vmBackupGone(t, s, "vms", "ops-plain") {
			t.Error("a VirtualMachineBackup was started for a tracker without a PVC")
		}
		// The operations are recorded while the backup waits.
		if ops := itemOperations(t, s, "ops"); len(ops) != 2 || ops["vms/ops-vm1"].Status.Phase != "InProgress" ||
			ops["vms/ops-vm1"].Spec.BackupItemAction != "backstop.io/vm-disks" || ops["vms/ops-vm1"].Spec.ResourceIdentifier.Name != "vm1" {
			t.Errorf("item operations while waiting: %+v", ops)
		}

		endVMBackup(t, s, "vms", "ops-vm1", kvbackupv1alpha1.ConditionComplete, "done")
		b = waitBackup(t, s, "ops", "seeing one operation complete", func(b *velerov1.Backup) bool { return b.Status.BackupItemOperationsCompleted == 1 })
		if !waiting(b) {
			t.Fatalf("backup %s with an operation still running, want WaitingForPluginOperations", b.Status.Phase)
		}
		endVMBackup(t, s, "vms", "ops-vm2", kvbackupv1alpha1.ConditionFailed, "disk vanished")
		b = waitBackup(t, s, "ops", "finished", finished)
		st := b.Status
		if st.Phase != velerov1.BackupPhasePartiallyFailed || st.BackupItemOperationsAttempted != 2 || st.BackupItemOperationsCompleted != 1 ||
			st.BackupItemOperationsFailed != 1 || st.Errors != 1 {
			t.Errorf("backup with a failed operation: %s, operations %d/%d/%d, errors %d", st.Phase,
				st.BackupItemOperationsAttempted, st.BackupItemOperationsCompleted, st.BackupItemOperationsFailed, st.Errors)
		}
		ops := itemOperations(t, s, "ops")
		if op := ops["vms/ops-vm1"]; op.Status.Phase != "Completed" || op.Status.NCompleted != 4096 || op.Status.NTotal != 4096 {
			t.Errorf("completed operation: %+v", op.Status)
		}
		if op := ops["vms/ops-vm2"]; op.Status.Phase != "Failed" || !strings.Contains(op.Status.Error, "disk vanished") {
			t.Errorf("failed operation: %+v", op.Status)
		}
		if logs := backupLogs(t, s, "ops"); !strings.Contains(logs, "disk vanished") || !strings.Contains(logs, "Waiting for async operations") {
			t.Errorf("logs:\n%s", logs)
		}
	})

	t.Run("all-complete", func(t *testing.T) {
		createVMTracker(t, s, "vms-ok", "vm1", "out")
		createBackup(t, s, "good", "vms-ok")
		waitBackup(t, s, "good", "waiting for its operations", waiting)
		endVMBackup(t, s, "vms-ok", "good-vm1", kvbackupv1alpha1.ConditionComplete, "")
		b := waitBackup(t, s, "good", "finished", finished)
		if b.Status.Phase != velerov1.BackupPhaseCompleted || b.Status.BackupItemOperationsCompleted != 1 || b.Status.Errors != 0 {
			t.Errorf("backup whose operation completed: %s, completed %d, errors %d", b.Status.Phase, b.Status.BackupItemOperationsCompleted, b.Status.Errors)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		createVMTracker(t, s, "vms-slow", "vm1", "out")
		if _, err := s.Clientset.VeleroV1().Backups(ns).Create(ctx, &velerov1.Backup{
			ObjectMeta: metav1.ObjectMeta{Name: "slowops", Namespace: ns},
			Spec: velerov1.BackupSpec{IncludedNamespaces: []string{"vms-slow"},
				ItemOperationTimeout: metav1.Duration{Duration: time.Second}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		b := waitBackup(t, s, "slowops", "finished", finished)
		if b.Status.Phase != velerov1.BackupPhasePartiallyFailed || b.Status.BackupItemOperationsFailed != 1 {
			t.Errorf("backup whose operation timed out: %s, failed %d", b.Status.Phase, b.Status.BackupItemOperationsFailed)
		}
		if op := itemOperations(t, s, "slowops")["vms-slow/slowops-vm1"]; op.Status.Phase != "Failed" || !strings.Contains(op.Status.Error, "timed out after 1s") {
			t.Errorf("timed-out operation: %+v", op.Status)
		}
		vmBackupAborted(t, s, "vms-slow", "slowops-vm1")
	})

	t.Run("cancel-while-waiting", func(t *testing.T) {
		createVMTracker(t, s, "vms-cancel", "vm1", "out")
		createBackup(t, s, "cancelme", "vms-cancel")
		waitBackup(t, s, "cancelme", "waiting for its operations", waiting)
		if err := s.Clientset.VeleroV1().RESTClient().Post().Namespace(ns).Resource("backups").Name("cancelme").SubResource("cancel").Do(ctx).Error(); err != nil {
			t.Fatalf("cancel: %v", err)
		}
		b := waitBackup(t, s, "cancelme", "finished", finished)
		if b.Status.Phase != velerov1.BackupPhaseFailed || b.Status.FailureReason != "Backup cancelled by user" {
			t.Errorf("backup cancelled while waiting: %s %q", b.Status.Phase, b.Status.FailureReason)
		}
		vmBackupAborted(t, s, "vms-cancel", "cancelme-vm1")
		entries, err := os.ReadDir(filepath.Join(s.DataDir, "backups", "backups", "cancelme"))
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, e := range entries {
			left = append(left, e.Name())
		}
		if strings.Join(left, ",") != "cancelme-logs.gz" {
			t.Errorf("the cancelled backup left %v, want only its log", left)
		}
		if logs := backupLogs(t, s, "cancelme"); !strings.Contains(logs, "Backup cancelled by user") {
			t.Errorf("logs:\n%s", logs)
		}
	})

	// Killed while the backup waits: the restart resumes the wait (the
	// item operations file says for what), and the backup completes
	// with its operation.
	t.Run("restart-while-waiting", func(t *testing.T) {
		createVMTracker(t, s, "vms-restart", "vm1", "out")
		createBackup(t, s, "interrupted", "vms-restart")
		waitBackup(t, s, "interrupted", "waiting for its operations", waiting)
		s.Restart(true)
		endVMBackup(t, s, "vms-restart", "interrupted-vm1", kvbackupv1alpha1.ConditionComplete, "")
		b := waitBackup(t, s, "interrupted", "finished", finished)
		if b.Status.Phase != velerov1.BackupPhaseCompleted || b.Status.BackupItemOperationsCompleted != 1 {
			t.Errorf("backup interrupted while waiting: %s %q, %d operations completed; want Completed with its one", b.Status.Phase, b.Status.FailureReason, b.Status.BackupItemOperationsCompleted)
		}
		if logs := backupLogs(t, s, "interrupted"); !strings.Contains(logs, "Backup resumed after a restart of the server") {
			t.Errorf("the log of the resumed backup does not say it resumed:\n%s", logs)
		}
		if _, err := os.Stat(backupFile(s, "interrupted", ".tar.gz")); err != nil {
			t.Errorf("tarball of the resumed backup: %v", err)
		}
	})
}
