package vmbackup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned/fake"
	"github.com/backstop-io/backstop/pkg/generated/informers/externalversions"
	"github.com/backstop-io/backstop/pkg/virt"
)

// noDomain is a hypervisor without the backup's domain; any other call
// than those scripted panics (the embedded nil interface).
type noDomain struct{ virt.Hypervisor }

func (noDomain) Disks(domain string) ([]virt.Disk, error) {
	return nil, fmt.Errorf("domain %s: %w", domain, virt.ErrDomainNotFound)
}

// TestStartDecisions: what the engine makes of a new backup before any
// disk is copied, for each situation it can meet, without a daemon.
func TestStartDecisions(t *testing.T) {
	unavailable := func() (virt.Hypervisor, error) { return nil, fmt.Errorf("%w: no daemon", virt.ErrUnavailable) }
	available := func() (virt.Hypervisor, error) { return noDomain{}, nil }
	for _, c := range []struct {
		name       string
		volume     bool // the backup's volume directory exists
		cancelled  bool
		source     string // kind of the source
		virt       func() (virt.Hypervisor, error)
		wantState  kv.BackupState
		wantReason string
	}{
		{name: "volume missing: waits", source: "VirtualMachine", virt: available, wantState: kv.BackupWaiting, wantReason: kv.ReasonWaitingForVolume},
		{name: "libvirt unavailable", volume: true, source: "VirtualMachine", virt: unavailable, wantState: kv.BackupFailed, wantReason: kv.ReasonLibvirtUnavailable},
		{name: "cancelled before it started", volume: true, cancelled: true, source: "VirtualMachine", virt: available, wantState: kv.BackupFailed, wantReason: kv.ReasonAborted},
		{name: "tracker missing", volume: true, source: "VirtualMachineBackupTracker", virt: available, wantState: kv.BackupFailed, wantReason: kv.ReasonSourceNotFound},
		{name: "domain missing", volume: true, source: "VirtualMachine", virt: available, wantState: kv.BackupFailed, wantReason: kv.ReasonSourceNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			if c.volume {
				if err := os.MkdirAll(filepath.Join(root, "ns", "out"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			group, pvc := "kubevirt.io", "out"
			if c.source != "VirtualMachine" {
				group = kv.GroupName
			}
			b := &kv.VirtualMachineBackup{
				ObjectMeta: metav1.ObjectMeta{Name: "b1", Namespace: "ns", UID: "0123456789"},
				Spec:       kv.VirtualMachineBackupSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: c.source, Name: "vm"}, PvcName: &pvc},
			}
			if c.cancelled {
				b.Annotations = map[string]string{kv.CancelAnnotation: "now"}
			}
			client := fake.NewSimpleClientset(b)
			factory := externalversions.NewSharedInformerFactory(client, 0).Backup().V1alpha1()
			if err := factory.VirtualMachineBackups().Informer().GetIndexer().Add(b); err != nil {
				t.Fatal(err)
			}
			ctrl, err := New(Config{Client: client, Backups: factory.VirtualMachineBackups(), Trackers: factory.VirtualMachineBackupTrackers(),
				Virt: c.virt, VolumeRoot: root, Clock: clocktesting.NewFakeClock(metav1.Now().Time)})
			if err != nil {
				t.Fatal(err)
			}
			if err := ctrl.sync(context.Background(), cache.ObjectName{Namespace: "ns", Name: "b1"}); err != nil {
				t.Fatal(err)
			}
			ctrl.wg.Wait() // a started run ends (here: the domain is missing)
			got, err := client.BackupV1alpha1().VirtualMachineBackups("ns").Get(context.Background(), "b1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.State() != c.wantState {
				t.Fatalf("state %s, want %s (status %+v)", got.State(), c.wantState, got.Status)
			}
			cond := meta.FindStatusCondition(got.Status.Conditions, string(kv.ConditionProgressing))
			if c.wantState == kv.BackupFailed {
				cond = meta.FindStatusCondition(got.Status.Conditions, string(kv.ConditionFailed))
			}
			if cond == nil || cond.Reason != c.wantReason {
				t.Errorf("condition %+v, want reason %s", cond, c.wantReason)
			}
		})
	}
}
