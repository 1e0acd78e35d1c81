package apiserver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/virt"
	"github.com/backstop-io/backstop/pkg/virt/virttest"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// waitTrackerCBT polls a tracker until its changed block tracking state is
// want (and no failure reason is shown).
func waitTrackerCBT(t *testing.T, s *framework.Server, namespace, name string, want kv.ChangedBlockTrackingState) *kv.VirtualMachineBackupTracker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var last *kv.VirtualMachineBackupTracker
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		tr, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = tr
		st := tr.Status
		return st != nil && st.ChangedBlockTracking != nil && st.ChangedBlockTracking.State == want && st.ChangedBlockTracking.Reason == "", nil
	}); err != nil {
		var st any
		if last != nil {
			st = last.Status
		}
		t.Fatalf("tracker %s never showed changed block tracking %s; last status %+v", name, want, st)
	}
	return last
}

// annotateTracker sets (value != "") or removes the changed block tracking
// annotation of a tracker.
func annotateTracker(t *testing.T, s *framework.Server, namespace, name, value string) error {
	t.Helper()
	ctx := context.Background()
	tr, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Annotations == nil {
		tr.Annotations = map[string]string{}
	}
	if value == "" {
		delete(tr.Annotations, kv.ChangedBlockTrackingAnnotation)
	} else {
		tr.Annotations[kv.ChangedBlockTrackingAnnotation] = value
	}
	_, err = s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(namespace).Update(ctx, tr, metav1.UpdateOptions{})
	return err
}

