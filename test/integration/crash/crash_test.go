// Package crash kills the server at every named crash point of its engines
// (pkg/failpoint) and checks what the next start makes of it: every object
// ends in a state its life allows, the storage location holds no data of a
// failed or deleted backup, libvirt holds no job or checkpoint nobody
// owns, VM backup volumes hold no output of a failed backup, and the queue
// drains.
package crash

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/failpoint"
	"github.com/backstop-io/backstop/pkg/virt/virttest"
	"github.com/backstop-io/backstop/pkg/vmrestore"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// ns is the admin namespace; app holds the items backups take.
const (
	ns  = "backstop-system"
	app = "app"
)

// run is one crash point's scenario.
type run struct {
	t     *testing.T
	s     *framework.Server
	root  string   // volume root of VM backups
	vmNS  string   // namespace of the VMs, when the point needs one
	doms  []string // libvirt domains of the scenario
	extra []string // server flags
	// want is what a scenario recorded before the crash, for its verify.
	want string
}

// point is a crash point and what drives the server to it.
type point struct {
	name  string
	vm    bool
	flags []string
	drive func(r *run)
	// verify, if set, checks what the point's scenario promises after
	// the restart.
	verify func(r *run)
}

func points() []point {
	backupOfApp := func(r *run) { r.createBackup("b1", app) }
	completed := func(r *run) {
		r.createBackup("b1", app)
		r.waitBackup("b1", velerov1.BackupPhaseCompleted)
	}
	return []point{
		{name: failpoint.BackupInProgress, drive: backupOfApp},
		{name: failpoint.BackupMidCollection, drive: backupOfApp},
		{name: failpoint.BackupBeforeUpload, drive: backupOfApp},
		{name: failpoint.BackupAfterUpload, drive: backupOfApp},
		{name: failpoint.BackupFinalizing, drive: backupOfApp},
		{name: failpoint.BackupWaitingForOps, vm: true, drive: func(r *run) {
			r.domain("vm1")
			r.createBackup("b1", r.vmNS)
		}},
		// Killed as the backup made a VM's VirtualMachineBackup, before
		// it recorded the operation: the restart finds it by the
		// backup's UID and cancels it.
		{name: failpoint.BackupOperationStarted, vm: true, drive: func(r *run) {
			r.domain("vm1")
			r.createBackup("b1", r.vmNS)
		}, verify: func(r *run) {
			if b := r.backup("b1"); b == nil || b.Status.Phase != velerov1.BackupPhaseFailed {
				r.t.Fatalf("backup b1 after the restart: %+v, want Failed", b)
			}
			vmbs, err := r.s.Clientset.BackupV1alpha1().VirtualMachineBackups(r.vmNS).List(context.Background(), metav1.ListOptions{LabelSelector: velerov1.BackupNameLabel + "=b1"})
			r.check(err)
			if len(vmbs.Items) == 0 {
				r.t.Fatal("backup b1 made no VirtualMachineBackup before the crash")
			}
			// Cancelled by the restart: its own engine's restart would fail
			// it too, but only the backup's cancels it.
			for _, vmb := range vmbs.Items {
				if _, cancelled := vmb.Annotations[kv.CancelAnnotation]; !cancelled || vmb.State() != kv.BackupFailed {
					r.t.Errorf("VirtualMachineBackup %s of the interrupted backup b1 is %s, cancel requested %v; want it cancelled (Failed)", vmb.Name, vmb.State(), cancelled)
				}
			}
		}},
		{name: failpoint.BackupFinalizingCanceled, flags: []string{"--client-page-size=1", "--client-qps=2", "--client-burst=1"}, drive: func(r *run) {
			r.createBackup("b1", app)
			r.waitFor("backup b1 collecting", func() bool {
				b := r.backup("b1")
				return b != nil && b.Status.Phase == velerov1.BackupPhaseInProgress && b.Status.Progress != nil && b.Status.Progress.ItemsBackedUp > 0
			})
			_, err := r.s.Clientset.VeleroV1().Backups(ns).Patch(context.Background(), "b1", types.MergePatchType, []byte(`{"spec":{"cancel":true}}`), metav1.PatchOptions{})
			r.check(err)
		}},
		{name: failpoint.RestoreInProgress, drive: func(r *run) {
			completed(r)
			_, err := r.s.Clientset.VeleroV1().Restores(ns).Create(context.Background(), &velerov1.Restore{
				ObjectMeta: metav1.ObjectMeta{Name: "r1", Namespace: ns},
				Spec:       velerov1.RestoreSpec{BackupName: "b1", NamespaceMapping: map[string]string{app: "app-restored"}},
			}, metav1.CreateOptions{})
			r.check(err)
		}},
		{name: failpoint.DeletionInProgress, drive: func(r *run) {
			completed(r)
			_, err := r.s.Clientset.VeleroV1().DeleteBackupRequests(ns).Create(context.Background(), &velerov1.DeleteBackupRequest{
				ObjectMeta: metav1.ObjectMeta{Name: "d1", Namespace: ns}, Spec: velerov1.DeleteBackupRequestSpec{BackupName: "b1"},
			}, metav1.CreateOptions{})
			r.check(err)
		}},
		{name: failpoint.DeleteBeforeCleanup, drive: func(r *run) {
			completed(r)
			r.check(r.s.Clientset.VeleroV1().Backups(ns).Delete(context.Background(), "b1", metav1.DeleteOptions{}))
		}},
		{name: failpoint.NonAdminBackupRecorded, drive: func(r *run) { r.createNAB("n1") }},
		{name: failpoint.NonAdminBackupMade, drive: func(r *run) { r.createNAB("n1") }},
		{name: failpoint.NonAdminBackupDeleting, drive: func(r *run) {
			r.createNAB("n1")
			r.waitFor("NonAdminBackup n1 Created with its backup finished", func() bool {
				n, err := r.s.Clientset.OadpV1alpha1().NonAdminBackups(app).Get(context.Background(), "n1", metav1.GetOptions{})
				r.check(err)
				vb := n.Status.VeleroBackup
				return n.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated && vb != nil && vb.Status != nil && vb.Status.Phase.Terminal()
			})
			_, err := r.s.Clientset.OadpV1alpha1().NonAdminBackups(app).Patch(context.Background(), "n1", types.MergePatchType, []byte(`{"spec":{"deleteBackup":true}}`), metav1.PatchOptions{})
			r.check(err)
		}},
		{name: failpoint.NonAdminRestoreMade, drive: func(r *run) {
			r.createNAB("n1")
			r.waitFor("NonAdminBackup n1 Created with its backup finished", func() bool {
				n, err := r.s.Clientset.OadpV1alpha1().NonAdminBackups(app).Get(context.Background(), "n1", metav1.GetOptions{})
				r.check(err)
				vb := n.Status.VeleroBackup
				return n.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated && vb != nil && vb.Status != nil && vb.Status.Phase.Terminal()
			})
			_, err := r.s.Clientset.OadpV1alpha1().NonAdminRestores(app).Create(context.Background(), &oadpv1alpha1.NonAdminRestore{
				ObjectMeta: metav1.ObjectMeta{Name: "r1", Namespace: app},
				Spec:       oadpv1alpha1.NonAdminRestoreSpec{RestoreSpec: &velerov1.RestoreSpec{BackupName: "n1"}}}, metav1.CreateOptions{})
			r.check(err)
		}},
		{name: failpoint.NonAdminScheduleRunAdopting, drive: func(r *run) {
			ctx := context.Background()
			_, err := r.s.Clientset.OadpV1alpha1().NonAdminSchedules(app).Create(ctx, &oadpv1alpha1.NonAdminSchedule{
				ObjectMeta: metav1.ObjectMeta{Name: "s1", Namespace: app},
				Spec: oadpv1alpha1.NonAdminScheduleSpec{Schedule: "@every 1h",
					Template: oadpv1alpha1.NonAdminScheduleTemplate{BackupSpec: &velerov1.BackupSpec{}}}}, metav1.CreateOptions{})
			r.check(err)
			var schedule string
			r.waitFor("NonAdminSchedule s1 Created", func() bool {
				s, err := r.s.Clientset.OadpV1alpha1().NonAdminSchedules(app).Get(ctx, "s1", metav1.GetOptions{})
				r.check(err)
				if s.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated && s.Status.VeleroSchedule != nil {
					schedule = s.Status.VeleroSchedule.Name
				}
				return schedule != ""
			})
			r.check(r.s.Clientset.VeleroV1().RESTClient().Post().Namespace(ns).Resource("schedules").Name(schedule).SubResource("trigger").Do(ctx).Error())
		}},
		{name: failpoint.VMBackupAfterBegin, vm: true, drive: func(r *run) {
			r.domain("vm1")
			r.createVMBackup("vmb1", "VirtualMachine", "vm1")
		}},
		{name: failpoint.VMBackupMergeJournaled, vm: true, drive: func(r *run) {
			// A chain of three; the middle one deleted: its merge into
			// the third dies once journaled.
			d := r.domain("vm1")
			r.createVMTracker("t1", "vm1")
			for i, name := range []string{"vmb1", "vmb2", "vmb3"} {
				d.Write(r.t, byte(0x61+i), fmt.Sprintf("%dM", 8+8*i), "1M")
				r.createVMBackup(name, "VirtualMachineBackupTracker", "t1")
				r.waitVMBackupComplete(name)
			}
			r.want = r.restoredVDA("vmb1", "vmb2", "vmb3")
			r.check(r.s.Clientset.BackupV1alpha1().VirtualMachineBackups(r.vmNS).Delete(context.Background(), "vmb2", metav1.DeleteOptions{}))
		}, verify: func(r *run) {
			// The merge rolled forward at the start: vmb2 and its files
			// are gone, and vmb3 restores as the chain did.
			r.waitFor("vmb2 gone", func() bool {
				_, err := r.s.Clientset.BackupV1alpha1().VirtualMachineBackups(r.vmNS).Get(context.Background(), "vmb2", metav1.GetOptions{})
				_, statErr := os.Stat(filepath.Join(r.root, r.vmNS, "out", "vmb2"))
				return apierrors.IsNotFound(err) && errors.Is(statErr, os.ErrNotExist)
			})
			if got := r.restoredVDA("vmb1", "vmb3"); got != r.want {
				r.t.Errorf("after the merge was recovered, vmb3 restores to %s; before, the chain restored to %s", got, r.want)
			}
		}},
		{name: failpoint.VMBackupBeforeTrackerMoves, vm: true, drive: func(r *run) {
			r.domain("vm1")
			r.createVMTracker("t1", "vm1")
			r.createVMBackup("vmb1", "VirtualMachineBackupTracker", "t1")
		}},
	}
}

