package apiserver

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	restoreengine "github.com/backstop-io/backstop/pkg/engine/restore"
	"github.com/backstop-io/backstop/pkg/engine/vmoperation"
	"github.com/backstop-io/backstop/pkg/virt"
	"github.com/backstop-io/backstop/pkg/virt/virttest"
	"github.com/backstop-io/backstop/pkg/vmmanifest"
	"github.com/backstop-io/backstop/pkg/vmrestore"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestVMBackupsLeaveWithTheirBackups: four Velero backups of a namespace
// with a VM, one series (a schedule's), each VM backup incremental since
// the one before. Deleting a Velero backup (a DeleteBackupRequest, or the
// Backup itself) deletes its VirtualMachineBackup and removes its files
// from the chain: the middle one is merged into the next, the full one
// makes the next one full, the newest just goes; after each, every
// remaining VM backup restores bit-identically (sha256) to what it
// restored to when it was taken, and the series' next backup after the
// newest was deleted is full and says why.
func TestVMBackupsLeaveWithTheirBackups(t *testing.T) {
	t.Parallel()
	root := vmVolumeRoot(t)
	s := framework.Start(t, framework.Options{Args: []string{"--volume-root=" + root, "--item-operation-sync-frequency=200ms"}})
	ctx := context.Background()
	const vmNS = "life"
	vm := virttest.NewDomain(t, vmNS+"_vm1", "32M")
	volume := filepath.Join(root, vmNS, vmoperation.DefaultPVC)
	series := map[string]string{velerov1.ScheduleNameLabel: "daily"}

	// restoredFrom is the sha256 of vda restored from the VM backups of
	// the named Velero backups (oldest first).
	restoredFrom := func(names ...string) string {
		t.Helper()
		var backups []string
		for _, n := range names {
			backups = append(backups, n+"-vm-vm1")
		}
		return restoredVDA(t, volume, backups...)
	}
	want := map[string]string{}
	var taken []string
	for i, name := range []string{"daily-1", "daily-2", "daily-3", "daily-4"} {
		vm.Write(t, byte(0x10+i), []string{"0", "1M", "8M", "1536k"}[i], "1M")
		b := runVeleroBackup(t, s, name, series, velerov1.BackupSpec{IncludedNamespaces: []string{vmNS}})
		if b.Status.Phase != velerov1.BackupPhaseCompleted {
			t.Fatalf("backup %s: %+v", name, b.Status)
		}
		taken = append(taken, name)
		want[name] = restoredFrom(taken...)
	}

	// gone waits until the Velero backup, its VM backup and the VM
	// backup's directory are gone.
	gone := func(name string) {
		t.Helper()
		dir := filepath.Join(volume, name+"-vm-vm1")
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, name, metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return false, nil
			}
			_, err = s.Clientset.BackupV1alpha1().VirtualMachineBackups(vmNS).Get(ctx, name+"-vm-vm1", metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return false, nil
			}
			_, err = os.Stat(dir)
			return errors.Is(err, os.ErrNotExist), nil
		}); err != nil {
			t.Fatalf("backup %s, its VM backup or %s is still there: %v", name, dir, err)
		}
	}
	// whole checks that each remaining link restores as when taken.
	whole := func(after string, chain ...string) {
		t.Helper()
		for i := range chain {
			if got := restoredFrom(chain[:i+1]...); got != want[chain[i]] {
				t.Errorf("after %s: %s restores to %s, was %s", after, chain[i], got, want[chain[i]])
			}
		}
	}

	// A middle one, through a DeleteBackupRequest (velero backup delete).
	if _, err := s.Clientset.VeleroV1().DeleteBackupRequests(ns).Create(ctx, &velerov1.DeleteBackupRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "daily-2-", Labels: map[string]string{velerov1.BackupNameLabel: "daily-2"}},
		Spec:       velerov1.DeleteBackupRequestSpec{BackupName: "daily-2"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gone("daily-2")
	whole("deleting daily-2", "daily-1", "daily-3", "daily-4")
	m1, err1 := vmmanifest.Read(filepath.Join(volume, "daily-1-vm-vm1"))
	m3, err3 := vmmanifest.Read(filepath.Join(volume, "daily-3-vm-vm1"))
	if err1 != nil || err3 != nil || m3.Parent != m1.Checkpoint || m3.Disks[0].Backing != filepath.Join(volume, "daily-1-vm-vm1", "vda.qcow2") {
		t.Errorf("daily-3 after daily-2 was merged into it: %+v %v (daily-1: %+v %v)", m3, err3, m1, err1)
	}

	// The full one, the Backup deleted by a client: the next one becomes
	// the full backup.
	if err := s.Clientset.VeleroV1().Backups(ns).Delete(ctx, "daily-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone("daily-1")
	whole("deleting daily-1", "daily-3", "daily-4")
	if m, err := vmmanifest.Read(filepath.Join(volume, "daily-3-vm-vm1")); err != nil || m.Type != kv.Full || m.Parent != "" || m.Disks[0].Backing != "" {
		t.Errorf("daily-3 after the full backup was merged into it: %+v %v", m, err)
	}

	// The newest: it just goes; the series' next backup is full and says
	// why.
	if err := s.Clientset.VeleroV1().Backups(ns).Delete(ctx, "daily-4", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone("daily-4")
	whole("deleting daily-4", "daily-3")
	vm.Write(t, 0x77, "4M", "64k")
	runVeleroBackup(t, s, "daily-5", series, velerov1.BackupSpec{IncludedNamespaces: []string{vmNS}})
	next, err := s.Clientset.BackupV1alpha1().VirtualMachineBackups(vmNS).Get(ctx, "daily-5-vm-vm1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(next.Status.Conditions, string(kv.ConditionComplete)); next.Status.Type != kv.Full || c == nil ||
		c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "gone") {
		t.Errorf("the series' backup after its newest was deleted: want Full, saying the previous backup is gone; got %+v", next.Status)
	}

	// A bounded series: after two incrementals the next backup is full
	// (its Backup's annotation), and says why; the one after that is
	// incremental again.
	bounded := func(name string) *kv.VirtualMachineBackup {
		t.Helper()
		vm.Write(t, 0x55, "12M", "64k")
		if _, err := s.Clientset.VeleroV1().Backups(ns).Create(ctx, &velerov1.Backup{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{
				vmoperation.SeriesAnnotation: "bounded", kv.FullEveryAnnotation: "2"}},
			Spec: velerov1.BackupSpec{IncludedNamespaces: []string{vmNS}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitBackup(t, s, name, "finished", finished)
		b, err := s.Clientset.BackupV1alpha1().VirtualMachineBackups(vmNS).Get(ctx, name+"-vm-vm1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for i, wantType := range []kv.BackupType{kv.Full, kv.Incremental, kv.Incremental, kv.Full, kv.Incremental} {
		b := bounded("bounded-" + string(rune('1'+i)))
		c := meta.FindStatusCondition(b.Status.Conditions, string(kv.ConditionComplete))
		if b.Status.Type != wantType || c == nil || c.Status != metav1.ConditionTrue {
			t.Fatalf("backup %d of a series bounded to 2 incrementals: want %s, got %+v", i+1, wantType, b.Status)
		}
		if i == 3 && (c.Reason != kv.ReasonCompleted || !strings.Contains(c.Message, kv.FullEveryAnnotation)) {
			t.Errorf("the full backup that bounds the chain should say why (and is no warning): %+v", c)
		}
	}
}

// TestScheduleRetention: a schedule keeping its last 2 Completed backups
// (backstop.io/keep-last) deletes the older ones as newer ones complete,
// through the normal deletion path (their VM backups leave the chain,
// which still restores); failed runs do not count. A backup whose TTL has
// passed is kept while it is its schedule's newest Completed one and the
// runs after it failed, and goes once a later run completes. The
// schedule deleted, its series' VM backup tracker goes once its last
// backup is gone, and with it the VM's changed block tracking (its
// checkpoints and their bitmaps).
func TestScheduleRetention(t *testing.T) {
	t.Parallel()
	root := vmVolumeRoot(t)
	s := framework.Start(t, framework.Options{Args: []string{"--volume-root=" + root, "--item-operation-sync-frequency=200ms"}})
	ctx := context.Background()
	const vmNS = "keep"
	vm := virttest.NewDomain(t, vmNS+"_vm1", "32M")
	volume := filepath.Join(root, vmNS, vmoperation.DefaultPVC)
	if _, err := s.Clientset.VeleroV1().Schedules(ns).Create(ctx, &velerov1.Schedule{
		ObjectMeta: metav1.ObjectMeta{Name: "keep", Annotations: map[string]string{velerov1.KeepLastAnnotation: "2"}},
		Spec:       velerov1.ScheduleSpec{Schedule: "@daily", Paused: true, Template: velerov1.BackupSpec{IncludedNamespaces: []string{vmNS}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scheduled := map[string]string{velerov1.ScheduleNameLabel: "keep"}
	run := func(name string, spec velerov1.BackupSpec) *velerov1.Backup {
		t.Helper()
		vm.Write(t, byte(len(name)), "2M", "256k")
		return runVeleroBackup(t, s, name, scheduled, spec)
	}
	backupsLeft := func(want ...string) {
		t.Helper()
		var have []string
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			list, err := s.Clientset.VeleroV1().Backups(ns).List(ctx, metav1.ListOptions{LabelSelector: velerov1.ScheduleNameLabel + "=keep"})
			if err != nil {
				return false, nil
			}
			have = nil
			for _, b := range list.Items {
				have = append(have, b.Name)
			}
			return strings.Join(have, ",") == strings.Join(want, ","), nil
		}); err != nil {
			t.Fatalf("the schedule's backups: %v, want %v", have, want)
		}
	}
	spec := velerov1.BackupSpec{IncludedNamespaces: []string{vmNS}}
	run("keep-1", spec)
	run("keep-2", spec)
	run("keep-3", spec)
	backupsLeft("keep-2", "keep-3")
	// A failed run does not count.
	if b := run("keep-4-failed", velerov1.BackupSpec{IncludedNamespaces: []string{vmNS}, StorageLocation: "missing"}); b.Status.Phase != velerov1.BackupPhaseFailedValidation {
		t.Fatalf("a run meant to fail: %s", b.Status.Phase)
	}
	backupsLeft("keep-2", "keep-3", "keep-4-failed")
	// A short TTL, passing after the next run failed: the last good
	// backup stays.
	short := spec
	short.TTL = metav1.Duration{Duration: 15 * time.Second}
	run("keep-5", short)
	backupsLeft("keep-3", "keep-4-failed", "keep-5")
	run("keep-6-failed", velerov1.BackupSpec{IncludedNamespaces: []string{vmNS}, StorageLocation: "missing"})
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		b, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, "keep-5", metav1.GetOptions{})
		return err == nil && b.Labels[velerov1.KeptLabel] == "LastCompleted", nil
	}); err != nil {
		t.Fatalf("keep-5, expired with the runs after it failed, is not labelled kept: %v", err)
	}
	backupsLeft("keep-3", "keep-4-failed", "keep-5", "keep-6-failed")
	// A Backup goes once its VM backups are asked to go; they leave their
	// chain (merged into the next) after it: the chain is read once they
	// are gone.
	var vmbsLeft []string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := s.Clientset.BackupV1alpha1().VirtualMachineBackups(vmNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		vmbsLeft = nil
		for _, b := range list.Items {
			vmbsLeft = append(vmbsLeft, b.Name)
		}
		return strings.Join(vmbsLeft, ",") == "keep-3-vm-vm1,keep-5-vm-vm1", nil
	}); err != nil {
		t.Fatalf("the VM backups left: %v, want keep-3's and keep-5's", vmbsLeft)
	}
	dirs := []string{filepath.Join(volume, "keep-3-vm-vm1"), filepath.Join(volume, "keep-5-vm-vm1")}
	if _, err := vmrestore.Restore(ctx, dirs, "vda", filepath.Join(t.TempDir(), "vda.raw")); err != nil {
		t.Errorf("the chain after keep-last deleted the older backups: %v", err)
	}
	// A later run completes: the expired one goes, keep-last takes keep-3.
	run("keep-7", spec)
	backupsLeft("keep-4-failed", "keep-6-failed", "keep-7")

	// The schedule deleted: its tracker stays while a backup is left.
	if err := s.Clientset.VeleroV1().Schedules(ns).Delete(ctx, "keep", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	trackers := func() int {
		list, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(vmNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	for _, b := range []string{"keep-4-failed", "keep-6-failed"} {
		if err := s.Clientset.VeleroV1().Backups(ns).Delete(ctx, b, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Their deletions were seen (the series is looked at on each).
	backupsLeft("keep-7")
	if n := trackers(); n != 1 {
		t.Fatalf("trackers of the deleted schedule while a backup of it is left: %d, want 1", n)
	}
	conn, err := virt.Open(virttest.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if cps, err := conn.Checkpoints(vm.Name); err != nil || len(cps) == 0 {
		t.Fatalf("the VM tracked by the series should have its checkpoint: %v %v", cps, err)
	}
	if err := s.Clientset.VeleroV1().Backups(ns).Delete(ctx, "keep-7", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return trackers() == 0, nil
	}); err != nil {
		t.Errorf("the deleted schedule's tracker is left after its last backup went: %v", err)
	}
	// Changed block tracking goes with it: no checkpoint (bitmap) left.
	var cps []string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		cps, err = conn.Checkpoints(vm.Name)
		return err == nil && len(cps) == 0, nil
	}); err != nil {
		t.Errorf("the VM keeps checkpoints %v (%v) after its only tracker went", cps, err)
	}
}

// TestStoppedVMBackup (KubeVirt VEP 401): a VM that is not running is
// backed up in full, from its image files (libvirt makes no checkpoint of
// a stopped domain): through its tracker the backup says so and the
// tracker keeps its checkpoint, so the next backup of the running VM is
// incremental since it, and both chains restore the disks they were taken
// of, bit for bit.
func TestStoppedVMBackup(t *testing.T) {
	t.Parallel()
	root := vmVolumeRoot(t)
	s := framework.Start(t, framework.Options{Args: []string{"--volume-root=" + root}})
	ctx := context.Background()
	const vmNS = "halted"
	vm := virttest.NewDomain(t, vmNS+"_vm1", "32M")
	volume := filepath.Join(root, vmNS, "pvc1")
	if err := os.MkdirAll(volume, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, vmNS), 0o755); err != nil {
		t.Fatal(err)
	}
	group := "kubevirt.io"
	if _, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(vmNS).Create(ctx, &kv.VirtualMachineBackupTracker{
		ObjectMeta: metav1.ObjectMeta{Name: "vm1-tracker", Namespace: vmNS},
		Spec:       kv.VirtualMachineBackupTrackerSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VirtualMachine", Name: "vm1"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// rawSHA is the sha256 of the disk as a raw image.
	rawSHA := func() string {
		t.Helper()
		out := filepath.Join(t.TempDir(), "disk.raw")
		virttest.Run(t, "qemu-img", "convert", "-U", "-O", "raw", vm.Disk, out)
		sum, err := vmmanifest.FileSHA256(out)
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	restoredFrom := func(names ...string) string { t.Helper(); return restoredVDA(t, volume, names...) }

	vm.Write(t, 0x11, "0", "2M")
	createVMBackup(t, s, vmNS, "running-1", "vm1-tracker", true, "pvc1", false)
	first := waitVMBackup(t, s, vmNS, "running-1", "finished", vmbFinished)
	if first.Status.Type != kv.Full || first.Status.CheckpointName == nil {
		t.Fatalf("backup of the running VM: %+v", first.Status)
	}
	vm.Write(t, 0x22, "4M", "1M")
	vm.Stop(t)
	stoppedDisk := rawSHA()

	// Stopped, through the tracker: full, saying why; the tracker keeps
	// its checkpoint.
	createVMBackup(t, s, vmNS, "stopped-1", "vm1-tracker", true, "pvc1", false)
	b := waitVMBackup(t, s, vmNS, "stopped-1", "finished", vmbFinished)
	c := meta.FindStatusCondition(b.Status.Conditions, string(kv.ConditionComplete))
	if b.Status.Type != kv.Full || b.Status.CheckpointName != nil || c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "not running") {
		t.Fatalf("backup of the stopped VM through its tracker: %+v", b.Status)
	}
	if got := restoredFrom("stopped-1"); got != stoppedDisk {
		t.Errorf("the stopped VM's backup restores to %s, its disk is %s", got, stoppedDisk)
	}
	tr, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(vmNS).Get(ctx, "vm1-tracker", metav1.GetOptions{})
	if err != nil || tr.Status == nil || tr.Status.LatestCheckpoint == nil || tr.Status.LatestCheckpoint.Name != *first.Status.CheckpointName {
		t.Fatalf("the tracker after the stopped VM's backup should keep checkpoint %s: %+v %v", *first.Status.CheckpointName, tr, err)
	}
	// Stopped, the VM itself: a plain full backup.
	createVMBackup(t, s, vmNS, "stopped-2", "vm1", false, "pvc1", false)
	if b := waitVMBackup(t, s, vmNS, "stopped-2", "finished", vmbFinished); b.Status.Type != kv.Full ||
		!meta.IsStatusConditionTrue(b.Status.Conditions, string(kv.ConditionComplete)) {
		t.Fatalf("backup of the stopped VM: %+v", b.Status)
	} else if got := restoredFrom("stopped-2"); got != stoppedDisk {
		t.Errorf("the stopped VM's backup restores to %s, its disk is %s", got, stoppedDisk)
	}

	// Running again: incremental since the checkpoint of the last backup
	// of the running VM, its chain restoring the disk.
	vm.Start(t)
	vm.Write(t, 0x33, "8M", "64k")
	createVMBackup(t, s, vmNS, "running-2", "vm1-tracker", true, "pvc1", false)
	next := waitVMBackup(t, s, vmNS, "running-2", "finished", vmbFinished)
	if next.Status.Type != kv.Incremental {
		t.Fatalf("backup of the VM running again: %+v", next.Status)
	}
	vm.Suspend(t)
	now := rawSHA()
	vm.Resume(t)
	if got := restoredFrom("running-1", "running-2"); got != now {
		t.Errorf("the chain across the stop restores to %s, the disk is %s", got, now)
	}
}

// restoredVDA is the sha256 of disk vda restored from the VM backups of
// volume named (oldest first).
func restoredVDA(t *testing.T, volume string, backups ...string) string {
	t.Helper()
	var dirs []string
	for _, n := range backups {
		dirs = append(dirs, filepath.Join(volume, n))
	}
	res, err := vmrestore.Restore(context.Background(), dirs, "vda", filepath.Join(t.TempDir(), "vda.raw"))
	if err != nil {
		t.Fatalf("restoring from %v: %v", backups, err)
	}
	return res.SHA256
}

// TestVMRestoreThroughVelero: `velero restore create --from-backup` of a
// backup that took two VMs restores their disks from their chains (the
// full backup and the incremental of a series). Into the same namespace:
// the VM that still runs is stopped, written and started again; the VM
// that was deleted is defined anew from the definition its backup saved,
// with a new disk image. Under namespaceMapping: new VMs in the new
// namespace, the old ones untouched; excluding virtualmachines, no VM
// disk restored; a VM whose backup files changed, not restored and said. A VM backup running when the restore
// comes to its VM finishes first (the restore waits, and says so). Each VM is an item operation of the
// restore, its result is in the log; every restored disk reads as its
// chain restores (sha256); a restored VM's next backup is full, its
// checkpoints dropped with the data they tracked.
func TestVMRestoreThroughVelero(t *testing.T) {
	t.Parallel()
	root := vmVolumeRoot(t)
	s := framework.Start(t, framework.Options{Args: []string{"--volume-root=" + root, "--item-operation-sync-frequency=200ms"}})
	ctx := context.Background()
	const vmNS, mappedNS = "farm", "farm2"
	vm1 := virttest.NewDomain(t, vmNS+"_vm1", "256M")
	vm2 := virttest.NewDomain(t, vmNS+"_vm2", "16M")
	volume := filepath.Join(root, vmNS, vmoperation.DefaultPVC)
	series := map[string]string{velerov1.ScheduleNameLabel: "nightly"}

	vm1.Write(t, 0x21, "0", "2M")
	vm2.Write(t, 0x31, "1M", "1M")
	runVeleroBackup(t, s, "nightly-1", series, velerov1.BackupSpec{IncludedNamespaces: []string{vmNS}})
	vm1.Write(t, 0x22, "8M", "1M")
	vm2.Write(t, 0x32, "4M", "64k")
	if b := runVeleroBackup(t, s, "nightly-2", series, velerov1.BackupSpec{IncludedNamespaces: []string{vmNS}}); b.Status.Phase != velerov1.BackupPhaseCompleted {
		t.Fatalf("backup nightly-2: %+v", b.Status)
	}
	for _, vm := range []string{"vm1", "vm2"} {
		b, err := s.Clientset.BackupV1alpha1().VirtualMachineBackups(vmNS).Get(ctx, "nightly-2-vm-"+vm, metav1.GetOptions{})
		if err != nil || b.Status == nil || b.Status.Type != kv.Incremental {
			t.Fatalf("the second backup of %s should be incremental: %+v %v", vm, b, err)
		}
	}
	want := map[string]string{
		"vm1": restoredVDA(t, volume, "nightly-1-vm-vm1", "nightly-2-vm-vm1"),
		"vm2": restoredVDA(t, volume, "nightly-1-vm-vm2", "nightly-2-vm-vm2"),
	}
	// After the backup: vm1 is damaged, vm2 deleted.
	vm1.Write(t, 0x66, "0", "4M")
	if got := virttest.ImageSHA256(t, vm1.Disk); got == want["vm1"] {
		t.Fatal("vm1's disk still reads as its backup after being overwritten: the test would prove nothing")
	}
	vm2.Delete(t)

	conn, err := virt.Open(virttest.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// restored checks that a domain runs and its disk reads as want.
	restored := func(domain, want string) string {
		t.Helper()
		disks, err := conn.Disks(domain)
		if err != nil || len(disks) != 1 {
			t.Fatalf("domain %s after the restore: %+v %v", domain, disks, err)
		}
		if active, err := conn.Active(domain); err != nil || !active {
			t.Errorf("domain %s is not running after the restore (%v)", domain, err)
		}
		if got := virttest.ImageSHA256(t, disks[0].Source); got != want {
			t.Errorf("domain %s: disk %s reads %s, its chain %s", domain, disks[0].Source, got, want)
		}
		return disks[0].Source
	}
	operations := func(r *velerov1.Restore, n int) {
		t.Helper()
		if r.Status.Phase != velerov1.RestorePhaseCompleted || r.Status.RestoreItemOperationsAttempted != n ||
			r.Status.RestoreItemOperationsCompleted != n || r.Status.RestoreItemOperationsFailed != 0 {
			t.Errorf("restore %s: want Completed with %d item operations completed, got %+v", r.Name, n, r.Status)
		}
	}

	// Previewed: the VMs' disks are among the volumes it would write, and
	// the preview writes none of them.
	t.Run("previewed", func(t *testing.T) {
		p := previewRestore(t, s, "back", velerov1.RestoreSpec{BackupName: "nightly-2"})
		var volumes []string
		for _, v := range p.Volumes {
			volumes = append(volumes, fmt.Sprintf("%s %s/%s: %s", v.Kind, v.Namespace, v.Name, v.Source))
		}
		wantVolumes := []string{
			"VirtualMachine farm/vm1: the disk chain of VM backup farm/nightly-2-vm-vm1",
			"VirtualMachine farm/vm2: the disk chain of VM backup farm/nightly-2-vm-vm2",
		}
		if strings.Join(volumes, "\n") != strings.Join(wantVolumes, "\n") {
			t.Errorf("the preview's volumes\n got %q\nwant %q", volumes, wantVolumes)
		}
		if got := virttest.ImageSHA256(t, vm1.Disk); got == want["vm1"] {
			t.Error("the preview restored vm1's disk")
		}
		if _, err := conn.Disks(vmNS + "_vm2"); err == nil {
			t.Error("the preview defined the deleted vm2 again")
		}
	})

	// Into the same namespace, with the velero CLI, while a full backup
	// of vm1 runs (192 MiB at 16 MiB/s).
	virttest.Adopt(t, vmNS+"_vm2")
	vm1.Write(t, 0x67, "64M", "192M")
	createVMBackup(t, s, vmNS, "running", "vm1", false, vmoperation.DefaultPVC, true)
	vm1.ThrottleBackupJob(t, 16<<20)
	veleroCLI(t, s, "restore", "create", "back", "--from-backup", "nightly-2")
	r := waitRestore(t, s, "back")
	operations(r, 2)
	if b := waitVMBackup(t, s, vmNS, "running", "finished", vmbFinished); b.State() != kv.BackupComplete {
		t.Errorf("the VM backup running when the restore came to its VM: %+v", b.Status)
	}
	if src := restored(vmNS+"_vm1", want["vm1"]); src != vm1.Disk {
		t.Errorf("vm1 was restored into %s, not its own disk %s", src, vm1.Disk)
	}
	// Its new disk is in the server's directory of restored images, never
	// where the saved definition (in a volume its namespace writes) says.
	if src := restored(vmNS+"_vm2", want["vm2"]); src == vm2.Disk || filepath.Dir(src) != filepath.Join(root, restoreengine.RestoredImagesDir, vmNS) {
		t.Errorf("the deleted vm2 should get a new disk in %s, got %s", filepath.Join(root, restoreengine.RestoredImagesDir, vmNS), src)
	}
	logs := restoreLogs(t, s, "back")
	for _, want := range []string{"VM disks restored", "written into the existing domain", "written into a new domain", "nightly-1-vm-vm1 → nightly-2-vm-vm1",
		`msg="Waiting for the VM" virtualMachine=farm/vm1 for="backup running"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the restore log does not say %q:\n%s", want, logs)
		}
	}

	// The series' next backup of the restored vm1 is full: its
	// checkpoints went with the data they tracked.
	vm1.Write(t, 0x23, "12M", "64k")
	runVeleroBackup(t, s, "nightly-3", series, velerov1.BackupSpec{IncludedNamespaces: []string{vmNS}})
	if b, err := s.Clientset.BackupV1alpha1().VirtualMachineBackups(vmNS).Get(ctx, "nightly-3-vm-vm1", metav1.GetOptions{}); err != nil ||
		b.Status == nil || b.Status.Type != kv.Full {
		t.Errorf("the backup of vm1 after its restore should be full: %+v %v", b, err)
	}

	// Under namespaceMapping: new VMs, the old ones as they are.
	before := virttest.ImageSHA256(t, vm1.Disk)
	virttest.Adopt(t, mappedNS+"_vm1")
	virttest.Adopt(t, mappedNS+"_vm2")
	veleroCLI(t, s, "restore", "create", "mapped", "--from-backup", "nightly-2", "--namespace-mappings", vmNS+":"+mappedNS)
	operations(waitRestore(t, s, "mapped"), 2)
	restored(mappedNS+"_vm1", want["vm1"])
	restored(mappedNS+"_vm2", want["vm2"])
	if got := virttest.ImageSHA256(t, vm1.Disk); got != before {
		t.Errorf("restoring under namespaceMapping changed the source VM's disk")
	}

	// The definition saved with vm2's backup, rewritten in the volume
	// (its namespace writes it) to run QEMU with extra arguments, write
	// its serial port into the volume root and boot a host file as its
	// kernel: the VM defined anew has none of them, and the restore's log
	// says what was left out.
	t.Run("a hostile saved definition", func(t *testing.T) {
		dir := filepath.Join(volume, "nightly-2-vm-vm2")
		m, err := vmmanifest.Read(dir)
		if err != nil {
			t.Fatal(err)
		}
		pwned := filepath.Join(root, "pwned-by-serial")
		m.Definition = strings.Replace(m.Definition, "<domain ", "<domain xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0' ", 1)
		m.Definition = strings.Replace(m.Definition, "</devices>", "<serial type='file'><source path='"+pwned+"'/><target port='0'/></serial></devices>"+
			"<qemu:commandline><qemu:arg value='-name'/><qemu:arg value='hostile'/></qemu:commandline>", 1)
		m.Definition = strings.Replace(m.Definition, "</os>", "<kernel>/etc/hostname</kernel></os>", 1)
		if err := vmmanifest.Write(dir, m); err != nil {
			t.Fatal(err)
		}
		virttest.Adopt(t, "farm5_vm1")
		virttest.Adopt(t, "farm5_vm2")
		veleroCLI(t, s, "restore", "create", "hostile", "--from-backup", "nightly-2", "--namespace-mappings", vmNS+":farm5")
		operations(waitRestore(t, s, "hostile"), 2)
		restored("farm5_vm2", want["vm2"])
		def, err := conn.DomainDefinition("farm5_vm2")
		if err != nil {
			t.Fatal(err)
		}
		for _, gone := range []string{"commandline", "hostile", pwned, "/etc/hostname"} {
			if strings.Contains(def, gone) {
				t.Errorf("the VM defined from the hostile definition holds %q:\n%s", gone, def)
			}
		}
		if _, err := os.Lstat(pwned); err == nil {
			t.Errorf("the restored VM wrote %s", pwned)
		}
		if logs := restoreLogs(t, s, "hostile"); !strings.Contains(logs, "defined without what its saved definition names of the host") ||
			!strings.Contains(logs, "QEMU command line arguments") || !strings.Contains(logs, "/etc/hostname") {
			t.Errorf("the restore log does not say what was left out:\n%s", logs)
		}
	})

	// A restore that excludes virtualmachines restores no VM disk.
	veleroCLI(t, s, "restore", "create", "novms", "--from-backup", "nightly-2", "--exclude-resources", "virtualmachines")
	operations(waitRestore(t, s, "novms"), 0)
	if got := virttest.ImageSHA256(t, vm1.Disk); got != before {
		t.Errorf("a restore excluding virtualmachines changed a VM's disk")
	}

	// A VM whose backup files changed after the backup is not restored:
	// the restore is PartiallyFailed, one item operation failed, and its
	// log and results say why; the other VM is restored.
	f, err := os.OpenFile(filepath.Join(volume, "nightly-1-vm-vm2", "vda.qcow2"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("changed")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	virttest.Adopt(t, "farm3_vm1")
	virttest.Adopt(t, "farm3_vm2")
	veleroCLI(t, s, "restore", "create", "broken", "--from-backup", "nightly-2", "--namespace-mappings", vmNS+":farm3")
	broken := waitRestore(t, s, "broken")
	if broken.Status.Phase != velerov1.RestorePhasePartiallyFailed || broken.Status.RestoreItemOperationsAttempted != 2 ||
		broken.Status.RestoreItemOperationsCompleted != 1 || broken.Status.RestoreItemOperationsFailed != 1 || broken.Status.Errors != 1 {
		t.Errorf("a restore with one VM's backup files changed: want PartiallyFailed, 1 of 2 item operations failed, 1 error; got %+v", broken.Status)
	}
	if logs := restoreLogs(t, s, "broken"); !strings.Contains(logs, "restoring the disks of VirtualMachine farm3/vm2") || !strings.Contains(logs, "does not match the manifest") {
		t.Errorf("the restore log does not say why vm2 was not restored:\n%s", logs)
	}
	restored("farm3_vm1", want["vm1"])
	if _, err := conn.Disks("farm3_vm2"); !errors.Is(err, virt.ErrDomainNotFound) {
		t.Errorf("a VM whose backup failed its checks was defined anyway: %v", err)
	}
}

// TestVMChainOfTenThroughVelero: ten Velero backups of one series (a full
// VM backup and nine incrementals, the series unbounded), then seven of
// them deleted in a random order (fixed seed), by `velero backup delete`
// and by deleting the Backup; after each, every remaining VM backup
// restores bit-identically to what it restored to when taken, and the
// volume holds the remaining backups' directories only.
func TestVMChainOfTenThroughVelero(t *testing.T) {
	t.Parallel()
	root := vmVolumeRoot(t)
	s := framework.Start(t, framework.Options{Args: []string{"--volume-root=" + root, "--item-operation-sync-frequency=200ms"}})
	ctx := context.Background()
	const vmNS = "ten"
	vm := virttest.NewDomain(t, vmNS+"_vm1", "32M")
	volume := filepath.Join(root, vmNS, vmoperation.DefaultPVC)
	series := map[string]string{velerov1.ScheduleNameLabel: "ten"}

	var names []string
	want := map[string]string{}
	for i := range 10 {
		name := fmt.Sprintf("ten-%02d", i+1)
		// Writes that overlap earlier ones, so that merges must pick the
		// newer clusters.
		vm.Write(t, byte(0x40+i), fmt.Sprintf("%dk", (i%4)*512+i*64), "768k")
		if _, err := s.Clientset.VeleroV1().Backups(ns).Create(ctx, &velerov1.Backup{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: series, Annotations: map[string]string{kv.FullEveryAnnotation: "0"}},
			Spec:       velerov1.BackupSpec{IncludedNamespaces: []string{vmNS}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if b := waitBackup(t, s, name, "finished", finished); b.Status.Phase != velerov1.BackupPhaseCompleted {
			t.Fatalf("backup %s: %+v", name, b.Status)
		}
		names = append(names, name)
		var chain []string
		for _, n := range names {
			chain = append(chain, n+"-vm-vm1")
		}
		want[name] = restoredVDA(t, volume, chain...)
	}
	if b, err := s.Clientset.BackupV1alpha1().VirtualMachineBackups(vmNS).Get(ctx, "ten-10-vm-vm1", metav1.GetOptions{}); err != nil || b.Status == nil || b.Status.Type != kv.Incremental {
		t.Fatalf("the tenth backup of an unbounded series should be incremental: %+v %v", b, err)
	}

	rng := rand.New(rand.NewPCG(19, 19))
	for step := range 7 {
		k := rng.IntN(len(names))
		name := names[k]
		names = append(names[:k:k], names[k+1:]...)
		if step%2 == 0 {
			veleroCLI(t, s, "backup", "delete", name, "--confirm")
		} else if err := s.Clientset.VeleroV1().Backups(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := s.Clientset.BackupV1alpha1().VirtualMachineBackups(vmNS).Get(ctx, name+"-vm-vm1", metav1.GetOptions{})
			_, statErr := os.Stat(filepath.Join(volume, name+"-vm-vm1"))
			return apierrors.IsNotFound(err) && errors.Is(statErr, os.ErrNotExist), nil
		}); err != nil {
			t.Fatalf("step %d: the VM backup of %s or its files are still there: %v", step+1, name, err)
		}
		for i := range names {
			var chain []string
			for _, n := range names[:i+1] {
				chain = append(chain, n+"-vm-vm1")
			}
			if got := restoredVDA(t, volume, chain...); got != want[names[i]] {
				t.Errorf("step %d, %s deleted: %s restores to %s, was %s", step+1, name, names[i], got, want[names[i]])
			}
		}
		entries, err := os.ReadDir(volume)
		if err != nil {
			t.Fatal(err)
		}
		var dirs []string
		for _, e := range entries {
			dirs = append(dirs, strings.TrimSuffix(e.Name(), "-vm-vm1"))
		}
		if strings.Join(dirs, " ") != strings.Join(names, " ") {
			t.Errorf("step %d, %s deleted: the volume holds %v, want the remaining backups %v", step+1, name, dirs, names)
		}
	}

	// A verification of the newest backup checks its VM disk chain, the
	// links merged by the deletions included; a byte changed in the
	// oldest link is found, naming the VM backup and the file.
	newest := names[len(names)-1]
	t.Run("verified", func(t *testing.T) {
		b := requestVerification(t, s, newest, "chain")
		if v, c := b.Status.Verification, verifiedCondition(b); v.VMDiskChains != 1 || c.Status != metav1.ConditionTrue {
			t.Errorf("verification %+v, condition %+v", v, c)
		}
	})
	t.Run("a byte changed in the oldest link", func(t *testing.T) {
		oldest := filepath.Join(volume, names[0]+"-vm-vm1")
		m, err := vmmanifest.Read(oldest)
		if err != nil || len(m.Disks) != 1 {
			t.Fatalf("manifest of %s: %+v, %v", oldest, m, err)
		}
		file := filepath.Join(oldest, m.Disks[0].File)
		defer changeByte(t, file)()
		b := requestVerification(t, s, newest, "chain-changed")
		v := b.Status.Verification
		if want := "VM backup " + vmNS + "/" + newest + "-vm-vm1: " + file + ": sha256"; v.ProblemCount != 1 || !strings.HasPrefix(v.Problems[0], want) {
			t.Errorf("problems %q, want one starting %q", v.Problems, want)
		}
	})
}