// TestVMChangedBlockTracking: a tracker selects its VM for changed block
// tracking, through the server on a real libvirt daemon and QEMU. A VM
// with a raw disk shows PendingRestart on its tracker while it runs with
// the raw disk (its backups are then full, without a checkpoint, and say
// so), Enabled once restarted (incrementals hold exactly the writes, the
// chain equals the raw image); the tracker's annotation "false" disables
// it (PendingRestart, then Disabled after a restart, the overlays gone);
// a bad annotation value is refused with its field path; deleting the last
// tracker of a VM disables it.
func TestVMChangedBlockTracking(t *testing.T) {
	t.Parallel()
	root := vmVolumeRoot(t)
	s := framework.Start(t, framework.Options{Args: []string{"--volume-root=" + root}})
	ctx := context.Background()
	const vmNS = "cbt"
	dom := virttest.NewRawDomain(t, vmNS+"_vm1", "64M")
	conn, err := virt.Open(virttest.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	volume := filepath.Join(root, vmNS, "pvc1")
	if err := os.MkdirAll(volume, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, vmNS), 0o755); err != nil {
		t.Fatal(err)
	}
	overlays, err := virt.OverlayDir(filepath.Join(root, ".cbt"), dom.Name)
	if err != nil {
		t.Fatal(err)
	}
	dom.Write(t, 0x11, "0", "4M")

	group := "kubevirt.io"
	tracker := &kv.VirtualMachineBackupTracker{
		ObjectMeta: metav1.ObjectMeta{Name: "vm1-tracker", Namespace: vmNS},
		Spec:       kv.VirtualMachineBackupTrackerSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VirtualMachine", Name: "vm1"}},
	}
	if _, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(vmNS).Create(ctx, tracker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The running VM keeps its raw disk until it is started again.
	waitTrackerCBT(t, s, vmNS, tracker.Name, kv.ChangedBlockTrackingPendingRestart)
	if _, err := os.Stat(filepath.Join(overlays, "vda.qcow2")); err != nil {
		t.Fatalf("the overlay of the raw disk: %v", err)
	}
	createVMBackup(t, s, vmNS, "b0", tracker.Name, true, "pvc1", false)
	b0 := waitVMBackup(t, s, vmNS, "b0", "finished", vmbFinished)
	complete := vmbCondition(b0, kv.ConditionComplete)
	if complete == nil || complete.Status != metav1.ConditionTrue || complete.Reason != kv.ReasonCompletedWithWarning ||
		b0.Status.Type != kv.Full || b0.Status.CheckpointName != nil {
		t.Fatalf("backup of a raw disk pending restart: want Complete (%s), Full, no checkpoint; got %+v", kv.ReasonCompletedWithWarning, b0.Status)
	}
	if m := checkManifest(t, filepath.Join(volume, "b0")); m.Checkpoint != "" || m.Type != kv.Full {
		t.Errorf("manifest of the full backup without a checkpoint: %+v", m)
	}

	// Started again, the VM reads its raw disk through the overlay.
	dom.Stop(t)
	dom.Start(t)
	waitTrackerCBT(t, s, vmNS, tracker.Name, kv.ChangedBlockTrackingEnabled)
	createVMBackup(t, s, vmNS, "b1", tracker.Name, true, "pvc1", false)
	b1 := waitVMBackup(t, s, vmNS, "b1", "finished", vmbFinished)
	if !meta.IsStatusConditionTrue(b1.Status.Conditions, string(kv.ConditionComplete)) || b1.Status.Type != kv.Full || b1.Status.CheckpointName == nil {
		t.Fatalf("first backup with changed block tracking: %+v", b1.Status)
	}
	dom.Write(t, 0xab, "2M", "64k")
	dom.Write(t, 0xcd, "30M", "128k")
	createVMBackup(t, s, vmNS, "b2", tracker.Name, true, "pvc1", false)
	b2 := waitVMBackup(t, s, vmNS, "b2", "finished", vmbFinished)
	if !meta.IsStatusConditionTrue(b2.Status.Conditions, string(kv.ConditionComplete)) || b2.Status.Type != kv.Incremental {
		t.Fatalf("incremental backup of the raw disk: %+v", b2.Status)
	}
	inc := filepath.Join(volume, "b2", "vda.qcow2")
	if got := virttest.DataRanges(t, inc); !slices.Equal(got, []string{"2097152+65536", "31457280+131072"}) {
		t.Errorf("incremental holds %v, want exactly the writes", got)
	}
	dom.Suspend(t)
	virttest.Run(t, "qemu-img", "compare", "-U", "-F", "raw", inc, dom.Disk)
	dom.Resume(t)

	// A bad annotation value is refused, naming the field.
	err = annotateTracker(t, s, vmNS, tracker.Name, "off")
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil || len(status.Status().Details.Causes) != 1 ||
		status.Status().Details.Causes[0].Field != "metadata.annotations[backstop.io/changed-block-tracking]" {
		t.Fatalf("annotation value \"off\": %v, want 422 naming the annotation", err)
	}

	// Deselected: PendingRestart while QEMU still uses the overlay, then
	// Disabled, the overlay gone; backups are full without a checkpoint and
	// the tracker no longer has one.
	if err := annotateTracker(t, s, vmNS, tracker.Name, "false"); err != nil {
		t.Fatal(err)
	}
	waitTrackerCBT(t, s, vmNS, tracker.Name, kv.ChangedBlockTrackingPendingRestart)
	dom.Stop(t)
	dom.Start(t)
	waitTrackerCBT(t, s, vmNS, tracker.Name, kv.ChangedBlockTrackingDisabled)
	if _, err := os.Stat(overlays); !os.IsNotExist(err) {
		t.Errorf("overlay directory after disabling: %v, want it removed", err)
	}
	createVMBackup(t, s, vmNS, "b3", tracker.Name, true, "pvc1", false)
	b3 := waitVMBackup(t, s, vmNS, "b3", "finished", vmbFinished)
	if c := vmbCondition(b3, kv.ConditionComplete); c == nil || c.Status != metav1.ConditionTrue || c.Reason != kv.ReasonCompletedWithWarning ||
		b3.Status.Type != kv.Full || b3.Status.CheckpointName != nil {
		t.Fatalf("backup with changed block tracking disabled: %+v", b3.Status)
	}
	tr, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(vmNS).Get(ctx, tracker.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Status.LatestCheckpoint != nil {
		t.Errorf("tracker after a backup without a checkpoint still names checkpoint %s", tr.Status.LatestCheckpoint.Name)
	}
	if cps, err := conn.Checkpoints(dom.Name); err != nil || len(cps) != 0 {
		t.Errorf("checkpoints with changed block tracking disabled: %v %v, want none", cps, err)
	}

	// Selected again, then its last tracker deleted: the definition goes
	// back to the raw disk and the overlay is removed.
	if err := annotateTracker(t, s, vmNS, tracker.Name, ""); err != nil {
		t.Fatal(err)
	}
	waitTrackerCBT(t, s, vmNS, tracker.Name, kv.ChangedBlockTrackingPendingRestart)
	if err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(vmNS).Delete(ctx, tracker.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pollCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var state virt.CBTState
	if err := wait.PollUntilContextCancel(pollCtx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		state, err = conn.CBTStatus(dom.Name, filepath.Join(root, ".cbt"))
		_, statErr := os.Stat(overlays)
		return err == nil && state == virt.CBTDisabled && os.IsNotExist(statErr), nil
	}); err != nil {
		t.Fatalf("after its last tracker was deleted the VM's changed block tracking is %q (%v), want Disabled with no overlay", state, err)
	}
}
