package restore

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/enginetest"
)

const adminNS = "backstop-system"

func restoreOf(name string, spec velerov1.RestoreSpec, seq string) *velerov1.Restore {
	r := &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: adminNS, UID: types.UID("uid-" + name)}, Spec: spec,
		Status: velerov1.RestoreStatus{Phase: velerov1.RestorePhaseNew}}
	if seq != "" {
		r.Annotations = map[string]string{velerov1.QueueSequenceAnnotation: seq}
	}
	return r
}

func backupOf(name string, phase velerov1.BackupPhase, labels map[string]string, created time.Time) *velerov1.Backup {
	return &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: adminNS, Labels: labels, CreationTimestamp: metav1.NewTime(created)},
		Spec: velerov1.BackupSpec{StorageLocation: "default"}, Status: velerov1.BackupStatus{Phase: phase}}
}

func locationOf(phase velerov1.BackupStorageLocationPhase) *velerov1.BackupStorageLocation {
	return &velerov1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: adminNS},
		Status: velerov1.BackupStorageLocationStatus{Phase: phase, Message: "bucket gone"}}
}

func newEngine(t *testing.T, objs ...runtime.Object) (*Controller, *enginetest.World) {
	t.Helper()
	w := enginetest.New(t, objs...)
	v := w.Factory.Velero().V1()
	c, err := New(Config{Client: w.Client, Restores: v.Restores(), Backups: v.Backups(), Locations: v.BackupStorageLocations(),
		Clock: clocktesting.NewFakeClock(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

func stored(t *testing.T, w *enginetest.World, name string) *velerov1.Restore {
	t.Helper()
	r, err := w.Client.VeleroV1().Restores(adminNS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSyncRefuses: a restore that cannot run ends FailedValidation with
// what keeps it from running, in one status write, and nothing starts.
func TestSyncRefuses(t *testing.T) {
	day := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		restore velerov1.RestoreSpec
		objs    []runtime.Object
		want    string
	}{
		{name: "no backup named", want: "either backupName or scheduleName must be set"},
		{name: "backup missing", restore: velerov1.RestoreSpec{BackupName: "b"}, want: `backup "b": not found`},
		{name: "backup running", restore: velerov1.RestoreSpec{BackupName: "b"},
			objs: []runtime.Object{backupOf("b", velerov1.BackupPhaseInProgress, nil, day), locationOf(velerov1.BackupStorageLocationPhaseAvailable)},
			want: "is InProgress: only Completed or PartiallyFailed backups can be restored"},
		{name: "location missing", restore: velerov1.RestoreSpec{BackupName: "b"},
			objs: []runtime.Object{backupOf("b", velerov1.BackupPhaseCompleted, nil, day)},
			want: `the storage location "default" of backup "b": not found`},
		{name: "location unavailable", restore: velerov1.RestoreSpec{BackupName: "b"},
			objs: []runtime.Object{backupOf("b", velerov1.BackupPhaseCompleted, nil, day), locationOf(velerov1.BackupStorageLocationPhaseUnavailable)},
			want: "is unavailable: bucket gone"},
		{name: "resource modifiers of another kind", restore: velerov1.RestoreSpec{BackupName: "b", ResourceModifier: &corev1.TypedLocalObjectReference{Kind: "Secret", Name: "mods"}},
			objs: []runtime.Object{backupOf("b", velerov1.BackupPhaseCompleted, nil, day), locationOf(velerov1.BackupStorageLocationPhaseAvailable)},
			want: `resourceModifier: kind "Secret" is not supported: only a ConfigMap`},
		{name: "resource modifiers without a cluster to read them from", restore: velerov1.RestoreSpec{BackupName: "b", ResourceModifier: &corev1.TypedLocalObjectReference{Kind: "configmap", Name: "mods"}},
			objs: []runtime.Object{backupOf("b", velerov1.BackupPhaseCompleted, nil, day), locationOf(velerov1.BackupStorageLocationPhaseAvailable)},
			want: "failed to get resource modifiers configmap " + adminNS + "/mods: no cluster to read it from"},
		{name: "schedule without a completed backup", restore: velerov1.RestoreSpec{ScheduleName: "daily"},
			objs: []runtime.Object{backupOf("daily-1", velerov1.BackupPhaseFailed, map[string]string{ScheduleNameLabel: "daily"}, day)},
			want: `schedule "daily" has no completed backup to restore from`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, w := newEngine(t, append(tc.objs, restoreOf("r", tc.restore, "1"))...)
			if err := c.sync(context.Background(), cache.ObjectName{Namespace: adminNS, Name: "r"}); err != nil {
				t.Fatal(err)
			}
			r := stored(t, w, "r")
			if r.Status.Phase != velerov1.RestorePhaseFailedValidation || len(r.Status.ValidationErrors) != 1 || !strings.Contains(r.Status.ValidationErrors[0], tc.want) {
				t.Errorf("status %s %v, want FailedValidation saying %q", r.Status.Phase, r.Status.ValidationErrors, tc.want)
			}
			if n := len(w.Writes()); n != 1 || len(c.running) != 0 {
				t.Errorf("%d writes, %d running; want one status write and nothing started", n, len(c.running))
			}
		})
	}
}

// TestSyncOrder: a restore whose turn has not come writes nothing, and the
// restores that may start instead are synced; one that cannot run fails
// at once, wherever it is in the queue; a deleted restore that runs is
// stopped, not finished under it.
func TestSyncOrder(t *testing.T) {
	ctx := context.Background()
	t.Run("behind an overlapping restore: nothing written, the first synced", func(t *testing.T) {
		q := newQueueWorld(t)
		q.backup("b-a", []string{"a"}, configMapsOnly)
		q.restore("first", 10, velerov1.RestoreSpec{BackupName: "b-a"})
		q.restore("second", 20, velerov1.RestoreSpec{BackupName: "b-a"})
		c, w := newEngine(t, q.objs...)
		if err := c.sync(ctx, cache.ObjectName{Namespace: adminNS, Name: "second"}); err != nil {
			t.Fatal(err)
		}
		if n := len(w.Writes()); n != 0 {
			t.Errorf("%d writes, want none: second waits for first", n)
		}
		if c.Len() != 1 {
			t.Errorf("the engine's queue holds %d keys, want first's", c.Len())
		}
	})
	t.Run("one that cannot run fails behind others", func(t *testing.T) {
		q := newQueueWorld(t)
		q.backup("b-a", []string{"a"}, configMapsOnly)
		q.restore("first", 10, velerov1.RestoreSpec{BackupName: "b-a"})
		q.restore("second", 20, velerov1.RestoreSpec{BackupName: "missing"})
		c, w := newEngine(t, q.objs...)
		if err := c.sync(ctx, cache.ObjectName{Namespace: adminNS, Name: "second"}); err != nil {
			t.Fatal(err)
		}
		if p := stored(t, w, "second").Status.Phase; p != velerov1.RestorePhaseFailedValidation {
			t.Errorf("second: %s, want FailedValidation at once", p)
		}
		if p := stored(t, w, "first").Status.Phase; p != velerov1.RestorePhaseNew {
			t.Errorf("first: %s, want New (not synced here)", p)
		}
	})
	t.Run("none goes while the limit runs", func(t *testing.T) {
		q := newQueueWorld(t)
		q.backup("b-a", []string{"a"}, configMapsOnly)
		q.restore("waiting", 1, velerov1.RestoreSpec{BackupName: "b-a"})
		c, w := newEngine(t, q.objs...)
		c.cfg.Concurrent = 1
		c.running["uid-other"] = &restoreRun{r: restoreOf("other", velerov1.RestoreSpec{}, "")}
		if err := c.sync(ctx, cache.ObjectName{Namespace: adminNS, Name: "waiting"}); err != nil {
			t.Fatal(err)
		}
		if n := len(w.Writes()); n != 0 {
			t.Errorf("%d writes while the limit of restores runs, want none", n)
		}
	})
	t.Run("a running restore deleted is stopped", func(t *testing.T) {
		deleted := restoreOf("r", velerov1.RestoreSpec{BackupName: "b"}, "1")
		deleted.Status.Phase = velerov1.RestorePhaseInProgress
		deleted.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		deleted.Finalizers = []string{velerov1.RestoreDataFinalizer}
		c, w := newEngine(t, deleted)
		var cause error
		c.running[deleted.UID] = &restoreRun{r: deleted, cancel: func(err error) { cause = err }}
		if err := c.sync(ctx, cache.ObjectName{Namespace: adminNS, Name: "r"}); err != nil {
			t.Fatal(err)
		}
		if cause != errDeleted {
			t.Errorf("the run was cancelled with %v, want errDeleted", cause)
		}
		if n := len(w.Writes()); n != 0 {
			t.Errorf("%d writes: the finalizer went while the restore ran", n)
		}
	})
}

// TestSyncSettlesOrphanRestores: a restore InProgress that no run of the engine
// has (its start written though it answered an error, or its run's end
// lost) is failed, as stored; one a run has is left to it, and so is one
// the informer shows InProgress while its end is stored.
func TestSyncSettlesOrphanRestores(t *testing.T) {
	inProgress := func(name string) *velerov1.Restore {
		r := restoreOf(name, velerov1.RestoreSpec{BackupName: "b"}, "")
		r.Status.Phase = velerov1.RestorePhaseInProgress
		return r
	}
	for _, tc := range []struct {
		name    string
		running bool
		ended   bool // its end stored, the informer behind
		want    velerov1.RestorePhase
	}{
		{name: "no run has it", want: velerov1.RestorePhaseFailed},
		{name: "a run has it", running: true, want: velerov1.RestorePhaseInProgress},
		{name: "its end stored, the informer behind", ended: true, want: velerov1.RestorePhaseCompleted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := inProgress("r")
			c, w := newEngine(t, r, backupOf("b", velerov1.BackupPhaseCompleted, nil, time.Now()), locationOf(velerov1.BackupStorageLocationPhaseAvailable))
			if tc.running {
				c.running[r.UID] = &restoreRun{c: c, r: r}
			}
			if tc.ended {
				done := r.DeepCopy()
				done.Status.Phase = velerov1.RestorePhaseCompleted
				if _, err := w.Client.VeleroV1().Restores(adminNS).UpdateStatus(context.Background(), done, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.sync(context.Background(), cache.ObjectName{Namespace: adminNS, Name: "r"}); err != nil {
				t.Fatal(err)
			}
			got := stored(t, w, "r")
			if got.Status.Phase != tc.want || (tc.want == velerov1.RestorePhaseFailed) != (got.Status.FailureReason == velerov1.RestoreInterruptedReason) {
				t.Errorf("restore %s %q, want %s", got.Status.Phase, got.Status.FailureReason, tc.want)
			}
		})
	}
}

// TestOwnRestoreStart: a stored restore is this engine's start when it is
// InProgress from that very second and not ended.
func TestOwnRestoreStart(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 29, 4, 0, 0, 500_000_000, time.UTC))
	second := metav1.NewTime(now.Truncate(time.Second))
	before := metav1.NewTime(now.Add(-time.Second))
	for _, tc := range []struct {
		name   string
		status velerov1.RestoreStatus
		want   bool
	}{
		{"started now, stored to the second", velerov1.RestoreStatus{Phase: velerov1.RestorePhaseInProgress, StartTimestamp: &second}, true},
		{"started a second before", velerov1.RestoreStatus{Phase: velerov1.RestorePhaseInProgress, StartTimestamp: &before}, false},
		{"new", velerov1.RestoreStatus{Phase: velerov1.RestorePhaseNew}, false},
		{"ended", velerov1.RestoreStatus{Phase: velerov1.RestorePhaseInProgress, StartTimestamp: &second, CompletionTimestamp: &second}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ownStart(&velerov1.Restore{Status: tc.status}, now); got != tc.want {
				t.Errorf("ownStart = %v, want %v", got, tc.want)
			}
		})
	}
}
