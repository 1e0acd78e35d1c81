package vmbackup

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/engine/vmhost"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned/fake"
	"github.com/backstop-io/backstop/pkg/generated/informers/externalversions"
	"github.com/backstop-io/backstop/pkg/rootdir/rootdirtest"
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
		name      string
		volume    bool // the backup's volume directory exists
		cancelled bool
		source    string // kind of the source
		virt      func() (virt.Hypervisor, error)
		// live are the live VM hosts, this one being h1 (nil: the only
		// host); absent the hosts the backup lists as lacking its VM.
		live, absent []string
		wantState    kv.BackupState // "": unchanged, left to another host
		wantReason   string
		wantMessage  string // a part of the condition's message ("": any)
		wantAbsent   string
		// trackerInAPI: the tracker exists in the API, not in the informer.
		trackerInAPI bool
	}{
		{name: "volume missing: waits", source: "VirtualMachine", virt: available, wantState: kv.BackupWaiting, wantReason: kv.ReasonWaitingForVolume},
		{name: "libvirt unavailable", volume: true, source: "VirtualMachine", virt: unavailable, wantState: kv.BackupFailed, wantReason: kv.ReasonLibvirtUnavailable},
		{name: "cancelled before it started", volume: true, cancelled: true, source: "VirtualMachine", virt: available, wantState: kv.BackupFailed, wantReason: kv.ReasonAborted},
		{name: "tracker missing", volume: true, source: "VirtualMachineBackupTracker", virt: available, wantState: kv.BackupFailed, wantReason: kv.ReasonSourceNotFound,
			wantMessage: `tracker vm: virtualmachinebackuptrackers.backup.kubevirt.io "vm" not found`},
		// Made just before its backup: the informer has not seen it yet,
		// the API has. The backup goes on to libvirt (no domain here).
		{name: "tracker not in the informer yet", volume: true, source: "VirtualMachineBackupTracker", trackerInAPI: true, virt: available,
			wantState: kv.BackupFailed, wantReason: kv.ReasonSourceNotFound, wantMessage: "VirtualMachine vm-of-tracker"},
		{name: "domain missing", volume: true, source: "VirtualMachine", virt: available, wantState: kv.BackupFailed, wantReason: kv.ReasonSourceNotFound},
		{name: "domain missing here, another host may run it: left to it", volume: true, source: "VirtualMachine", virt: available,
			live: []string{"h1", "h2"}, wantAbsent: "h1"},
		{name: "domain missing here and on the other host", volume: true, source: "VirtualMachine", virt: available,
			live: []string{"h1", "h2"}, absent: []string{"h2"}, wantState: kv.BackupFailed, wantReason: kv.ReasonSourceNotFound, wantAbsent: "h2"},
		{name: "domain missing on the only live host", volume: true, source: "VirtualMachine", virt: available,
			live: []string{"h1"}, wantState: kv.BackupFailed, wantReason: kv.ReasonSourceNotFound},
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
			b.Annotations = map[string]string{}
			if c.cancelled {
				b.Annotations[kv.CancelAnnotation] = "now"
			}
			if c.absent != nil {
				b.Annotations[vmhost.AbsentAnnotation] = strings.Join(c.absent, ",")
			}
			var hosts *vmhost.Hosts
			if c.live != nil {
				hosts = &vmhost.Hosts{Self: "h1", Live: func(context.Context) ([]string, error) { return c.live, nil }}
			}
			before := b.State()
			objs := []runtime.Object{b}
			if c.trackerInAPI {
				objs = append(objs, &kv.VirtualMachineBackupTracker{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"},
					Spec: kv.VirtualMachineBackupTrackerSpec{Source: corev1.TypedLocalObjectReference{Kind: "VirtualMachine", Name: "vm-of-tracker"}}})
			}
			client := fake.NewSimpleClientset(objs...)
			factory := externalversions.NewSharedInformerFactory(client, 0).Backup().V1alpha1()
			if err := factory.VirtualMachineBackups().Informer().GetIndexer().Add(b); err != nil {
				t.Fatal(err)
			}
			ctrl, err := New(Config{Client: client, Backups: factory.VirtualMachineBackups(), Trackers: factory.VirtualMachineBackupTrackers(),
				Virt: c.virt, VolumeRoot: root, Clock: clocktesting.NewFakeClock(metav1.Now().Time), Hosts: hosts})
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
			if got.Annotations[vmhost.AbsentAnnotation] != c.wantAbsent {
				t.Errorf("hosts lacking the VM %q, want %q", got.Annotations[vmhost.AbsentAnnotation], c.wantAbsent)
			}
			if c.wantState == "" {
				if got.State() != before || got.Status != nil && len(got.Status.Conditions) > 0 {
					t.Errorf("a backup left to another host was changed: %+v", got.Status)
				}
				return
			}
			if got.State() != c.wantState {
				t.Fatalf("state %s, want %s (status %+v)", got.State(), c.wantState, got.Status)
			}
			cond := meta.FindStatusCondition(got.Status.Conditions, string(kv.ConditionProgressing))
			if c.wantState == kv.BackupFailed {
				cond = meta.FindStatusCondition(got.Status.Conditions, string(kv.ConditionFailed))
			}
			if cond == nil || cond.Reason != c.wantReason || !strings.Contains(cond.Message, c.wantMessage) {
				t.Errorf("condition %+v, want reason %s saying %q", cond, c.wantReason, c.wantMessage)
			}
		})
	}
}

