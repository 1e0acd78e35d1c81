package apiserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
	"github.com/backstop-io/backstop/pkg/virt"
	"github.com/backstop-io/backstop/pkg/virt/virttest"
	"github.com/backstop-io/backstop/pkg/vmmanifest"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// createVMBackup creates a VirtualMachineBackup of a tracker (or of a VM
// when tracker is false) into pvc.
func createVMBackup(t *testing.T, s *framework.Server, namespace, name, source string, tracker bool, pvc string, force bool) {
	t.Helper()
	group, kind := "kubevirt.io", "VirtualMachine"
	if tracker {
		group, kind = kv.GroupName, "VirtualMachineBackupTracker"
	}
	mode := kv.PushMode
	if _, err := s.Clientset.BackupV1alpha1().VirtualMachineBackups(namespace).Create(context.Background(), &kv.VirtualMachineBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: kv.VirtualMachineBackupSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: kind, Name: source},
			Mode: &mode, PvcName: &pvc, ForceFullBackup: force},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating VirtualMachineBackup %s/%s: %v", namespace, name, err)
	}
}

// waitVMBackup polls a VirtualMachineBackup until cond holds.
func waitVMBackup(t *testing.T, s *framework.Server, namespace, name, what string, cond func(*kv.VirtualMachineBackup) bool) *kv.VirtualMachineBackup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var last *kv.VirtualMachineBackup
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		b, err := s.Clientset.BackupV1alpha1().VirtualMachineBackups(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = b
		return cond(b), nil
	}); err != nil {
		var st any
		if last != nil {
			st = last.Status
		}
		t.Fatalf("VirtualMachineBackup %s never %s; last status %+v", name, what, st)
	}
	return last
}

func vmbCondition(b *kv.VirtualMachineBackup, t kv.ConditionType) *metav1.Condition {
	if b.Status == nil {
		return nil
	}
	return meta.FindStatusCondition(b.Status.Conditions, string(t))
}

func vmbFinished(b *kv.VirtualMachineBackup) bool { return b.State().Terminal() }

func conditionsOf(b *kv.VirtualMachineBackup) []metav1.Condition {
	if b.Status == nil {
		return nil
	}
	return b.Status.Conditions
}

// checkManifest reads a backup's manifest and checks its digests.
func checkManifest(t *testing.T, dir string) vmmanifest.Manifest {
	t.Helper()
	m, err := vmmanifest.Read(dir)
	if err != nil {
		t.Fatalf("manifest in %s: %v", dir, err)
	}
	if err := vmmanifest.Verify(dir, m); err != nil {
		t.Error(err)
	}
	if m.LibvirtVersion == "" || m.QEMUVersion == "" {
		t.Errorf("manifest without versions: %+v", m)
	}
	return m
}