// TestCrashPoints kills the server at each crash point, starts it again
// and checks that nothing is left behind.
func TestCrashPoints(t *testing.T) {
	all := points()
	var covered []string
	for _, p := range all {
		covered = append(covered, p.name)
	}
	for _, name := range failpoint.Points {
		if !slices.Contains(covered, name) && !slices.Contains(failpoint.ClusterPoints, name) {
			t.Errorf("crash point %s has no scenario", name)
		}
	}
	restarts, orphans := 0, 0
	for i, p := range all {
		t.Run(p.name, func(t *testing.T) {
			root := virttest.Dir(t)
			r := &run{t: t, root: root}
			if p.vm {
				r.vmNS = fmt.Sprintf("crash%d", i)
			}
			flags := append([]string{"--volume-root=" + root, "--item-operation-sync-frequency=200ms"}, p.flags...)
			r.s = framework.Start(t, framework.Options{Args: flags, Env: []string{failpoint.EnvVar + "=" + p.name}})
			for j := range 3 {
				r.createTracker(app, fmt.Sprintf("item%d", j))
			}
			p.drive(r)
			if !r.s.WaitCrash(2 * time.Minute) {
				t.Fatalf("the server did not crash at %s within two minutes", p.name)
			}
			r.s.StartAgain(nil)
			restarts++
			r.settle()
			found := r.orphans()
			for _, o := range found {
				t.Errorf("orphan after a crash at %s: %s", p.name, o)
			}
			orphans += len(found)
			if p.verify != nil {
				p.verify(r)
			}
			// The queue drains: a new backup runs to its end.
			r.createBackup("after", app)
			r.waitBackup("after", velerov1.BackupPhaseCompleted)
		})
	}
	fmt.Printf("points %d, restarts %d, orphans %d\n", len(all), restarts, orphans)
}

