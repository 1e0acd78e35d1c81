package scaleout

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/engine/leader"
	"github.com/backstop-io/backstop/pkg/engine/vmhost"
	"github.com/backstop-io/backstop/pkg/virt/virttest"
	"github.com/backstop-io/backstop/test/integration/framework"
)

const vmNS = "vms"

// TestVMEnginesPerHost: replicas on two libvirt hosts, on one etcd: two
// replicas on host-a (the system daemon) and one on host-b (a second
// daemon, in a mount namespace of its own). Each host's VM engines run on
// one of its replicas, under the host's Lease, for the VMs of its libvirt
// only: each VM is backed up and tracked by its host, the other host
// records that it lacks the VM and leaves it alone, a backup of a VM no
// host has fails and names the hosts, and when the replica running host-a's
// engines is killed, the other replica of host-a takes them over.
func TestVMEnginesPerHost(t *testing.T) {
	uriB := virttest.StartHost(t)
	root := virttest.Dir(t)
	common := []string{"--volume-root=" + root}
	onA := append([]string{"--vm-host=host-a", "--libvirt-uri=" + virttest.URI}, common...)
	onB := append([]string{"--vm-host=host-b", "--libvirt-uri=" + uriB}, common...)
	c := startReplicas(t, framework.StartEtcd(t, 1), [][]string{onA, onB, onA})
	r1 := c.replicas[0]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	virttest.NewDomainOn(t, virttest.URI, vmNS+"_vma", "64M")
	virttest.NewDomainOn(t, uriB, vmNS+"_vmb", "64M")
	for _, pvc := range []string{"pvc-a", "pvc-b", "pvc-ghost"} {
		if err := os.MkdirAll(filepath.Join(root, vmNS, pvc), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, vmNS), 0o755); err != nil {
		t.Fatal(err)
	}

	// Each host's Lease is held by a replica of that host.
	leaseA, leaseB := leader.HostLease(enginesLease, "host-a"), leader.HostLease(enginesLease, "host-b")
	holderA, termA := c.holderIndex(ctx, r1, leaseA, leader.Term{})
	holderB, _ := c.holderIndex(ctx, r1, leaseB, leader.Term{})
	if holderA == 1 || holderB != 1 {
		t.Fatalf("host-a's VM engines run on replica %d, host-b's on replica %d: want 1 or 3, and 2", holderA+1, holderB+1)
	}

	// Each VM is tracked by its host; the other records that it lacks it.
	group := "kubevirt.io"
	for _, vm := range []string{"vma", "vmb"} {
		if _, err := r1.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(vmNS).Create(ctx, &kv.VirtualMachineBackupTracker{
			ObjectMeta: metav1.ObjectMeta{Name: vm + "-tracker", Namespace: vmNS},
			Spec:       kv.VirtualMachineBackupTrackerSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VirtualMachine", Name: vm}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for vm, other := range map[string]string{"vma": "host-b", "vmb": "host-a"} {
		tr := waitTracker(ctx, t, r1, vm+"-tracker", func(tr *kv.VirtualMachineBackupTracker) bool {
			return tr.Annotations[vmhost.AbsentAnnotation] == other && tr.Status != nil && tr.Status.ChangedBlockTracking != nil &&
				tr.Status.ChangedBlockTracking.State == kv.ChangedBlockTrackingEnabled
		})
		if cbt := tr.Status.ChangedBlockTracking; cbt.Reason != "" {
			t.Errorf("tracker of %s, tracked on its host and lacked by %s: %+v", vm, other, cbt)
		}
	}

	// Each VM is backed up by its host's engine.
	backup(ctx, t, r1, "a1", "vma-tracker", "pvc-a")
	backup(ctx, t, r1, "b1", "vmb-tracker", "pvc-b")
	for name, host := range map[string]int{"a1": holderA, "b1": holderB} {
		b := waitVMB(ctx, t, r1, name)
		if !meta.IsStatusConditionTrue(b.Status.Conditions, string(kv.ConditionComplete)) {
			t.Errorf("backup %s: %+v", name, b.Status)
		}
		if ran := c.loggedVMBackup(ctx, name); len(ran) != 1 || ran[0] != host {
			t.Errorf("backup %s ran on replicas %v, want only %d (its host's engines)", name, ran, host+1)
		}
	}

	// A VM that no host has.
	backup(ctx, t, r1, "ghost", "no-such-vm", "pvc-ghost")
	ghost := waitVMB(ctx, t, r1, "ghost")
	if f := meta.FindStatusCondition(ghost.Status.Conditions, string(kv.ConditionFailed)); f == nil || f.Reason != kv.ReasonSourceNotFound ||
		!strings.Contains(f.Message, "host-a, host-b") {
		t.Errorf("backup of a VM no host has: %+v", ghost.Status)
	}

	// The replica running host-a's VM engines killed: host-a's other
	// replica takes them over, and backs vma up incrementally.
	c.replicas[holderA].Kill()
	via := c.replicas[1]
	next, _ := c.holderIndex(ctx, via, leaseA, termA)
	if next == holderA || next == 1 {
		t.Errorf("host-a's VM engines went to replica %d after replica %d was killed: want host-a's other replica", next+1, holderA+1)
	}
	backup(ctx, t, via, "a2", "vma-tracker", "pvc-a")
	if b := waitVMB(ctx, t, via, "a2"); !meta.IsStatusConditionTrue(b.Status.Conditions, string(kv.ConditionComplete)) || b.Status.Type != kv.Incremental {
		t.Errorf("backup of vma after host-a's engines moved: %+v", b.Status)
	}
	if ran := c.loggedVMBackup(ctx, "a2"); len(ran) != 1 || ran[0] != next {
		t.Errorf("backup a2 ran on replicas %v, want only %d", ran, next+1)
	}
}

// loggedVMBackup waits until a replica has logged that it completed a
// VirtualMachineBackup, which its engine does after writing the status
// the test saw, and returns the replicas that did.
func (c *cluster) loggedVMBackup(ctx context.Context, name string) []int {
	var ran []int
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		ran = c.ranVMBackup(name)
		return len(ran) > 0, nil
	})
	return ran
}