// TestVMBackups: VirtualMachineBackups through the server on a real
// libvirt daemon and QEMU: waiting for the volume, a full backup, an
// incremental holding exactly the blocks written since (chained to the
// full one, equal to the live disk), the tracker moving from checkpoint
// to checkpoint, an incremental after the VM was defined anew
// (redefinition), a forced full one, a missing VM, and a Velero backup
// whose VM disk backup runs as its async operation. Full backups are
// copied in pull mode (--vm-full-backup-mode=pull) here.
func TestVMBackups(t *testing.T) {
	t.Parallel()
	root := vmVolumeRoot(t)
	// Full backups in pull mode; the other VM tests run the default, push.
	s := framework.Start(t, framework.Options{Args: []string{"--volume-root=" + root, "--item-operation-sync-frequency=200ms", "--vm-full-backup-mode=pull"}})
	ctx := context.Background()
	const vmNS = "vmpull"
	dom := virttest.NewDomain(t, vmNS+"_vm1", "64M")
	conn, err := virt.Open(virttest.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	group := "kubevirt.io"
	if _, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(vmNS).Create(ctx, &kv.VirtualMachineBackupTracker{
		ObjectMeta: metav1.ObjectMeta{Name: "vm1-tracker", Namespace: vmNS, Annotations: map[string]string{"backstop.io/vm-backup-pvc": "pvc1"}},
		Spec:       kv.VirtualMachineBackupTrackerSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VirtualMachine", Name: "vm1"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dom.Write(t, 0x11, "0", "4M")
	dom.Write(t, 0x33, "20M", "8M")

	// The volume directory does not exist yet: the backup waits.
	createVMBackup(t, s, vmNS, "b1", "vm1-tracker", true, "pvc1", false)
	waitVMBackup(t, s, vmNS, "b1", "waiting for its volume", func(b *kv.VirtualMachineBackup) bool {
		c := vmbCondition(b, kv.ConditionProgressing)
		return c != nil && c.Reason == kv.ReasonWaitingForVolume
	})
	volume := filepath.Join(root, vmNS, "pvc1")
	if err := os.MkdirAll(volume, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, vmNS), 0o755); err != nil {
		t.Fatal(err)
	}
	b1 := waitVMBackup(t, s, vmNS, "b1", "finished", vmbFinished)
	if !meta.IsStatusConditionTrue(b1.Status.Conditions, string(kv.ConditionComplete)) || b1.Status.Type != kv.Full || b1.Status.CheckpointName == nil {
		t.Fatalf("first backup: %+v", b1.Status)
	}
	if q := vmbCondition(b1, kv.ConditionQuiesced); q == nil || q.Status != metav1.ConditionFalse || q.Reason != kv.ReasonQuiesceFailed {
		t.Errorf("Quiesced condition without a guest agent: %+v", q)
	}
	m1 := checkManifest(t, filepath.Join(volume, "b1"))
	if m1.Type != kv.Full || m1.Checkpoint != *b1.Status.CheckpointName || len(m1.Disks) != 1 {
		t.Errorf("manifest of the full backup: %+v", m1)
	}
	tr, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(vmNS).Get(ctx, "vm1-tracker", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cp := tr.Status.LatestCheckpoint; cp == nil || cp.Name != *b1.Status.CheckpointName || cp.CheckpointXML == "" || len(cp.Volumes) != 1 ||
		cp.Volumes[0].DataEndpoint != filepath.Join(volume, "b1", "vda.qcow2") {
		t.Fatalf("tracker after the full backup: %+v", tr.Status)
	}

	// An incremental holds exactly what was written since.
	dom.Write(t, 0xab, "1M", "64k")
	dom.Write(t, 0xcd, "40M", "192k")
	createVMBackup(t, s, vmNS, "b2", "vm1-tracker", true, "pvc1", false)
	b2 := waitVMBackup(t, s, vmNS, "b2", "finished", vmbFinished)
	if !meta.IsStatusConditionTrue(b2.Status.Conditions, string(kv.ConditionComplete)) || b2.Status.Type != kv.Incremental {
		t.Fatalf("second backup: %+v", b2.Status)
	}
	inc := filepath.Join(volume, "b2", "vda.qcow2")
	if got := virttest.DataRanges(t, inc); !slices.Equal(got, []string{"1048576+65536", "41943040+196608"}) {
		t.Errorf("incremental holds %v, want exactly the writes", got)
	}
	if p := b2.Status.ParentCheckpointName; p == nil || *p != *b1.Status.CheckpointName || b1.Status.ParentCheckpointName != nil {
		t.Errorf("parent checkpoints: the incremental's %v, the full one's %v; want the full one's checkpoint %s, and none", p, b1.Status.ParentCheckpointName, *b1.Status.CheckpointName)
	}
	if m2 := checkManifest(t, filepath.Join(volume, "b2")); m2.Parent != *b1.Status.CheckpointName || m2.Disks[0].Backing != filepath.Join(volume, "b1", "vda.qcow2") {
		t.Errorf("manifest of the incremental: %+v", m2)
	}
	if cps, err := conn.Checkpoints(dom.Name); err != nil || strings.Join(cps, ",") != *b2.Status.CheckpointName {
		t.Errorf("checkpoints after the incremental: %v %v (the previous one should be deleted)", cps, err)
	}
	dom.Suspend(t)
	virttest.Run(t, "qemu-img", "compare", "-U", inc, dom.Disk)
	dom.Resume(t)

	// The VM is defined anew (libvirt forgets its checkpoints): the next
	// incremental redefines the tracker's checkpoint.
	dom.Stop(t)
	dom.ForgetCheckpoints(t)
	dom.Start(t)
	dom.Write(t, 0xef, "50M", "128k")
	createVMBackup(t, s, vmNS, "b3", "vm1-tracker", true, "pvc1", false)
	b3 := waitVMBackup(t, s, vmNS, "b3", "finished", vmbFinished)
	if !meta.IsStatusConditionTrue(b3.Status.Conditions, string(kv.ConditionComplete)) || b3.Status.Type != kv.Incremental {
		t.Fatalf("backup after the VM was defined anew: %+v", b3.Status)
	}
	if got := virttest.DataRanges(t, filepath.Join(volume, "b3", "vda.qcow2")); !slices.Equal(got, []string{"52428800+131072"}) {
		t.Errorf("incremental after redefinition holds %v", got)
	}
	dom.Suspend(t)
	virttest.Run(t, "qemu-img", "compare", "-U", filepath.Join(volume, "b3", "vda.qcow2"), dom.Disk)
	dom.Resume(t)

	// forceFullBackup.
	createVMBackup(t, s, vmNS, "b4", "vm1-tracker", true, "pvc1", true)
	if b4 := waitVMBackup(t, s, vmNS, "b4", "finished", vmbFinished); b4.Status.Type != kv.Full ||
		!meta.IsStatusConditionTrue(b4.Status.Conditions, string(kv.ConditionComplete)) {
		t.Errorf("forced full backup: %+v", b4.Status)
	}

	// QEMU is killed: the checkpoint's bitmap is lost, so the next backup
	// is full and says why; the one after is incremental again.
	dom.KillQEMU(t)
	dom.Start(t)
	dom.Write(t, 0x99, "10M", "64k")
	createVMBackup(t, s, vmNS, "b5", "vm1-tracker", true, "pvc1", false)
	b5 := waitVMBackup(t, s, vmNS, "b5", "finished", vmbFinished)
	if c := vmbCondition(b5, kv.ConditionComplete); b5.Status.Type != kv.Full || c == nil || c.Status != metav1.ConditionTrue ||
		c.Reason != kv.ReasonCompletedWithWarning || !strings.Contains(c.Message, "inconsistent") {
		t.Fatalf("backup after QEMU was killed: %+v", b5.Status)
	}
	if c := vmbCondition(b5, kv.ConditionComplete); !strings.Contains(c.Message, "stale bitmaps, if any, were removed") {
		t.Errorf("fallback message: %s", c.Message)
	}
	dom.Write(t, 0x98, "12M", "64k")
	createVMBackup(t, s, vmNS, "b6", "vm1-tracker", true, "pvc1", false)
	b6 := waitVMBackup(t, s, vmNS, "b6", "finished", vmbFinished)
	if b6.Status.Type != kv.Incremental || !meta.IsStatusConditionTrue(b6.Status.Conditions, string(kv.ConditionComplete)) {
		t.Fatalf("backup after the full fallback: %+v", b6.Status)
	}
	if got := virttest.DataRanges(t, filepath.Join(volume, "b6", "vda.qcow2")); !slices.Equal(got, []string{"12582912+65536"}) {
		t.Errorf("incremental after the full fallback holds %v", got)
	}

	// A VM that does not exist.
	createVMBackup(t, s, vmNS, "ghost", "no-such-vm", false, "pvc1", false)
	ghost := waitVMBackup(t, s, vmNS, "ghost", "finished", vmbFinished)
	if c := vmbCondition(ghost, kv.ConditionFailed); c == nil || c.Status != metav1.ConditionTrue || c.Reason != kv.ReasonSourceNotFound ||
		!strings.Contains(c.Message, vmNS+"_no-such-vm") {
		t.Errorf("backup of a missing VM: %+v", ghost.Status)
	}
	if _, err := os.Stat(filepath.Join(volume, "ghost")); !os.IsNotExist(err) {
		t.Errorf("the failed backup left output: %v", err)
	}

	// A Velero backup of the namespace runs the VM's disk backup as its
	// async operation, on libvirt for real.
	dom.Write(t, 0x5a, "30M", "64k")
	createBackup(t, s, "with-vm", vmNS)
	vb := waitBackup(t, s, "with-vm", "finished", finished)
	if vb.Status.Phase != velerov1.BackupPhaseCompleted || vb.Status.BackupItemOperationsCompleted != 1 {
		t.Fatalf("Velero backup with a VM: %s, operations %d/%d, errors %d", vb.Status.Phase,
			vb.Status.BackupItemOperationsAttempted, vb.Status.BackupItemOperationsCompleted, vb.Status.Errors)
	}
	op := waitVMBackup(t, s, vmNS, "with-vm-vm1-tracker", "finished", vmbFinished)
	if op.Status.Type != kv.Incremental {
		t.Errorf("the VM backup of the Velero backup: %+v", op.Status)
	}
	if got := virttest.DataRanges(t, filepath.Join(volume, "with-vm-vm1-tracker", "vda.qcow2")); !slices.Equal(got, []string{"31457280+65536"}) {
		t.Errorf("the Velero backup's VM backup holds %v", got)
	}

	// Restore: the chain full (b5) → b6 → the Velero backup's, moved
	// elsewhere, becomes a raw image equal to the live disk.
	moved := virttest.Dir(t)
	var chain []string
	for _, name := range []string{"b5", "b6", "with-vm-vm1-tracker"} {
		virttest.Run(t, "cp", "-a", filepath.Join(volume, name), moved)
		chain = append(chain, filepath.Join(moved, name))
	}
	restoreVM := func(dirs ...string) (string, error) {
		return runCommand(framework.Binary(t, "backstop-apiserver"), append([]string{"restore-vm-disk", "--output", filepath.Join(moved, "disk.raw")}, dirs...)...)
	}
	out, err := restoreVM(chain...)
	if err != nil {
		t.Fatalf("restore-vm-disk: %v", err)
	}
	raw := filepath.Join(moved, "disk.raw")
	sum := sha256.Sum256(readFile(t, raw))
	if !strings.HasPrefix(out, hex.EncodeToString(sum[:])+"  "+raw) {
		t.Errorf("restore-vm-disk printed %q, want the image's sha256 and path", out)
	}
	dom.Suspend(t)
	virttest.Run(t, "qemu-img", "compare", "-U", "-f", "raw", "-F", "qcow2", raw, dom.Disk)
	dom.Resume(t)

	// Broken chains and changed files are refused before anything is written.
	_ = os.Remove(raw)
	for _, c := range []struct {
		name string
		dirs []string
		want string
	}{
		{"missing link", []string{chain[0], chain[2]}, "broken chain"},
		{"incremental first", chain[1:], "a chain starts with a full one"},
	} {
		if _, err := restoreVM(c.dirs...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("restore-vm-disk with a %s: %v, want %q", c.name, err, c.want)
		}
	}
	f, err := os.OpenFile(filepath.Join(chain[1], "vda.qcow2"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte("x"))
	f.Close()
	if _, err := restoreVM(chain...); err == nil || !strings.Contains(err.Error(), "does not match the manifest") {
		t.Errorf("restore-vm-disk with a changed file: %v", err)
	}
	if _, err := os.Stat(raw); !os.IsNotExist(err) {
		t.Errorf("a refused restore wrote the image: %v", err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runCommand runs a command; its error carries stderr.
func runCommand(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%v: %s", err, stderr.String())
	}
	return stdout.String(), nil
}

// TestVMBackupCancel: cancelling a running VM backup (its QEMU job
// throttled so that it runs long) aborts the libvirt job: Failed with
// reason Aborted, no output, no new checkpoint, the tracker unchanged; the
// VM is free for the next backup, and cancelling a finished backup is 409.
// A VM stopping during a backup, and the server killed during one, end it
// Failed with the reason, leaving nothing behind.
func TestVMBackupCancel(t *testing.T) {
	t.Parallel()
	root := vmVolumeRoot(t)
	// Full backups in push mode (the default): the test slows QEMU's backup
	// job down (pull-mode copies are interrupted in pkg/virt's tests).
	s := framework.Start(t, framework.Options{Args: []string{"--volume-root=" + root}})
	ctx := context.Background()
	const vmNS = "vmc"
	dom := virttest.NewDomain(t, vmNS+"_vm2", "1G")
	dom.Write(t, 0x11, "0", "256M")
	conn, err := virt.Open(virttest.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	group := "kubevirt.io"
	if _, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(vmNS).Create(ctx, &kv.VirtualMachineBackupTracker{
		ObjectMeta: metav1.ObjectMeta{Name: "vm2-tracker", Namespace: vmNS},
		Spec:       kv.VirtualMachineBackupTrackerSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VirtualMachine", Name: "vm2"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	volume := filepath.Join(root, vmNS, "pvc")
	if err := os.MkdirAll(volume, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, vmNS), 0o755); err != nil {
		t.Fatal(err)
	}
	cancel := func(name string) error {
		return s.Clientset.BackupV1alpha1().RESTClient().Post().Namespace(vmNS).Resource("virtualmachinebackups").Name(name).SubResource("cancel").Do(ctx).Error()
	}

	createVMBackup(t, s, vmNS, "slow", "vm2-tracker", true, "pvc", false)
	dom.ThrottleBackupJob(t, 1<<20)
	if err := cancel("slow"); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if err := cancel("slow"); err != nil && !apierrors.IsConflict(err) {
		t.Errorf("a second cancel: %v", err)
	}
	slow := waitVMBackup(t, s, vmNS, "slow", "finished", vmbFinished)
	if c := vmbCondition(slow, kv.ConditionFailed); c == nil || c.Status != metav1.ConditionTrue || c.Reason != kv.ReasonAborted {
		t.Fatalf("cancelled backup: %+v", slow.Status)
	}
	if _, err := os.Stat(filepath.Join(volume, "slow")); !os.IsNotExist(err) {
		t.Errorf("the cancelled backup left output: %v", err)
	}
	if cps, err := conn.Checkpoints(dom.Name); err != nil || len(cps) != 0 {
		t.Errorf("checkpoints after the cancelled backup: %v %v", cps, err)
	}
	if tr, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(vmNS).Get(ctx, "vm2-tracker", metav1.GetOptions{}); err != nil ||
		(tr.Status != nil && tr.Status.LatestCheckpoint != nil) {
		t.Errorf("tracker after the cancelled backup: %+v %v", tr.Status, err)
	}

	createVMBackup(t, s, vmNS, "next", "vm2-tracker", true, "pvc", false)
	if next := waitVMBackup(t, s, vmNS, "next", "finished", vmbFinished); !meta.IsStatusConditionTrue(next.Status.Conditions, string(kv.ConditionComplete)) {
		t.Fatalf("backup after the cancelled one: %+v", next.Status)
	}
	if err := cancel("next"); !apierrors.IsConflict(err) {
		t.Errorf("cancelling a finished backup: %v, want 409", err)
	}
	tracked, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(vmNS).Get(ctx, "vm2-tracker", metav1.GetOptions{})
	if err != nil || tracked.Status == nil || tracked.Status.LatestCheckpoint == nil {
		t.Fatalf("tracker after a backup: %+v %v", tracked, err)
	}
	noOutputNorCheckpoint := func(name string) {
		t.Helper()
		if entries, err := os.ReadDir(filepath.Join(volume, name)); !os.IsNotExist(err) {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("backup %s left output: %v %v", name, names, err)
		}
		if cps, err := conn.Checkpoints(dom.Name); err != nil || strings.Join(cps, ",") != tracked.Status.LatestCheckpoint.Name {
			t.Errorf("checkpoints after backup %s: %v %v, want only the tracker's", name, cps, err)
		}
	}

	// A volume too small for the backup: Failed with both numbers, before
	// anything is copied (a 1 MiB tmpfs).
	small := filepath.Join(root, vmNS, "small")
	if err := os.MkdirAll(small, 0o755); err != nil {
		t.Fatal(err)
	}
	virttest.Run(t, "mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", small)
	t.Cleanup(func() { _ = exec.Command("umount", small).Run() })
	createVMBackup(t, s, vmNS, "too-big", "vm2-tracker", true, "small", true)
	tooBig := waitVMBackup(t, s, vmNS, "too-big", "finished", vmbFinished)
	if c := vmbCondition(tooBig, kv.ConditionFailed); c == nil || c.Reason != kv.ReasonInsufficientSpace ||
		!regexp.MustCompile(`needs \d{9,} bytes but .*small has \d{6,7} bytes free`).MatchString(c.Message) {
		t.Errorf("backup into a volume too small: %+v", tooBig.Status)
	}
	if entries, _ := os.ReadDir(small); len(entries) != 0 {
		t.Errorf("the refused backup wrote into the volume: %d entries", len(entries))
	}

	// The VM stops during a backup: Failed, reason SourceLost, never stuck.
	// (Full backups of 512 MiB of data: long enough to be throttled.)
	dom.Write(t, 0x22, "256M", "256M")
	createVMBackup(t, s, vmNS, "lost", "vm2-tracker", true, "pvc", true)
	dom.ThrottleBackupJob(t, 1<<20)
	dom.Stop(t)
	lost := waitVMBackup(t, s, vmNS, "lost", "finished", vmbFinished)
	if c := vmbCondition(lost, kv.ConditionFailed); c == nil || c.Status != metav1.ConditionTrue || c.Reason != kv.ReasonSourceLost {
		t.Errorf("backup whose VM stopped: %+v", lost.Status)
	}
	noOutputNorCheckpoint("lost")
	dom.Start(t)

	// The server is killed during a backup: at the next start the libvirt
	// job is aborted and the backup Failed, reason ServerRestarted; the VM
	// is free for the next backup.
	createVMBackup(t, s, vmNS, "interrupted", "vm2-tracker", true, "pvc", true)
	dom.ThrottleBackupJob(t, 1<<20)
	s.Restart(true)
	interrupted := waitVMBackup(t, s, vmNS, "interrupted", "finished", vmbFinished)
	if c := vmbCondition(interrupted, kv.ConditionFailed); c == nil || c.Status != metav1.ConditionTrue || c.Reason != kv.ReasonServerRestarted {
		t.Errorf("backup interrupted by a restart: %+v", interrupted.Status)
	}
	noOutputNorCheckpoint("interrupted")
	createVMBackup(t, s, vmNS, "after-restart", "vm2-tracker", true, "pvc", false)
	if after := waitVMBackup(t, s, vmNS, "after-restart", "finished", vmbFinished); !meta.IsStatusConditionTrue(after.Status.Conditions, string(kv.ConditionComplete)) {
		t.Errorf("backup after the restart: %+v", after.Status)
	}
}

// TestVMBackupQuiesced: through the server, a VM with a guest agent (a
// booted Linux guest, its disk a mounted ext4 file system) is backed up
// quiesced: the Quiesced condition is true and the backup's file system is
// clean; with skipQuiesce it is QuiesceSkipped and the copy of the mounted
// file system needs journal recovery.
func TestVMBackupQuiesced(t *testing.T) {
	t.Parallel()
	root := vmVolumeRoot(t)
	s := framework.Start(t, framework.Options{Args: []string{"--volume-root=" + root}})
	ctx := context.Background()
	const vmNS = "vmq"
	virttest.NewGuestDomain(t, vmNS+"_vm1")
	volume := filepath.Join(root, vmNS, "pvc1")
	if err := os.MkdirAll(volume, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, vmNS), 0o755); err != nil {
		t.Fatal(err)
	}
	group, mode, pvc := "kubevirt.io", kv.PushMode, "pvc1"
	for _, c := range []struct {
		name   string
		skip   bool
		status metav1.ConditionStatus
		reason string
		fs     string
	}{
		{"quiesced", false, metav1.ConditionTrue, kv.ReasonQuiesceSucceeded, "clean"},
		{"not-quiesced", true, metav1.ConditionFalse, kv.ReasonQuiesceSkipped, "needs_recovery"},
	} {
		if _, err := s.Clientset.BackupV1alpha1().VirtualMachineBackups(vmNS).Create(ctx, &kv.VirtualMachineBackup{
			ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: vmNS},
			Spec: kv.VirtualMachineBackupSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VirtualMachine", Name: "vm1"},
				Mode: &mode, PvcName: &pvc, SkipQuiesce: c.skip},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		b := waitVMBackup(t, s, vmNS, c.name, "finished", vmbFinished)
		if !meta.IsStatusConditionTrue(b.Status.Conditions, string(kv.ConditionComplete)) {
			t.Fatalf("backup %s: %+v", c.name, b.Status)
		}
		if q := vmbCondition(b, kv.ConditionQuiesced); q == nil || q.Status != c.status || q.Reason != c.reason {
			t.Errorf("backup %s: Quiesced condition %+v, want %s %s", c.name, q, c.status, c.reason)
		}
		if got := virttest.FilesystemState(t, filepath.Join(volume, c.name, "vda.qcow2")); got != c.fs {
			t.Errorf("backup %s: file system %s, want %s", c.name, got, c.fs)
		}
	}
}
