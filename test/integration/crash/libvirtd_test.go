package crash

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/virt/virttest"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestLibvirtdRestart: libvirtd goes away while the server runs (it runs
// here, apart from the other VM tests, because it stops the daemon they
// use). Meanwhile the changed block tracking state says libvirt is
// unavailable; once the daemon is back the server's connection comes back
// by itself, the state is reported again, and the next VM backup
// completes.
func TestLibvirtdRestart(t *testing.T) {
	root := virttest.Dir(t)
	s := framework.Start(t, framework.Options{Args: []string{"--volume-root=" + root}})
	r := &run{t: t, s: s, root: root, vmNS: "restart"}
	r.domain("vm1")
	ctx := context.Background()
	trackers := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(r.vmNS)
	group := "kubevirt.io"
	if _, err := trackers.Create(ctx, &kv.VirtualMachineBackupTracker{
		ObjectMeta: metav1.ObjectMeta{Name: "t1", Namespace: r.vmNS},
		Spec:       kv.VirtualMachineBackupTrackerSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VirtualMachine", Name: "vm1"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cbt := func() kv.ChangedBlockTrackingStatus {
		tr, err := trackers.Get(ctx, "t1", metav1.GetOptions{})
		if err != nil || tr.Status == nil || tr.Status.ChangedBlockTracking == nil {
			return kv.ChangedBlockTrackingStatus{}
		}
		return *tr.Status.ChangedBlockTracking
	}
	r.waitFor("changed block tracking Enabled", func() bool {
		st := cbt()
		return st.State == kv.ChangedBlockTrackingEnabled && st.Reason == ""
	})

	// libvirtd goes away; the server's next look at the VM says so.
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			startLibvirtd(t)
		}
	})
	if out, err := exec.Command("pkill", "-x", "libvirtd").CombinedOutput(); err != nil {
		t.Fatalf("stopping libvirtd: %v %s", err, out)
	}
	// Gone, not only deaf: start-libvirt.sh starts no daemon while one runs.
	r.waitFor("libvirtd to be gone", func() bool {
		return exec.Command("pgrep", "-x", "libvirtd").Run() != nil
	})
	// Deselecting and selecting the VM again makes the engine look at it
	// now (it acts on selection changes, and otherwise once a minute).
	selectVM := func(value string) {
		patch := []byte(`{"metadata":{"annotations":{"` + kv.ChangedBlockTrackingAnnotation + `":"` + value + `"}}}`)
		if _, err := trackers.Patch(ctx, "t1", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	selectVM("false")
	selectVM("true")
	r.waitFor("changed block tracking to say libvirt is unavailable", func() bool {
		return cbt().Reason == kv.ReasonLibvirtUnavailable
	})

	// libvirtd is back: the connection comes back, the state is reported
	// again without anything poking the tracker.
	startLibvirtd(t)
	restarted = true
	r.waitFor("changed block tracking Enabled again", func() bool {
		st := cbt()
		return st.State == kv.ChangedBlockTrackingEnabled && st.Reason == ""
	})

	// The next backup works.
	r.createVMBackup("after-restart", "VirtualMachineBackupTracker", "t1")
	r.waitFor("VM backup after the restart", func() bool {
		b, err := s.Clientset.BackupV1alpha1().VirtualMachineBackups(r.vmNS).Get(ctx, "after-restart", metav1.GetOptions{})
		if err == nil && b.State() == kv.BackupFailed {
			t.Fatalf("VM backup after the restart failed: %+v", b.Status.Conditions)
		}
		return err == nil && b.State() == kv.BackupComplete
	})
	if _, err := os.Stat(filepath.Join(root, r.vmNS, "out", "after-restart", "manifest.json")); err != nil {
		t.Errorf("VM backup after the restart: %v", err)
	}
}

func startLibvirtd(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("bash", "../../../hack/start-libvirt.sh").CombinedOutput(); err != nil {
		t.Fatalf("starting libvirtd: %v %s", err, out)
	}
}
