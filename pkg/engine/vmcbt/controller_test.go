package vmcbt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	corev1 "k8s.io/api/core/v1"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned/fake"
	"github.com/backstop-io/backstop/pkg/generated/informers/externalversions"
	"github.com/backstop-io/backstop/pkg/rootdir/rootdirtest"
	"github.com/backstop-io/backstop/pkg/virt"
)

// fakeHypervisor answers the engine's changed block tracking calls from a
// script and records them; any other call panics (the embedded nil
// interface), which the engine must not make here.
type fakeHypervisor struct {
	virt.Hypervisor
	state     virt.CBTState // what CBTStatus says
	enabled   virt.CBTState // what EnableCBT leads to
	enableErr error
	statusErr error
	calls     []string
}

func (f *fakeHypervisor) CBTStatus(domain, _ string) (virt.CBTState, error) {
	f.calls = append(f.calls, "CBTStatus "+domain)
	return f.state, f.statusErr
}

func (f *fakeHypervisor) EnableCBT(domain, _ string) (virt.CBTState, error) {
	f.calls = append(f.calls, "EnableCBT "+domain)
	if f.enableErr != nil {
		return "", f.enableErr
	}
	f.state = f.enabled
	return f.state, nil
}

func (f *fakeHypervisor) DisableCBT(domain, _ string) (virt.CBTState, error) {
	f.calls = append(f.calls, "DisableCBT "+domain)
	f.state = virt.CBTDisabled
	return f.state, nil
}

func (f *fakeHypervisor) OnLifecycle(func(string)) func() { return func() {} }
func (f *fakeHypervisor) OnReconnect(func()) func()       { return func() {} }

// TestSyncDecisions: what the engine asks libvirt and reports on the
// trackers of a VM, for each answer libvirt gives.
func TestSyncDecisions(t *testing.T) {
	for _, c := range []struct {
		name      string
		deselect  bool
		hv        fakeHypervisor
		wantCalls []string
		want      kv.ChangedBlockTrackingStatus
	}{
		{name: "raw disks get overlays", hv: fakeHypervisor{state: virt.CBTDisabled, enabled: virt.CBTPendingRestart},
			wantCalls: []string{"CBTStatus ns_vm", "EnableCBT ns_vm"}, want: kv.ChangedBlockTrackingStatus{State: kv.ChangedBlockTrackingPendingRestart}},
		{name: "already enabled", hv: fakeHypervisor{state: virt.CBTEnabled},
			wantCalls: []string{"CBTStatus ns_vm"}, want: kv.ChangedBlockTrackingStatus{State: kv.ChangedBlockTrackingEnabled}},
		{name: "deselected", deselect: true, hv: fakeHypervisor{state: virt.CBTEnabled},
			wantCalls: []string{"DisableCBT ns_vm"}, want: kv.ChangedBlockTrackingStatus{State: kv.ChangedBlockTrackingDisabled}},
		{name: "libvirt away", hv: fakeHypervisor{statusErr: fmt.Errorf("%w: connecting again", virt.ErrUnavailable)},
			wantCalls: []string{"CBTStatus ns_vm"}, want: kv.ChangedBlockTrackingStatus{Reason: kv.ReasonLibvirtUnavailable, Message: "libvirt unavailable: connecting again"}},
		{name: "enabling fails", hv: fakeHypervisor{state: virt.CBTDisabled, enableErr: errors.New("no space for the overlay")},
			wantCalls: []string{"CBTStatus ns_vm", "EnableCBT ns_vm", "CBTStatus ns_vm"},
			want:      kv.ChangedBlockTrackingStatus{State: kv.ChangedBlockTrackingDisabled, Reason: kv.ReasonEnableFailed, Message: "no space for the overlay"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			group := "kubevirt.io"
			tracker := &kv.VirtualMachineBackupTracker{
				ObjectMeta: metav1.ObjectMeta{Name: "t1", Namespace: "ns", UID: "u1"},
				Spec:       kv.VirtualMachineBackupTrackerSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VirtualMachine", Name: "vm"}},
			}
			if c.deselect {
				tracker.Annotations = map[string]string{kv.ChangedBlockTrackingAnnotation: "false"}
			}
			client := fake.NewSimpleClientset(tracker)
			informer := externalversions.NewSharedInformerFactory(client, 0).Backup().V1alpha1().VirtualMachineBackupTrackers()
			if err := informer.Informer().GetIndexer().Add(tracker); err != nil {
				t.Fatal(err)
			}
			hv := c.hv
			ctrl, err := New(Config{Client: client, Trackers: informer, StateDir: t.TempDir(),
				Virt: func() (virt.Hypervisor, error) { return &hv, nil }})
			if err != nil {
				t.Fatal(err)
			}
			_ = ctrl.sync(context.Background(), cache.ObjectName{Namespace: "ns", Name: "vm"})
			if !slices.Equal(hv.calls, c.wantCalls) {
				t.Errorf("libvirt calls %v, want %v", hv.calls, c.wantCalls)
			}
			got, err := client.BackupV1alpha1().VirtualMachineBackupTrackers("ns").Get(context.Background(), "t1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status == nil || got.Status.ChangedBlockTracking == nil || *got.Status.ChangedBlockTracking != c.want {
				t.Errorf("tracker status %+v, want %+v", got.Status, c.want)
			}
		})
	}
}

// goneDomain is libvirt without the domain.
type goneDomain struct{ virt.Hypervisor }

func (goneDomain) DisableCBT(domain, _ string) (virt.CBTState, error) {
	return "", fmt.Errorf("domain %s: %w", domain, virt.ErrDomainNotFound)
}

// TestHostileVMNames: the engine removes the overlays of a VM whose
// trackers are gone and whose domain is gone; a VM name that is no name
// (a tracker stored before admission refused it) makes it remove nothing
// outside the state directory: not the volumes around it, not the data
// directory around those.
func TestHostileVMNames(t *testing.T) {
	for _, vm := range rootdirtest.Hostile {
		t.Run(fmt.Sprintf("%q", vm), func(t *testing.T) {
			data := t.TempDir()
			state := filepath.Join(data, "volumes", ".cbt")
			files := []string{"pki/ca.crt", "pebble/000001.sst", "volumes/ns/vm-backups/b1/manifest.json", "volumes/.cbt/other_vm/vda.qcow2"}
			for _, f := range files {
				p := filepath.Join(data, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			client := fake.NewSimpleClientset()
			informer := externalversions.NewSharedInformerFactory(client, 0).Backup().V1alpha1().VirtualMachineBackupTrackers()
			ctrl, err := New(Config{Client: client, Trackers: informer, StateDir: state,
				Virt: func() (virt.Hypervisor, error) { return goneDomain{}, nil }})
			if err != nil {
				t.Fatal(err)
			}
			_ = ctrl.sync(context.Background(), cache.ObjectName{Namespace: "ns", Name: vm})
			for _, f := range files {
				if data2, err := os.ReadFile(filepath.Join(data, f)); err != nil || string(data2) != f {
					t.Errorf("%s removed or changed: %v", f, err)
				}
			}
		})
	}
}