func (r *run) domain(vm string) *virttest.Domain {
	name := r.vmNS + "_" + vm
	d := virttest.NewDomain(r.t, name, "64M")
	d.Write(r.t, 0x5a, "0", "8M")
	r.doms = append(r.doms, name)
	// The volume VM backups push into.
	if err := os.MkdirAll(filepath.Join(r.root, r.vmNS, "out"), 0o755); err != nil {
		r.t.Fatal(err)
	}
	return d
}

// createNAB creates a tenant's NonAdminBackup of namespace app.
func (r *run) createNAB(name string) {
	_, err := r.s.Clientset.OadpV1alpha1().NonAdminBackups(app).Create(context.Background(), &oadpv1alpha1.NonAdminBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: app},
		Spec:       oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{}},
	}, metav1.CreateOptions{})
	r.check(err)
}

func (r *run) createTracker(namespace, name string) {
	group := "kubevirt.io"
	if _, err := r.s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(namespace).Create(context.Background(), &kv.VirtualMachineBackupTracker{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       kv.VirtualMachineBackupTrackerSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VirtualMachine", Name: "none-" + name}},
	}, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *run) createBackup(name, namespace string) {
	_, err := r.s.Clientset.VeleroV1().Backups(ns).Create(context.Background(), &velerov1.Backup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{"backstop.io/vm-backup-pvc": "out"}},
		Spec:       velerov1.BackupSpec{IncludedNamespaces: []string{namespace}},
	}, metav1.CreateOptions{})
	r.check(err)
}