// TestHostileVolumeNames: a VirtualMachineBackup stored with a claim name
// that is no name (admission refuses these; one stored before it did, or
// on a server that missed it) is deleted without the engine touching
// anything outside its own directory: the data directory around the
// volume root (pki, pebble, backups) and the other tenants' volumes stay
// as they were, and the backup's finalizer goes.
func TestHostileVolumeNames(t *testing.T) {
	unavailable := func() (virt.Hypervisor, error) { return nil, fmt.Errorf("%w: no daemon", virt.ErrUnavailable) }
	for _, pvc := range rootdirtest.Hostile {
		t.Run(fmt.Sprintf("%q", pvc), func(t *testing.T) {
			data := t.TempDir()
			root := filepath.Join(data, "volumes")
			for _, f := range []string{"pki/ca.crt", "pebble/000001.sst", "backups/b/velero-backup.json", "volumes/other/vm-backups/b1/manifest.json", "volumes/ns/vm-backups/pki/manifest.json"} {
				writeFile(t, filepath.Join(data, f))
			}
			before := treeSums(t, data)
			group := "kubevirt.io"
			now := metav1.Now()
			b := &kv.VirtualMachineBackup{
				ObjectMeta: metav1.ObjectMeta{Name: "pki", Namespace: "ns", UID: "0123456789", DeletionTimestamp: &now, Finalizers: []string{kv.CleanupFinalizer}},
				Spec:       kv.VirtualMachineBackupSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VirtualMachine", Name: "x"}, PvcName: &pvc},
			}
			client := fake.NewSimpleClientset(b)
			factory := externalversions.NewSharedInformerFactory(client, 0).Backup().V1alpha1()
			if err := factory.VirtualMachineBackups().Informer().GetIndexer().Add(b); err != nil {
				t.Fatal(err)
			}
			ctrl, err := New(Config{Client: client, Backups: factory.VirtualMachineBackups(), Trackers: factory.VirtualMachineBackupTrackers(),
				Virt: unavailable, VolumeRoot: root, Clock: clocktesting.NewFakeClock(now.Time)})
			if err != nil {
				t.Fatal(err)
			}
			if err := ctrl.sync(context.Background(), cache.ObjectName{Namespace: "ns", Name: "pki"}); err != nil {
				t.Fatal(err)
			}
			after := treeSums(t, data)
			for f, sum := range before {
				if after[f] != sum {
					t.Errorf("%s changed or removed", f)
				}
			}
			for f := range after {
				if _, ok := before[f]; !ok {
					t.Errorf("%s made", f)
				}
			}
			got, err := client.BackupV1alpha1().VirtualMachineBackups("ns").Get(context.Background(), "pki", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Finalizers) != 0 {
				t.Errorf("finalizers %v left: the backup never goes", got.Finalizers)
			}
		})
	}
}

func writeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(path), 0o644); err != nil {
		t.Fatal(err)
	}
}

// treeSums maps every file under dir to the sha256 of its content.
func treeSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[p] = fmt.Sprintf("%x", sha256.Sum256(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