// backup creates a VirtualMachineBackup of a tracker (or of a VM, when no
// tracker has that name) into a volume.
func backup(ctx context.Context, t *testing.T, r *framework.Server, name, source, pvc string) {
	t.Helper()
	group, kind := kv.GroupName, "VirtualMachineBackupTracker"
	if !strings.HasSuffix(source, "-tracker") {
		group, kind = "kubevirt.io", "VirtualMachine"
	}
	if _, err := r.Clientset.BackupV1alpha1().VirtualMachineBackups(vmNS).Create(ctx, &kv.VirtualMachineBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: vmNS},
		Spec:       kv.VirtualMachineBackupSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: kind, Name: source}, PvcName: &pvc},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating VirtualMachineBackup %s: %v", name, err)
	}
}

// waitVMB waits until a VirtualMachineBackup has ended.
func waitVMB(ctx context.Context, t *testing.T, r *framework.Server, name string) *kv.VirtualMachineBackup {
	t.Helper()
	var last *kv.VirtualMachineBackup
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		b, err := r.Clientset.BackupV1alpha1().VirtualMachineBackups(vmNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = b
		return b.State().Terminal(), nil
	}); err != nil {
		t.Fatalf("VirtualMachineBackup %s did not end: %+v", name, last)
	}
	return last
}

// waitTracker waits until a tracker satisfies cond.
func waitTracker(ctx context.Context, t *testing.T, r *framework.Server, name string, cond func(*kv.VirtualMachineBackupTracker) bool) *kv.VirtualMachineBackupTracker {
	t.Helper()
	var last *kv.VirtualMachineBackupTracker
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		tr, err := r.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(vmNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = tr
		return cond(tr), nil
	}); err != nil {
		t.Fatalf("tracker %s: %+v", name, last)
	}
	return last
}

// ranVMBackup lists the replicas whose server log says they completed the
// VirtualMachineBackup.
func (c *cluster) ranVMBackup(name string) []int {
	c.t.Helper()
	var out []int
	for i, r := range c.replicas {
		data, err := os.ReadFile(filepath.Join(r.DataDir, "server.log"))
		if err != nil {
			c.t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, `"VM backup completed"`) && strings.Contains(line, `virtualMachineBackup="`+vmNS+`/`+name+`"`) {
				out = append(out, i)
				break
			}
		}
	}
	return out
}
