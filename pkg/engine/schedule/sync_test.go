package schedule

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/enginetest"
)

// TestScheduleDecisions: what the schedule engine makes of a schedule at a
// moment, short of creating a backup (which goes through the schedule's
// trigger subresource, a server's): validation, pause, skipImmediately,
// not due, a run skipped while the last backup runs, a run whose backup
// exists already.
func TestScheduleDecisions(t *testing.T) {
	const ns = "backstop-system"
	created := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC) // hourly: due at 01:00
	schedule := func(cron string, mutate func(*velerov1.Schedule)) *velerov1.Schedule {
		s := &velerov1.Schedule{ObjectMeta: metav1.ObjectMeta{Name: "hourly", Namespace: ns, UID: "s1", CreationTimestamp: metav1.NewTime(created)},
			Spec: velerov1.ScheduleSpec{Schedule: cron}, Status: velerov1.ScheduleStatus{Phase: velerov1.SchedulePhaseEnabled}}
		if mutate != nil {
			mutate(s)
		}
		return s
	}
	backup := func(name string, at time.Time, phase velerov1.BackupPhase) *velerov1.Backup {
		return &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, CreationTimestamp: metav1.NewTime(at),
			Labels: map[string]string{velerov1.ScheduleNameLabel: "hourly"}}, Status: velerov1.BackupStatus{Phase: phase}}
	}
	for _, tc := range []struct {
		name string
		now  time.Time
		objs []runtime.Object
		// want is the schedule as stored afterwards.
		want func(t *testing.T, s *velerov1.Schedule)
	}{
		{name: "a cron that does not parse: FailedValidation", now: created.Add(2 * time.Hour),
			objs: []runtime.Object{schedule("every tuesday", nil)},
			want: func(t *testing.T, s *velerov1.Schedule) {
				if s.Status.Phase != velerov1.SchedulePhaseFailedValidation || len(s.Status.ValidationErrors) != 1 {
					t.Errorf("status %s %v, want FailedValidation with the reason", s.Status.Phase, s.Status.ValidationErrors)
				}
			}},
		{name: "paused: nothing", now: created.Add(2 * time.Hour),
			objs: []runtime.Object{schedule("@hourly", func(s *velerov1.Schedule) { s.Spec.Paused = true })},
			want: func(t *testing.T, s *velerov1.Schedule) {
				if s.Status.LastBackup != nil || s.Status.LastSkipped != nil {
					t.Errorf("a paused schedule ran or skipped: %+v", s.Status)
				}
			}},
		{name: "not due: back at the next run", now: created.Add(30 * time.Minute),
			objs: []runtime.Object{schedule("@hourly", nil)},
			want: func(t *testing.T, s *velerov1.Schedule) {
				if s.Status.LastBackup != nil || s.Status.LastSkipped != nil {
					t.Errorf("ran before it was due: %+v", s.Status)
				}
			}},
		{name: "skipImmediately: the due run skipped, the field reset", now: created.Add(90 * time.Minute),
			objs: []runtime.Object{schedule("@hourly", func(s *velerov1.Schedule) { s.Spec.SkipImmediately = ptr.To(true) })},
			want: func(t *testing.T, s *velerov1.Schedule) {
				if s.Status.LastSkipped == nil || s.Spec.SkipImmediately == nil || *s.Spec.SkipImmediately {
					t.Errorf("lastSkipped %v, skipImmediately %v: want the run skipped and the field false", s.Status.LastSkipped, s.Spec.SkipImmediately)
				}
			}},
		{name: "due while its last backup runs: skipped", now: created.Add(90 * time.Minute),
			objs: []runtime.Object{schedule("@hourly", nil), backup("hourly-1", created.Add(-time.Minute), velerov1.BackupPhaseInProgress)},
			want: func(t *testing.T, s *velerov1.Schedule) {
				if s.Status.LastSkipped == nil || s.Status.LastBackup != nil {
					t.Errorf("lastSkipped %v, lastBackup %v: want the run skipped", s.Status.LastSkipped, s.Status.LastBackup)
				}
			}},
		{name: "due, its backup made before a restart: recorded, not made again", now: created.Add(90 * time.Minute),
			objs: []runtime.Object{schedule("@hourly", nil), backup("hourly-2", created.Add(time.Hour+time.Second), velerov1.BackupPhaseNew)},
			want: func(t *testing.T, s *velerov1.Schedule) {
				if s.Status.LastBackup == nil || !s.Status.LastBackup.Time.Equal(created.Add(time.Hour+time.Second)) {
					t.Errorf("lastBackup %v, want the existing backup's time", s.Status.LastBackup)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := enginetest.New(t, tc.objs...)
			v := w.Factory.Velero().V1()
			c, err := New(Config{Client: w.Client, Schedules: v.Schedules(), Backups: v.Backups(), Clock: clocktesting.NewFakeClock(tc.now)})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := c.sync(ctx, cache.ObjectName{Namespace: ns, Name: "hourly"}); err != nil {
				t.Fatal(err)
			}
			s, err := w.Client.VeleroV1().Schedules(ns).Get(ctx, "hourly", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tc.want(t, s)
			for _, a := range w.Writes() {
				if a.GetResource().Resource == "backups" {
					t.Errorf("the engine wrote a backup directly (%s): runs go through the trigger subresource", a.GetVerb())
				}
			}
		})
	}
}