// check fails the test on an error the API answered; a request the
// server dropped is the crash the scenario drives at (the server may die
// after storing the object, before answering).
func (r *run) check(err error) {
	r.t.Helper()
	var status apierrors.APIStatus
	if err != nil && errors.As(err, &status) {
		r.t.Fatal(err)
	}
}

func (r *run) createVMTracker(name, vm string) {
	group := "kubevirt.io"
	if _, err := r.s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(r.vmNS).Create(context.Background(), &kv.VirtualMachineBackupTracker{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.vmNS},
		Spec:       kv.VirtualMachineBackupTrackerSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VirtualMachine", Name: vm}},
	}, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *run) waitVMBackupComplete(name string) {
	r.t.Helper()
	r.waitFor("VM backup "+name+" complete", func() bool {
		b, err := r.s.Clientset.BackupV1alpha1().VirtualMachineBackups(r.vmNS).Get(context.Background(), name, metav1.GetOptions{})
		r.check(err)
		if err == nil && b.State() == kv.BackupFailed {
			r.t.Fatalf("VM backup %s failed: %+v", name, b.Status)
		}
		return err == nil && b.State() == kv.BackupComplete
	})
}

// restoredVDA is the sha256 of disk vda restored from VM backups of the
// volume "out" (oldest first).
func (r *run) restoredVDA(backups ...string) string {
	r.t.Helper()
	var dirs []string
	for _, b := range backups {
		dirs = append(dirs, filepath.Join(r.root, r.vmNS, "out", b))
	}
	res, err := vmrestore.Restore(context.Background(), dirs, "vda", filepath.Join(r.t.TempDir(), "vda.raw"))
	if err != nil {
		r.t.Fatalf("restoring %v: %v", backups, err)
	}
	return res.SHA256
}

func (r *run) createVMBackup(name, kind, source string) {
	group, pvc, mode := "kubevirt.io", "out", kv.PushMode
	if kind != "VirtualMachine" {
		group = kv.GroupName
	}
	_, err := r.s.Clientset.BackupV1alpha1().VirtualMachineBackups(r.vmNS).Create(context.Background(), &kv.VirtualMachineBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.vmNS},
		Spec:       kv.VirtualMachineBackupSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: kind, Name: source}, Mode: &mode, PvcName: &pvc},
	}, metav1.CreateOptions{})
	r.check(err)
}

func (r *run) backup(name string) *velerov1.Backup {
	b, err := r.s.Clientset.VeleroV1().Backups(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return b
}

func (r *run) waitFor(what string, cond func() bool) {
	r.t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		r.t.Fatalf("waiting for %s: %v", what, err)
	}
}

