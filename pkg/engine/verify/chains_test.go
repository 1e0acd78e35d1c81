package verify

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned/fake"
	"github.com/backstop-io/backstop/pkg/vmmanifest"
)

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
}

// vmBackupFiles writes a VM backup's directory as the VM backup engine
// lays it out (<root>/<ns>/<pvc>/<name>/, a qcow2 file of disk vda with
// data written, its manifest), backed by the file of parent when given.
func vmBackupFiles(t *testing.T, root, name, checkpoint string, parent *vmmanifest.Manifest, parentFile string) (vmmanifest.Manifest, string) {
	t.Helper()
	dir := filepath.Join(root, "farm", "backups", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "vda.qcow2")
	m := vmmanifest.Manifest{Backup: name, VirtualMachine: "vm", Domain: "farm_vm", Checkpoint: checkpoint, Created: time.Now().UTC(), Type: kv.Full}
	if parent == nil {
		run(t, "qemu-img", "create", "-q", "-f", "qcow2", file, "4M")
	} else {
		run(t, "qemu-img", "create", "-q", "-f", "qcow2", "-b", parentFile, "-F", "qcow2", file, "4M")
		m.Type, m.Parent = kv.Incremental, parent.Checkpoint
	}
	run(t, "qemu-io", "-f", "qcow2", "-c", fmt.Sprintf("write -P %d 0 64k", len(checkpoint)), file)
	sum, err := vmmanifest.FileSHA256(file)
	if err != nil {
		t.Fatal(err)
	}
	m.Disks = []vmmanifest.Disk{{Name: "vda", File: "vda.qcow2", VirtualSize: 4 << 20, Backing: parentFile, SHA256: sum}}
	if err := vmmanifest.Write(dir, m); err != nil {
		t.Fatal(err)
	}
	return m, file
}

// TestVMChains: the VM backups a backup made are checked through their
// chains (the full backup under the incremental one): as written they
// pass; a byte changed in the older link's file is a problem naming the VM
// backup and the file; a VM backup whose files are not here is one too.
func TestVMChains(t *testing.T) {
	if testing.Short() {
		t.Skip("runs qemu-img and qemu-io on real images: not in the fast tier (make test-unit); make test runs it")
	}
	for _, tool := range []string{"qemu-img", "qemu-io"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (make setup installs QEMU): %v", tool, err)
		}
	}
	root := t.TempDir()
	full, fullFile := vmBackupFiles(t, root, "vm-1", "cp1", nil, "")
	vmBackupFiles(t, root, "vm-2", "cp2", &full, fullFile)
	b := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "backstop-system", UID: "uid-1"}}
	vmb := func(name string, state metav1.ConditionStatus) runtime.Object {
		return &kv.VirtualMachineBackup{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "farm", Labels: map[string]string{velerov1.BackupUIDLabel: string(b.UID)}},
			Spec:       kv.VirtualMachineBackupSpec{PvcName: ptr.To("backups")},
			Status: &kv.VirtualMachineBackupStatus{Conditions: []metav1.Condition{
				{Type: string(kv.ConditionComplete), Status: state, Reason: "r", LastTransitionTime: metav1.Now()}}},
		}
	}
	client := fake.NewClientset(vmb("vm-2", metav1.ConditionTrue),
		// Not complete: the backup's own operations say why; not checked.
		vmb("vm-3", metav1.ConditionFalse))
	ctx := context.Background()
	check := func(t *testing.T, volumeRoot string) *Report {
		t.Helper()
		r := &Report{}
		if err := VMChains(ctx, client, volumeRoot, b, r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	t.Run("as written", func(t *testing.T) {
		if r := check(t, root); r.ProblemCount != 0 || r.VMDiskChains != 1 {
			t.Errorf("%+v", r)
		}
	})
	t.Run("a byte changed in the full backup under it", func(t *testing.T) {
		defer flip(t, fullFile)()
		r := check(t, root)
		if r.ProblemCount != 1 || !strings.HasPrefix(r.Problems[0], "VM backup farm/vm-2: "+fullFile+": sha256") {
			t.Errorf("problems %q", r.Problems)
		}
	})
	t.Run("files not on this host", func(t *testing.T) {
		r := check(t, t.TempDir())
		if r.ProblemCount != 1 || !strings.Contains(r.Problems[0], "VM backup farm/vm-2: its files are not on this host") {
			t.Errorf("problems %q", r.Problems)
		}
	})
	t.Run("no volume root", func(t *testing.T) {
		r := check(t, "")
		if r.ProblemCount != 1 || !strings.Contains(r.Problems[0], "no volume root") {
			t.Errorf("problems %q", r.Problems)
		}
	})
}
