package browser

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/virt/virttest"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestConsoleVMBackups: a VM on the real libvirt daemon, backed up three
// times through its tracker (a full backup, then two incrementals of the
// blocks written in between), then by a Velero backup of its namespace
// (its disk backup an async operation): the Velero backup's page shows
// the VM disk backup and the operation; the VM backups view shows one
// chain of four, full first, each link with its size.
func TestConsoleVMBackups(t *testing.T) {
	const namespace = "consolevm"
	root := virttest.Dir(t)
	s := framework.Start(t, framework.Options{Args: []string{"--volume-root=" + root, "--item-operation-sync-frequency=200ms"}})
	ctx := context.Background()
	dom := virttest.NewDomain(t, namespace+"_vm1", "64M")
	group := "kubevirt.io"
	if _, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(namespace).Create(ctx, &kv.VirtualMachineBackupTracker{
		// The Velero backup's disk backup of the VM goes through its tracker,
		// into this volume.
		ObjectMeta: metav1.ObjectMeta{Name: "vm1-tracker", Annotations: map[string]string{kv.VMBackupPVCAnnotation: "pvc1"}},
		Spec:       kv.VirtualMachineBackupTrackerSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VirtualMachine", Name: "vm1"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, namespace, "pvc1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, namespace), 0o755); err != nil {
		t.Fatal(err)
	}
	trackerGroup, mode, pvc := kv.GroupName, kv.PushMode, "pvc1"
	for i, name := range []string{"b1", "b2", "b3"} {
		dom.Write(t, byte(0x11*(i+1)), "1M", "256k")
		if _, err := s.Clientset.BackupV1alpha1().VirtualMachineBackups(namespace).Create(ctx, &kv.VirtualMachineBackup{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: kv.VirtualMachineBackupSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &trackerGroup, Kind: "VirtualMachineBackupTracker", Name: "vm1-tracker"},
				Mode: &mode, PvcName: &pvc},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var last *kv.VirtualMachineBackup
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			b, err := s.Clientset.BackupV1alpha1().VirtualMachineBackups(namespace).Get(ctx, name, metav1.GetOptions{})
			last = b
			return err == nil && b.State().Terminal(), nil
		}); err != nil || last.State() != kv.BackupComplete {
			t.Fatalf("VM backup %s did not complete: %v, %+v", name, err, last)
		}
	}

	// A Velero backup of the namespace: the VM's disk backup is its async
	// operation, the fourth link of the chain. Its name is longer than a
	// label value: its page finds what it made all the same.
	dom.Write(t, 0x44, "2M", "64k")
	withVM := "with-vm" + strings.Repeat("-long-name", 6)
	if _, err := s.Clientset.VeleroV1().Backups(adminNamespace).Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: withVM},
		Spec: velerov1.BackupSpec{IncludedNamespaces: []string{namespace}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, s.KubeconfigPath)
	browser := newBrowser(t)

	t.Run("the Velero backup's page: its VM disk and its operation", func(t *testing.T) {
		openConsole(t, browser, proxy, adminNamespace)
		show(t, browser, "backups/"+withVM)
		waitShown(t, browser, "the backup Completed", `article[data-backup-page] [data-phase=Completed]`)
		waitShown(t, browser, "its VM disk backup", fmt.Sprintf(`[data-vm-disk="%s-vm1-tracker"] [data-phase=Complete]`, withVM))
		click(t, browser, `#operations-title + p button`)
		waitShown(t, browser, "its operation Completed", `table[data-operations="1"] [data-operation] [data-phase=Completed]`)
		checkAccessibility(t, browser)
	})

	openConsole(t, browser, proxy, namespace)
	show(t, browser, "vmbackups")
	waitShown(t, browser, "the chain", fmt.Sprintf(`ol.chain[data-chain="b1,b2,b3,%s-vm1-tracker"]`, withVM))
	types, err := chromedp.Run(browser, chromedp.Evaluate[[]string](`[...document.querySelectorAll("ol.chain li")].map(l => l.dataset.type)`))
	if err != nil || strings.Join(types, ",") != "Full,Incremental,Incremental,Incremental" {
		t.Errorf("the chain's links: %v (%v), want Full then three Incremental", types, err)
	}
	waitShown(t, browser, "the backups listed Complete", `section[data-kind=virtualmachinebackups] tr[data-name=b3] [data-phase=Complete]`)
	checkAccessibility(t, browser)
	screenshot(t, browser, "console-vmbackups.png")
}
