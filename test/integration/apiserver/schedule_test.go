package apiserver

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/schedule"
	"github.com/backstop-io/backstop/pkg/generated/informers/externalversions"
	"github.com/backstop-io/backstop/test/integration/framework"
)

func boolPtr(b bool) *bool { return &b }

// createSchedule creates a schedule backing up namespace "apps".
func createSchedule(t *testing.T, s *framework.Server, name, cronSpec string, skipImmediately *bool) *velerov1.Schedule {
	t.Helper()
	out, err := s.Clientset.VeleroV1().Schedules(ns).Create(context.Background(), &velerov1.Schedule{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{"team": "storage"}},
		Spec: velerov1.ScheduleSpec{Schedule: cronSpec, SkipImmediately: skipImmediately,
			Template: velerov1.BackupSpec{IncludedNamespaces: []string{"apps"}, Metadata: velerov1.Metadata{Labels: map[string]string{"tier": "gold"}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating schedule %s: %v", name, err)
	}
	return out
}

// waitSchedule polls a schedule until cond holds.
func waitSchedule(t *testing.T, s *framework.Server, name, what string, cond func(*velerov1.Schedule) bool) *velerov1.Schedule {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var last *velerov1.Schedule
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		sch, err := s.Clientset.VeleroV1().Schedules(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = sch
		return cond(sch), nil
	})
	if err != nil {
		var st any
		if last != nil {
			st = struct {
				Spec   velerov1.ScheduleSpec
				Status velerov1.ScheduleStatus
			}{last.Spec, last.Status}
		}
		t.Fatalf("schedule %s never %s; last %+v", name, what, st)
	}
	return last
}

// scheduleBackups lists the backups of a schedule.
func scheduleBackups(t *testing.T, s *framework.Server, name string) []velerov1.Backup {
	t.Helper()
	list, err := s.Clientset.VeleroV1().Backups(ns).List(context.Background(), metav1.ListOptions{LabelSelector: velerov1.ScheduleNameLabel + "=" + name})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func postSchedule(s *framework.Server, name, sub string, body string) (*velerov1.Backup, *velerov1.Schedule, error) {
	req := s.Clientset.VeleroV1().RESTClient().Post().Namespace(ns).Resource("schedules").Name(name).SubResource(sub)
	if body != "" {
		req = req.Body([]byte(body)).SetHeader("Content-Type", "application/json")
	}
	res := req.Do(context.Background())
	if sub == "trigger" {
		var b velerov1.Backup
		return &b, nil, res.Into(&b)
	}
	var sch velerov1.Schedule
	return nil, &sch, res.Into(&sch)
}

// TestSchedules: the schedule engine of the server (real clock) with
// backups that stay pending (no backup engine): validation, the
// skipImmediately default of the server, pause/unpause/trigger through
// subresources and the spec, a due run, and a due run skipped while the
// schedule's backup has not finished.
func TestSchedules(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{Args: withoutBackupEngine})
	ctx := context.Background()

	t.Run("invalid-cron", func(t *testing.T) {
		_, err := s.Clientset.VeleroV1().Schedules(ns).Create(ctx, &velerov1.Schedule{
			ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: ns}, Spec: velerov1.ScheduleSpec{Schedule: "61 * * * *"},
		}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.schedule") || !strings.Contains(err.Error(), "end of range (61) above maximum (59)") {
			t.Errorf("schedule with a bad cron: %v, want 422 on spec.schedule with the parser's message", err)
		}
	})

	t.Run("trigger-pause-unpause", func(t *testing.T) {
		created := createSchedule(t, s, "daily", "0 3 * * *", nil)
		if created.Spec.SkipImmediately == nil || *created.Spec.SkipImmediately {
			t.Errorf("skipImmediately of a new schedule with the server default off: %v", created.Spec.SkipImmediately)
		}
		waitSchedule(t, s, "daily", "Enabled", func(sch *velerov1.Schedule) bool { return sch.Status.Phase == velerov1.SchedulePhaseEnabled })

		before := time.Now().UTC().Truncate(time.Second)
		b, _, err := postSchedule(s, "daily", "trigger", "")
		if err != nil {
			t.Fatalf("trigger: %v", err)
		}
		ts, perr := time.Parse("20060102150405", strings.TrimPrefix(b.Name, "daily-"))
		if perr != nil || ts.Before(before) || b.Labels[velerov1.ScheduleNameLabel] != "daily" || b.Labels["tier"] != "gold" ||
			b.Annotations["team"] != "storage" || strings.Join(b.Spec.IncludedNamespaces, ",") != "apps" {
			t.Errorf("triggered backup: name %s (%v), labels %v, annotations %v, spec %+v", b.Name, perr, b.Labels, b.Annotations, b.Spec)
		}
		// Its backup has not finished (no backup engine): a second trigger is refused.
		if _, _, err := postSchedule(s, "daily", "trigger", ""); !apierrors.IsConflict(err) || !strings.Contains(err.Error(), b.Name) {
			t.Errorf("trigger while a backup is pending: %v, want 409 naming %s", err, b.Name)
		}
		if got := scheduleBackups(t, s, "daily"); len(got) != 1 {
			t.Errorf("%d backups after a refused trigger", len(got))
		}
		if sch, _ := s.Clientset.VeleroV1().Schedules(ns).Get(ctx, "daily", metav1.GetOptions{}); sch.Status.LastBackup != nil {
			t.Errorf("a trigger moved the schedule's runs: lastBackup %v", sch.Status.LastBackup)
		}
		setBackupPhase(t, s, b.Name, velerov1.BackupPhaseCompleted)

		if _, sch, err := postSchedule(s, "daily", "pause", ""); err != nil || !sch.Spec.Paused {
			t.Fatalf("pause: %v (paused %v)", err, sch.Spec.Paused)
		}
		if _, _, err := postSchedule(s, "daily", "unpause", `{"skipImediately": true}`); !apierrors.IsBadRequest(err) {
			t.Errorf("unpause with a misspelt body: %v, want 400", err)
		}
		if _, sch, err := postSchedule(s, "daily", "unpause", `{"skipImmediately": true}`); err != nil || sch.Spec.Paused {
			t.Fatalf("unpause: %v", err)
		}
		// The engine consumes skipImmediately: reset, and the skip recorded.
		sch := waitSchedule(t, s, "daily", "consuming skipImmediately", func(sch *velerov1.Schedule) bool {
			return sch.Spec.SkipImmediately != nil && !*sch.Spec.SkipImmediately && sch.Status.LastSkipped != nil
		})
		if sch.Spec.Paused {
			t.Error("unpaused schedule is paused")
		}
		// Pausing through the spec works as well.
		if _, err := s.Clientset.VeleroV1().Schedules(ns).Patch(ctx, "daily", types.MergePatchType, []byte(`{"spec":{"paused":true}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if sch, _ := s.Clientset.VeleroV1().Schedules(ns).Get(ctx, "daily", metav1.GetOptions{}); !sch.Spec.Paused {
			t.Error("patching spec.paused did not pause")
		}
	})

	t.Run("owner-reference-and-rbac", func(t *testing.T) {
		if _, err := s.Clientset.VeleroV1().Schedules(ns).Create(ctx, &velerov1.Schedule{
			ObjectMeta: metav1.ObjectMeta{Name: "owned", Namespace: ns, Labels: map[string]string{"app": "shop"}},
			Spec:       velerov1.ScheduleSpec{Schedule: "0 3 * * *", UseOwnerReferencesInBackup: boolPtr(true)},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		sch, err := s.Clientset.VeleroV1().Schedules(ns).Get(ctx, "owned", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := postSchedule(s, "owned", "trigger", "")
		if err != nil {
			t.Fatal(err)
		}
		if len(b.OwnerReferences) != 1 || b.OwnerReferences[0].UID != sch.UID || b.OwnerReferences[0].Kind != "Schedule" ||
			b.OwnerReferences[0].Controller == nil || !*b.OwnerReferences[0].Controller || b.Labels["app"] != "shop" {
			t.Errorf("backup of a schedule with useOwnerReferencesInBackup: owners %+v labels %v", b.OwnerReferences, b.Labels)
		}
		// The subresources are authorized like any other: a user with no
		// rights is refused.
		nobody := s.IssueKubeconfig("nobody")
		for _, sub := range []string{"trigger", "pause", "unpause"} {
			_, err := s.KubectlAs(nobody, nil, "create", "--raw", "/apis/velero.io/v1/namespaces/"+ns+"/schedules/owned/"+sub, "-f", "/dev/null")
			if err == nil || !strings.Contains(err.Error(), "forbidden") {
				t.Errorf("POST schedules/owned/%s by a user with no rights: %v, want forbidden", sub, err)
			}
		}
	})

	t.Run("due-run-and-pending-skip", func(t *testing.T) {
		// Due one second after creation, and every second after.
		createSchedule(t, s, "often", "@every 1s", boolPtr(false))
		first := waitSchedule(t, s, "often", "running", func(sch *velerov1.Schedule) bool { return sch.Status.LastBackup != nil })
		// Its backup stays pending: the next due runs are skipped.
		waitSchedule(t, s, "often", "skipping a run", func(sch *velerov1.Schedule) bool {
			return sch.Status.LastSkipped != nil && sch.Status.LastSkipped.After(first.Status.LastBackup.Time)
		})
		got := scheduleBackups(t, s, "often")
		if len(got) != 1 {
			t.Fatalf("%d backups of a schedule whose backup is pending, want 1", len(got))
		}
		waitLogged(t, s, "Skipping a due run: a backup of the schedule has not finished", `backup="`+got[0].Name+`"`)
		// Once it has finished, the schedule runs again.
		setBackupPhase(t, s, got[0].Name, velerov1.BackupPhaseCompleted)
		waitSchedule(t, s, "often", "running again", func(sch *velerov1.Schedule) bool {
			return sch.Status.LastBackup.After(first.Status.LastBackup.Time)
		})
		if _, err := s.Clientset.VeleroV1().Schedules(ns).Patch(ctx, "often", types.MergePatchType, []byte(`{"spec":{"paused":true}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestScheduleSkipImmediatelyDefault: with --schedule-skip-immediately a
// new schedule that leaves the field unset skips its immediate run (the
// engine consumes the flag); one that says false does not.
func TestScheduleSkipImmediatelyDefault(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{Args: append([]string{"--schedule-skip-immediately"}, withoutBackupEngine...)})
	if sch := createSchedule(t, s, "default-on", "0 3 * * *", nil); sch.Spec.SkipImmediately == nil || !*sch.Spec.SkipImmediately {
		t.Errorf("skipImmediately of a new schedule with the server default on: %v", sch.Spec.SkipImmediately)
	}
	waitSchedule(t, s, "default-on", "consuming skipImmediately", func(sch *velerov1.Schedule) bool {
		return sch.Spec.SkipImmediately != nil && !*sch.Spec.SkipImmediately && sch.Status.LastSkipped != nil
	})
	createSchedule(t, s, "explicit-off", "0 3 * * *", boolPtr(false))
	sch := waitSchedule(t, s, "explicit-off", "Enabled", func(sch *velerov1.Schedule) bool { return sch.Status.Phase == velerov1.SchedulePhaseEnabled })
	if sch.Status.LastSkipped != nil || *sch.Spec.SkipImmediately {
		t.Errorf("schedule with skipImmediately false skipped: %+v %+v", sch.Spec.SkipImmediately, sch.Status)
	}
}

// passClock is a fake clock that counts its reads: the schedule engine
// reads the time once per pass over a schedule.
type passClock struct {
	*clocktesting.FakeClock
	reads atomic.Int64
}

func (c *passClock) Now() time.Time {
	c.reads.Add(1)
	return c.FakeClock.Now()
}

// scheduleEngine runs the schedule engine in the test process, against
// the real server, on a fake clock.
type scheduleEngine struct {
	*schedule.Controller
	clock  *passClock
	cancel context.CancelFunc
	done   chan struct{}
}

func startScheduleEngine(t *testing.T, s *framework.Server, start time.Time) *scheduleEngine {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := externalversions.NewSharedInformerFactoryWithOptions(s.Clientset, 0, externalversions.WithNamespace(ns))
	clk := &passClock{FakeClock: clocktesting.NewFakeClock(start)}
	c, err := schedule.New(schedule.Config{Client: s.EngineClientset(), Schedules: factory.Velero().V1().Schedules(), Backups: factory.Velero().V1().Backups(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	e := &scheduleEngine{Controller: c, clock: clk, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(e.done); c.Run(ctx, 1) }()
	t.Cleanup(e.stop)
	return e
}

func (e *scheduleEngine) stop() {
	e.cancel()
	<-e.done
}

// at moves the engine's clock and waits until the engine has made a
// whole pass over the schedule at that time: one worker handles a key one
// pass at a time, and a key added while it is handled is handled again
// after, so once a second pass has read the clock the first has ended.
func (e *scheduleEngine) at(t *testing.T, tm time.Time, name string) {
	t.Helper()
	e.clock.SetTime(tm)
	key := cache.ObjectName{Namespace: ns, Name: name}
	base := e.clock.reads.Load()
	for _, want := range []int64{base + 1, base + 2} {
		e.Add(key)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
			return e.clock.reads.Load() >= want, nil
		})
		cancel()
		if err != nil {
			t.Fatalf("the schedule engine made no pass over %s at %s", name, tm)
		}
	}
}

// settle polls a schedule and its backups until cond holds.
func settle(t *testing.T, s *framework.Server, name, what string, cond func(*velerov1.Schedule, []velerov1.Backup) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		sch, err := s.Clientset.VeleroV1().Schedules(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return cond(sch, scheduleBackups(t, s, name)), nil
	}); err != nil {
		t.Fatalf("schedule %s never %s", name, what)
	}
}

// TestScheduleClock drives the schedule engine's clock: the seed's
// example (cron "45 * * * *", paused at :43, unpaused at :50, with and
// without skipImmediately), and a server restart between due times (no
// duplicate, no lost run, missed runs not caught up one by one).
func TestScheduleClock(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{Args: []string{"--disable-controllers=schedule,backup,backup-sync"}})
	hourly, err := cron.ParseStandard("45 * * * *")
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name          string
		unpauseBody   string
		wantImmediate bool
	}{
		{"seed-without-skip", "", true},
		{"seed-with-skip", `{"skipImmediately": true}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			created := createSchedule(t, s, c.name, "45 * * * *", boolPtr(false))
			// The first :45 after the creation whose :43 is after it too.
			due := hourly.Next(created.CreationTimestamp.Time)
			if due.Add(-2 * time.Minute).Before(created.CreationTimestamp.Time) {
				due = due.Add(time.Hour)
			}
			e := startScheduleEngine(t, s, created.CreationTimestamp.Time)
			defer e.stop()
			settle(t, s, c.name, "Enabled", func(sch *velerov1.Schedule, _ []velerov1.Backup) bool {
				return sch.Status.Phase == velerov1.SchedulePhaseEnabled
			})
			// :43 — paused.
			e.clock.SetTime(due.Add(-2 * time.Minute))
			if _, _, err := postSchedule(s, c.name, "pause", ""); err != nil {
				t.Fatal(err)
			}
			// :50 — unpaused, with the :45 run due.
			e.clock.SetTime(due.Add(5 * time.Minute))
			if _, _, err := postSchedule(s, c.name, "unpause", c.unpauseBody); err != nil {
				t.Fatal(err)
			}
			unpausedAt := e.clock.Now()
			if c.wantImmediate {
				settle(t, s, c.name, "running at the unpause", func(sch *velerov1.Schedule, bs []velerov1.Backup) bool {
					return sch.Status.LastBackup != nil && sch.Status.LastBackup.Time.Equal(unpausedAt) && len(bs) == 1
				})
				return
			}
			settle(t, s, c.name, "skipping the run due at the unpause", func(sch *velerov1.Schedule, bs []velerov1.Backup) bool {
				return sch.Status.LastSkipped != nil && sch.Status.LastSkipped.Time.Equal(unpausedAt) && !*sch.Spec.SkipImmediately
			})
			if bs := scheduleBackups(t, s, c.name); len(bs) != 0 {
				t.Fatalf("skipImmediately on unpause: %d backups created", len(bs))
			}
			// The next run is the next :45.
			e.at(t, due.Add(time.Hour-time.Minute), c.name)
			if bs := scheduleBackups(t, s, c.name); len(bs) != 0 {
				t.Fatalf("%d backups before the next :45", len(bs))
			}
			e.at(t, due.Add(time.Hour+time.Minute), c.name)
			settle(t, s, c.name, "running at the next :45", func(sch *velerov1.Schedule, bs []velerov1.Backup) bool {
				return len(bs) == 1 && sch.Status.LastBackup != nil && sch.Status.LastBackup.Time.Equal(due.Add(time.Hour+time.Minute))
			})
		})
	}

	t.Run("restart-between-due-times", func(t *testing.T) {
		nightly, _ := cron.ParseStandard("0 2 * * *")
		created := createSchedule(t, s, "nightly", "0 2 * * *", boolPtr(false))
		first := nightly.Next(created.CreationTimestamp.Time).Add(time.Minute)
		e := startScheduleEngine(t, s, created.CreationTimestamp.Time)
		e.at(t, first, "nightly")
		settle(t, s, "nightly", "running the first night", func(sch *velerov1.Schedule, bs []velerov1.Backup) bool {
			return len(bs) == 1 && sch.Status.LastBackup != nil && sch.Status.LastBackup.Time.Equal(first)
		})
		setBackupPhase(t, s, scheduleBackups(t, s, "nightly")[0].Name, velerov1.BackupPhaseCompleted)

		// The server (and its engine) restarts between due times: nothing runs.
		e.stop()
		s.Restart(true)
		e = startScheduleEngine(t, s, first.Add(10*time.Minute))
		e.at(t, first.Add(10*time.Minute), "nightly")
		if bs := scheduleBackups(t, s, "nightly"); len(bs) != 1 {
			t.Fatalf("%d backups after a restart between due times, want 1", len(bs))
		}
		// The next night runs once.
		second := first.Add(24 * time.Hour)
		e.at(t, second, "nightly")
		settle(t, s, "nightly", "running the second night", func(sch *velerov1.Schedule, bs []velerov1.Backup) bool {
			return len(bs) == 2 && sch.Status.LastBackup.Time.Equal(second)
		})
		for _, b := range scheduleBackups(t, s, "nightly") {
			setBackupPhase(t, s, b.Name, velerov1.BackupPhaseCompleted)
		}
		// Three nights missed: one run, not three.
		late := second.Add(72 * time.Hour)
		e.at(t, late, "nightly")
		settle(t, s, "nightly", "running after missed nights", func(sch *velerov1.Schedule, bs []velerov1.Backup) bool {
			return sch.Status.LastBackup.Time.Equal(late)
		})
		if bs := scheduleBackups(t, s, "nightly"); len(bs) != 3 {
			t.Errorf("%d backups after three missed nights, want 3 (one run)", len(bs))
		}
	})
}
