package apiserver

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/vmoperation"
	"github.com/backstop-io/backstop/pkg/virt/virttest"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// runVeleroBackup creates a Backup and waits for it to finish.
func runVeleroBackup(t *testing.T, s *framework.Server, name string, labels map[string]string, spec velerov1.BackupSpec) *velerov1.Backup {
	t.Helper()
	if _, err := s.Clientset.VeleroV1().Backups(ns).Create(context.Background(), &velerov1.Backup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec:       spec,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return waitBackup(t, s, name, "finished", finished)
}

// TestVeleroBackupDiscoversVMs: a Velero backup backs up the disks of the
// VMs of the namespaces it takes (libvirt domains "<ns>_<name>"), each as
// an async operation, with no tracker or annotation set up: full without a
// checkpoint for a one-off backup; through a tracker per schedule and VM
// for a schedule's backups, so the second is incremental (exactly the
// writes since the first) and a raw disk is selected for changed block
// tracking. VMs of other namespaces, and all VMs when the backup excludes
// virtualmachines, are left alone.
func TestVeleroBackupDiscoversVMs(t *testing.T) {
	t.Parallel()
	root := vmVolumeRoot(t)
	s := framework.Start(t, framework.Options{Args: []string{"--volume-root=" + root, "--item-operation-sync-frequency=200ms"}})
	ctx := context.Background()
	const vmNS = "disc"
	vm1 := virttest.NewDomain(t, vmNS+"_vm1", "32M")
	virttest.NewRawDomain(t, vmNS+"_vm2", "16M")
	virttest.NewDomain(t, "discother_vm3", "16M")
	vm1.Write(t, 0x11, "0", "1M")
	volume := filepath.Join(root, vmNS, vmoperation.DefaultPVC)

	wantOps := func(b *velerov1.Backup, n int) {
		t.Helper()
		if b.Status.Phase != velerov1.BackupPhaseCompleted || b.Status.BackupItemOperationsAttempted != n || b.Status.BackupItemOperationsCompleted != n {
			t.Fatalf("backup %s: %s, operations %d attempted, %d completed, %d failed; want %d completed", b.Name, b.Status.Phase,
				b.Status.BackupItemOperationsAttempted, b.Status.BackupItemOperationsCompleted, b.Status.BackupItemOperationsFailed, n)
		}
	}
	getVMB := func(name string) *kv.VirtualMachineBackup {
		t.Helper()
		b, err := s.Clientset.BackupV1alpha1().VirtualMachineBackups(vmNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("VirtualMachineBackup %s: %v", name, err)
		}
		return b
	}

	// A one-off backup: full VM backups without checkpoints, no tracker.
	adhoc := runVeleroBackup(t, s, "adhoc", nil, velerov1.BackupSpec{IncludedNamespaces: []string{vmNS}})
	wantOps(adhoc, 2)
	for _, vm := range []string{"vm1", "vm2"} {
		b := getVMB("adhoc-vm-" + vm)
		if !meta.IsStatusConditionTrue(b.Status.Conditions, string(kv.ConditionComplete)) || b.Status.Type != kv.Full ||
			b.Status.CheckpointName != nil || b.Spec.Source.Kind != "VirtualMachine" || b.Spec.Source.Name != vm {
			t.Errorf("VM backup of %s by a one-off backup: spec %+v status %+v", vm, b.Spec.Source, b.Status)
		}
		checkManifest(t, filepath.Join(volume, "adhoc-vm-"+vm))
	}
	trackers, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(vmNS).List(ctx, metav1.ListOptions{})
	if err != nil || len(trackers.Items) != 0 {
		t.Fatalf("trackers after a one-off backup: %v %v, want none", trackers, err)
	}
	if others, err := s.Clientset.BackupV1alpha1().VirtualMachineBackups("discother").List(ctx, metav1.ListOptions{}); err != nil || len(others.Items) != 0 {
		t.Errorf("VM backups in a namespace the backup does not take: %v %v", others, err)
	}

	// A schedule's backups: a tracker per VM, the second one incremental.
	scheduled := map[string]string{velerov1.ScheduleNameLabel: "nightly"}
	n1 := runVeleroBackup(t, s, "nightly-1", scheduled, velerov1.BackupSpec{IncludedNamespaces: []string{vmNS}})
	wantOps(n1, 2)
	first := getVMB("nightly-1-vm-vm1")
	if first.Status.Type != kv.Full || first.Status.CheckpointName == nil || first.Spec.Source.Kind != "VirtualMachineBackupTracker" || first.Spec.Source.Name != "nightly-vm1" {
		t.Fatalf("first scheduled VM backup of vm1: spec %+v status %+v", first.Spec.Source, first.Status)
	}
	vm1.Write(t, 0xab, "4M", "64k")
	n2 := runVeleroBackup(t, s, "nightly-2", scheduled, velerov1.BackupSpec{IncludedNamespaces: []string{vmNS}})
	wantOps(n2, 2)
	second := getVMB("nightly-2-vm-vm1")
	if second.Status.Type != kv.Incremental {
		t.Fatalf("second scheduled VM backup of vm1: %+v", second.Status)
	}
	if got := virttest.DataRanges(t, filepath.Join(volume, "nightly-2-vm-vm1", "vda.qcow2")); !slices.Equal(got, []string{"4194304+65536"}) {
		t.Errorf("incremental of the schedule holds %v, want exactly the write", got)
	}
	tr, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(vmNS).Get(ctx, "nightly-vm1", metav1.GetOptions{})
	if err != nil || tr.Labels[vmoperation.SeriesLabel] != "nightly" || tr.Status == nil || tr.Status.LatestCheckpoint == nil ||
		tr.Status.LatestCheckpoint.Name != *second.Status.CheckpointName {
		t.Errorf("tracker of the schedule: %+v %v", tr, err)
	}
	// The raw disk's tracker selected it for changed block tracking; until
	// the VM restarts its backups are full, and say why.
	waitTrackerCBT(t, s, vmNS, "nightly-vm2", kv.ChangedBlockTrackingPendingRestart)
	if raw := getVMB("nightly-2-vm-vm2"); raw.Status.Type != kv.Full || meta.FindStatusCondition(raw.Status.Conditions, string(kv.ConditionComplete)).Reason != kv.ReasonCompletedWithWarning {
		t.Errorf("scheduled VM backup of the raw disk: %+v", raw.Status)
	}

	// Excluding virtualmachines leaves the VMs out.
	none := runVeleroBackup(t, s, "no-vms", nil, velerov1.BackupSpec{IncludedNamespaces: []string{vmNS}, ExcludedResources: []string{"virtualmachines"}})
	wantOps(none, 0)
}
