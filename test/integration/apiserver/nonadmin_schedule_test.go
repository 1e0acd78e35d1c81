package apiserver

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/robfig/cron/v3"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestNonAdminSchedules: a tenant's NonAdminSchedule becomes a Velero
// Schedule in the admin namespace whose template takes the tenant's
// namespace only; each backup it runs gets a NonAdminBackup in the
// tenant's namespace (<schedule>-<timestamp>, labelled as made by sync)
// that follows its backup, and the schedule's status lists them, newest
// first. Pausing reaches the Velero Schedule; a template reaching another
// namespace is refused at create and at update; deleting the schedule
// removes its Velero Schedule and keeps the backups.
func TestNonAdminSchedules(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	alice := newTenant(t, s, "alice", "tenant-a")
	nass := alice.client.OadpV1alpha1().NonAdminSchedules("tenant-a")
	if _, err := nass.Create(ctx, &oadpv1alpha1.NonAdminSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly"},
		Spec: oadpv1alpha1.NonAdminScheduleSpec{Schedule: "@every 1h",
			Template: oadpv1alpha1.NonAdminScheduleTemplate{BackupSpec: &velerov1.BackupSpec{TTL: metav1.Duration{Duration: 2 * time.Hour}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNAS := func(what string, ok func(*oadpv1alpha1.NonAdminSchedule) bool) *oadpv1alpha1.NonAdminSchedule {
		t.Helper()
		var nas *oadpv1alpha1.NonAdminSchedule
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			nas, err = s.Clientset.OadpV1alpha1().NonAdminSchedules("tenant-a").Get(ctx, "nightly", metav1.GetOptions{})
			return err == nil && ok(nas), err
		}); err != nil {
			t.Fatalf("NonAdminSchedule nightly: %s: %v (last %+v)", what, err, nas.Status)
		}
		return nas
	}
	nas := waitNAS("Created", func(n *oadpv1alpha1.NonAdminSchedule) bool {
		return n.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated && n.Status.NextRun != nil
	})
	if c := condition(nas.Status.Conditions, "Accepted"); c.Reason != "ScheduleAccepted" {
		t.Errorf("Accepted %+v", c)
	}
	vsName := nas.Status.VeleroSchedule.Name
	vs, err := s.Clientset.VeleroV1().Schedules(ns).Get(ctx, vsName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := vs.Spec.Template
	if vs.Spec.Schedule != "@every 1h" || strings.Join(tmpl.IncludedNamespaces, ",") != "tenant-a" || tmpl.IncludeClusterResources == nil || *tmpl.IncludeClusterResources ||
		tmpl.TTL.Duration != 2*time.Hour || !slices.Contains(tmpl.ExcludedResources, "nonadminbackups") {
		t.Errorf("the Velero Schedule: %q %+v", vs.Spec.Schedule, tmpl)
	}
	if next := nas.Status.NextRun.Time; next.Sub(vs.CreationTimestamp.Time) < 59*time.Minute {
		t.Errorf("nextRun %v, want an hour after %v", next, vs.CreationTimestamp)
	}

	// Each run (the admin triggers two) gets its NonAdminBackup.
	trigger := func() {
		t.Helper()
		if err := s.Clientset.VeleroV1().RESTClient().Post().Namespace(ns).Resource("schedules").Name(vsName).SubResource("trigger").Do(ctx).Error(); err != nil {
			t.Fatalf("triggering the schedule: %v", err)
		}
	}
	trigger()
	nas = waitNAS("a finished backup listed", func(n *oadpv1alpha1.NonAdminSchedule) bool {
		return n.Status.LastBackup != nil && n.Status.LastBackup.Phase == velerov1.BackupPhaseCompleted
	})
	first := nas.Status.LastBackup.Name
	if !strings.HasPrefix(first, "nightly-") {
		t.Errorf("the run's NonAdminBackup is %q, want nightly-<timestamp>", first)
	}
	nab := waitNAB(t, s, "tenant-a", first, "to follow its backup", veleroBackupDone)
	if nab.Labels[oadpv1alpha1.NabSyncLabel] == "" || nab.Status.VeleroBackup.Name != nas.Status.LastBackup.VeleroBackupName {
		t.Errorf("the run's NonAdminBackup: labels %v, status names %q", nab.Labels, nab.Status.VeleroBackup.Name)
	}
	// Schedule runs are at least a second apart (their names carry the time).
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return time.Since(nab.CreationTimestamp.Time) > time.Second, nil
	}); err != nil {
		t.Fatal(err)
	}
	trigger()
	nas = waitNAS("two backups listed, newest first", func(n *oadpv1alpha1.NonAdminSchedule) bool {
		return len(n.Status.RecentBackups) == 2 && n.Status.RecentBackups[1].Name == first && n.Status.RecentBackups[0].Phase == velerov1.BackupPhaseCompleted
	})
	second := nas.Status.RecentBackups[0].Name
	waitNAB(t, s, "tenant-a", second, "to follow its backup", veleroBackupDone)
	list, err := alice.client.OadpV1alpha1().NonAdminBackups("tenant-a").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("the tenant's NonAdminBackups: %v, %d, want the two runs'", err, len(list.Items))
	}
	backups, err := s.Clientset.VeleroV1().Backups(ns).List(ctx, metav1.ListOptions{LabelSelector: oadpv1alpha1.OadpLabel})
	if err != nil || len(backups.Items) != 2 {
		t.Fatalf("Velero backups made for the tenant: %v, %d, want 2 (none made twice)", err, len(backups.Items))
	}

	// Paused: the Velero Schedule too.
	if _, err := nass.Patch(ctx, "nightly", types.MergePatchType, []byte(`{"spec":{"paused":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNAS("paused", func(n *oadpv1alpha1.NonAdminSchedule) bool { return n.Status.NextRun == nil })
	if vs, err := s.Clientset.VeleroV1().Schedules(ns).Get(ctx, vsName, metav1.GetOptions{}); err != nil || !vs.Spec.Paused {
		t.Errorf("the Velero Schedule after pausing: %v %+v", err, vs.Spec)
	}

	// Refused: another namespace, at create and at update.
	_, err = nass.Create(ctx, &oadpv1alpha1.NonAdminSchedule{ObjectMeta: metav1.ObjectMeta{Name: "wide"},
		Spec: oadpv1alpha1.NonAdminScheduleSpec{Schedule: "@daily",
			Template: oadpv1alpha1.NonAdminScheduleTemplate{BackupSpec: &velerov1.BackupSpec{IncludedNamespaces: []string{"tenant-b"}}}}}, metav1.CreateOptions{})
	if !invalidAt(err, "spec.template.backupSpec.includedNamespaces[0]", "can not contain namespaces other than: tenant-a") {
		t.Errorf("a schedule of another namespace: %v, want 422", err)
	}
	_, err = nass.Patch(ctx, "nightly", types.MergePatchType, []byte(`{"spec":{"template":{"backupSpec":{"includeClusterResources":true}}}}`), metav1.PatchOptions{})
	if !invalidAt(err, "spec.template.backupSpec.includeClusterResources", "restricted") {
		t.Errorf("a schedule changed to take cluster resources: %v, want 422", err)
	}
	_, err = nass.Patch(ctx, "nightly", types.MergePatchType, []byte(`{"spec":{"schedule":"every now and then"}}`), metav1.PatchOptions{})
	if !invalidAt(err, "spec.schedule", "invalid schedule") {
		t.Errorf("a bad cron expression: %v, want 422", err)
	}

	// Deleted: the Velero Schedule goes, the backups stay.
	if err := nass.Delete(ctx, "nightly", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "the NonAdminSchedule", func(ctx context.Context) error { _, err := nass.Get(ctx, "nightly", metav1.GetOptions{}); return err })
	if _, err := s.Clientset.VeleroV1().Schedules(ns).Get(ctx, vsName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Velero Schedule after its NonAdminSchedule went: %v, want NotFound", err)
	}
	for _, name := range []string{first, second} {
		if _, err := alice.client.OadpV1alpha1().NonAdminBackups("tenant-a").Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("NonAdminBackup %s after its schedule went: %v", name, err)
		}
	}
}

// TestNonAdminScheduleClock: a tenant's schedule runs on its cron, as the
// schedule engine's clock says (a fake clock, the engine run in the test
// process): nothing before the first :45, one NonAdminBackup per run
// after, named by the run's time, linked to the run's backup; nothing
// while the tenant has it paused. The backup engine is off: the test
// finishes each run's backup.
func TestNonAdminScheduleClock(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{Args: []string{"--disable-controllers=schedule,backup,backup-sync"}})
	ctx := context.Background()
	alice := newTenant(t, s, "alice", "tenant-a")
	nass := alice.client.OadpV1alpha1().NonAdminSchedules("tenant-a")
	if _, err := nass.Create(ctx, &oadpv1alpha1.NonAdminSchedule{ObjectMeta: metav1.ObjectMeta{Name: "hourly"},
		Spec: oadpv1alpha1.NonAdminScheduleSpec{Schedule: "45 * * * *", SkipImmediately: true,
			Template: oadpv1alpha1.NonAdminScheduleTemplate{BackupSpec: &velerov1.BackupSpec{}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var vsName string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		nas, err := nass.Get(ctx, "hourly", metav1.GetOptions{})
		if err != nil || nas.Status.VeleroSchedule == nil {
			return false, err
		}
		vsName = nas.Status.VeleroSchedule.Name
		return nas.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated, nil
	}); err != nil {
		t.Fatalf("the schedule's Velero Schedule: %v", err)
	}
	vs, err := s.Clientset.VeleroV1().Schedules(ns).Get(ctx, vsName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hourly, err := cron.ParseStandard("45 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	due := hourly.Next(vs.CreationTimestamp.Time)
	e := startScheduleEngine(t, s, vs.CreationTimestamp.Time)
	nabs := alice.client.OadpV1alpha1().NonAdminBackups("tenant-a")
	// runs are the schedule's NonAdminBackups by name, with their backups.
	runs := func() map[string]string {
		list, err := nabs.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, n := range list.Items {
			out[n.Name] = ""
			if n.Status.VeleroBackup != nil {
				out[n.Name] = n.Status.VeleroBackup.Name
			}
		}
		return out
	}
	// runAt moves the clock to at, finds the run's backup (named by the
	// server's time of the run, the trigger's) and waits for its
	// NonAdminBackup, linked and Created; then finishes the backup.
	seen := map[string]bool{}
	runAt := func(at time.Time) {
		t.Helper()
		e.at(t, at, vsName)
		// A run in the same (real) second as the last one waits for the
		// next second's name: poll.
		var backup string
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			for _, b := range scheduleBackups(t, s, vsName) {
				if !seen[b.Name] {
					if backup != "" && backup != b.Name {
						t.Fatalf("two runs at %s: %s and %s", at, backup, b.Name)
					}
					backup = b.Name
				}
			}
			return backup != "", nil
		}); err != nil {
			t.Fatalf("no run at %s", at)
		}
		seen[backup] = true
		name := "hourly-" + strings.TrimPrefix(backup, vsName+"-")
		var nab *oadpv1alpha1.NonAdminBackup
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			if nab, err = nabs.Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil && nab.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated && nab.Status.VeleroBackup != nil && nab.Status.VeleroBackup.Name == backup, err
		}); err != nil {
			t.Fatalf("the NonAdminBackup of the run at %s: %v (runs %v)", at, err, runs())
		}
		if nab.Labels[oadpv1alpha1.NabSyncLabel] == "" {
			t.Errorf("%s: not labelled as made by sync: %v", name, nab.Labels)
		}
		setBackupPhase(t, s, backup, velerov1.BackupPhaseCompleted)
	}

	// Before the first :45: nothing.
	e.at(t, due.Add(-time.Minute), vsName)
	if got := runs(); len(got) != 0 {
		t.Fatalf("NonAdminBackups before the first run: %v", got)
	}
	runAt(due.Add(time.Minute))
	runAt(due.Add(time.Hour + time.Minute))
	if got := runs(); len(got) != 2 {
		t.Errorf("NonAdminBackups after two runs: %v", got)
	}
	// Paused by the tenant: the next :45 passes without a run.
	if _, err := nass.Patch(ctx, "hourly", types.MergePatchType, []byte(`{"spec":{"paused":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		vs, err := s.Clientset.VeleroV1().Schedules(ns).Get(ctx, vsName, metav1.GetOptions{})
		return err == nil && vs.Spec.Paused, err
	}); err != nil {
		t.Fatalf("the Velero Schedule never paused: %v", err)
	}
	// A run would now take its name in the pass itself (the server's
	// second has moved on since the last run): none may appear after it.
	last := time.Time{}
	for _, b := range scheduleBackups(t, s, vsName) {
		if b.CreationTimestamp.After(last) {
			last = b.CreationTimestamp.Time
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return time.Now().Truncate(time.Second).After(last), nil
	}); err != nil {
		t.Fatal(err)
	}
	e.at(t, due.Add(2*time.Hour+time.Minute), vsName)
	if bs := scheduleBackups(t, s, vsName); len(bs) != 2 {
		t.Errorf("backups of the paused schedule: %d, want 2", len(bs))
	}
	if got := runs(); len(got) != 2 {
		t.Errorf("NonAdminBackups of the paused schedule: %v, want 2", got)
	}
}