func (r *run) waitBackup(name string, phase velerov1.BackupPhase) {
	r.t.Helper()
	var last *velerov1.Backup
	r.waitFor("backup "+name+" "+string(phase), func() bool {
		last = r.backup(name)
		if last != nil && last.Status.Phase.Terminal() && last.Status.Phase != phase {
			r.t.Fatalf("backup %s ended %s (%s), want %s", name, last.Status.Phase, last.Status.FailureReason, phase)
		}
		return last != nil && last.Status.Phase == phase
	})
}

// settle waits until every object has ended its life (or is gone).
func (r *run) settle() {
	r.t.Helper()
	ctx := context.Background()
	cs := r.s.Clientset
	var pending []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pending = nil
		backups, err := cs.VeleroV1().Backups(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, b := range backups.Items {
			if !b.Status.Phase.Terminal() || b.DeletionTimestamp != nil {
				pending = append(pending, "backup "+b.Name+" "+string(b.Status.Phase))
			}
		}
		restores, err := cs.VeleroV1().Restores(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, rs := range restores.Items {
			if !rs.Status.Phase.Terminal() || rs.DeletionTimestamp != nil {
				pending = append(pending, "restore "+rs.Name+" "+string(rs.Status.Phase))
			}
		}
		requests, err := cs.VeleroV1().DeleteBackupRequests(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, d := range requests.Items {
			if !d.Status.Phase.Terminal() {
				pending = append(pending, "deletebackuprequest "+d.Name+" "+string(d.Status.Phase))
			}
		}
		nabs, err := cs.OadpV1alpha1().NonAdminBackups(app).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, n := range nabs.Items {
			if n.Status.Phase != oadpv1alpha1.NonAdminPhaseCreated || n.DeletionTimestamp != nil {
				pending = append(pending, "nonadminbackup "+n.Name+" "+string(n.Status.Phase))
			}
		}
		nars, err := cs.OadpV1alpha1().NonAdminRestores(app).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, n := range nars.Items {
			if n.Status.Phase != oadpv1alpha1.NonAdminPhaseCreated || n.DeletionTimestamp != nil {
				pending = append(pending, "nonadminrestore "+n.Name+" "+string(n.Status.Phase))
			}
		}
		if r.vmNS != "" {
			vmbs, err := cs.BackupV1alpha1().VirtualMachineBackups(r.vmNS).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, b := range vmbs.Items {
				if !b.State().Terminal() || b.DeletionTimestamp != nil {
					pending = append(pending, "virtualmachinebackup "+b.Name+" "+string(b.State()))
				}
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		r.t.Fatalf("not settled three minutes after the restart: %v", pending)
	}
}

// orphans lists what nobody owns any more.
func (r *run) orphans() []string {
	ctx := context.Background()
	var out []string
	// The default storage location: a backup's data belongs to a backup
	// that exists and succeeded; a failed one keeps its log and metadata
	// only; restores' records belong to restores that exist.
	location := filepath.Join(r.s.DataDir, "backups")
	dirs, _ := os.ReadDir(filepath.Join(location, "backups"))
	for _, d := range dirs {
		files, _ := os.ReadDir(filepath.Join(location, "backups", d.Name()))
		b := r.backup(d.Name())
		for _, f := range files {
			switch {
			case b == nil:
				out = append(out, fmt.Sprintf("file %s of deleted backup %s", f.Name(), d.Name()))
			case b.Status.Phase.Restorable():
			case f.Name() == d.Name()+"-logs.gz" || f.Name() == "velero-backup.json":
			default:
				out = append(out, fmt.Sprintf("file %s of %s backup %s", f.Name(), b.Status.Phase, d.Name()))
			}
		}
	}
	dirs, _ = os.ReadDir(filepath.Join(location, "restores"))
	for _, d := range dirs {
		files, _ := os.ReadDir(filepath.Join(location, "restores", d.Name()))
		if _, err := r.s.Clientset.VeleroV1().Restores(ns).Get(ctx, d.Name(), metav1.GetOptions{}); apierrors.IsNotFound(err) && len(files) > 0 {
			out = append(out, fmt.Sprintf("%d files of deleted restore %s", len(files), d.Name()))
		}
	}
	// Tenants: every Backup made for a NonAdminBackup is the one its
	// NonAdminBackup names, and every NonAdminBackup has its Backup.
	nabs, err := r.s.Clientset.OadpV1alpha1().NonAdminBackups(app).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	backups, err := r.s.Clientset.VeleroV1().Backups(ns).List(ctx, metav1.ListOptions{LabelSelector: oadpv1alpha1.NabOriginNACUUIDLabel})
	if err != nil {
		r.t.Fatal(err)
	}
	named := map[string]bool{}
	for _, n := range nabs.Items {
		if vb := n.Status.VeleroBackup; vb != nil && vb.Name != "" {
			named[vb.Name] = true
			if r.backup(vb.Name) == nil {
				out = append(out, fmt.Sprintf("NonAdminBackup %s lost its backup %s", n.Name, vb.Name))
			}
		} else {
			out = append(out, fmt.Sprintf("NonAdminBackup %s never got a backup", n.Name))
		}
	}
	for _, b := range backups.Items {
		if !named[b.Name] {
			out = append(out, fmt.Sprintf("backup %s made for a NonAdminBackup that does not name it", b.Name))
		}
	}
	// Every backup a tenant's schedule ran has exactly one NonAdminBackup.
	scheduled, err := r.s.Clientset.VeleroV1().Backups(ns).List(ctx, metav1.ListOptions{LabelSelector: oadpv1alpha1.NasOriginNACUUIDLabel})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, b := range scheduled.Items {
		if !named[b.Name] {
			out = append(out, fmt.Sprintf("scheduled backup %s has no NonAdminBackup", b.Name))
		}
	}
	// Every Restore made for a NonAdminRestore is the one it names, and
	// every NonAdminRestore has its Restore.
	nars, err := r.s.Clientset.OadpV1alpha1().NonAdminRestores(app).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	restores, err := r.s.Clientset.VeleroV1().Restores(ns).List(ctx, metav1.ListOptions{LabelSelector: oadpv1alpha1.NarOriginNACUUIDLabel})
	if err != nil {
		r.t.Fatal(err)
	}
	namedRestores := map[string]bool{}
	for _, n := range nars.Items {
		if vr := n.Status.VeleroRestore; vr != nil && vr.Name != "" {
			namedRestores[vr.Name] = true
		} else {
			out = append(out, fmt.Sprintf("NonAdminRestore %s never got a restore", n.Name))
		}
	}
	for _, rs := range restores.Items {
		if !namedRestores[rs.Name] {
			out = append(out, fmt.Sprintf("restore %s made for a NonAdminRestore that does not name it", rs.Name))
		}
	}
	if r.vmNS == "" {
		return out
	}
	// VM backup output: only completed backups keep theirs.
	outputs, _ := os.ReadDir(filepath.Join(r.root, r.vmNS, "out"))
	for _, o := range outputs {
		b, err := r.s.Clientset.BackupV1alpha1().VirtualMachineBackups(r.vmNS).Get(ctx, o.Name(), metav1.GetOptions{})
		if err != nil || b.State() != kv.BackupComplete {
			out = append(out, fmt.Sprintf("VM backup output %s/out/%s of a backup that did not complete", r.vmNS, o.Name()))
		}
	}
	// libvirt: no job left, and every checkpoint is a tracker's.
	trackers, err := r.s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(r.vmNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	var owned []string
	for _, t := range trackers.Items {
		if t.Status != nil && t.Status.LatestCheckpoint != nil {
			owned = append(owned, t.Status.LatestCheckpoint.Name)
		}
	}
	for _, dom := range r.doms {
		if job := virsh(r.t, "domjobinfo", dom); !strings.Contains(job, "None") {
			out = append(out, fmt.Sprintf("libvirt job on %s: %s", dom, strings.TrimSpace(job)))
		}
		for _, cp := range strings.Fields(virsh(r.t, "checkpoint-list", dom, "--name")) {
			if !slices.Contains(owned, cp) {
				out = append(out, fmt.Sprintf("checkpoint %s of %s that no tracker holds", cp, dom))
			}
		}
	}
	return out
}

func virsh(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("virsh", append([]string{"-c", virttest.URI}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("virsh %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
