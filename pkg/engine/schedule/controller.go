// Package schedule is the schedule engine: it runs Schedules' backups at
// their cron times, as Velero's schedule controller does, with
// skipImmediately (docs/design.md, "Schedules").
//
//   - The cron expression is parsed as Velero does (robfig/cron
//     ParseStandard: 5 fields, @every, @daily, CRON_TZ=/TZ=); a bad one
//     makes the schedule FailedValidation with the parser's message,
//     otherwise it is Enabled.
//   - A schedule is due when now is after Next(base), base being
//     status.lastBackup, else the creation time, replaced by
//     status.lastSkipped when that is later. Missed runs are not caught up
//     one by one: a schedule due several times over runs once.
//   - spec.skipImmediately true on an unpaused schedule is consumed: it is
//     reset to false and status.lastSkipped set to now, so the run due at
//     creation or unpause is skipped and the next one is at the next cron
//     time.
//   - A due run is skipped (status.lastSkipped, and a log line) while a
//     backup of the schedule has not finished, so that a schedule never
//     has two pending backups.
//   - A due run is the schedules/<name>/trigger subresource, which creates
//     the backup (name, labels, annotations, owner reference); the engine
//     then records status.lastBackup. A run interrupted between the two
//     (a restart) is recognised by its backup, created after the due time,
//     and is not run twice.
//
// Paused schedules run nothing. Time comes from the engine's clock.
package schedule

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	informers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v1"
	listers "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
)

// Config is what the engine needs.
type Config struct {
	Client    versioned.Interface
	Schedules informers.ScheduleInformer
	Backups   informers.BackupInformer
	Clock     clock.Clock
	// Observers are told about the phase transitions the engine writes.
	Observers []status.Observer
}

// Controller is the schedule engine.
type Controller struct {
	*reconcile.Loop
	cfg       Config
	schedules listers.ScheduleLister
	backups   listers.BackupLister
}

// New returns the engine.
func New(cfg Config) (*Controller, error) {
	c := &Controller{cfg: cfg, schedules: cfg.Schedules.Lister(), backups: cfg.Backups.Lister()}
	c.Loop = reconcile.NewLoop("schedule", c.sync)
	if err := c.Watch(cfg.Schedules.Informer()); err != nil {
		return nil, err
	}
	c.WaitFor(cfg.Backups.Informer())
	return c, nil
}

// NextRunTime is the skipImmediately design's getNextRunTime: whether the schedule is due
// at now, and when its next run is.
func NextRunTime(s *velerov1.Schedule, sched cron.Schedule, now time.Time) (bool, time.Time) {
	base := s.CreationTimestamp.Time
	if s.Status.LastBackup != nil {
		base = s.Status.LastBackup.Time
	}
	if s.Status.LastSkipped != nil && s.Status.LastSkipped.After(base) {
		base = s.Status.LastSkipped.Time
	}
	next := sched.Next(base)
	return now.After(next), next
}

func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	s, err := c.schedules.Schedules(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.DeletionTimestamp != nil {
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("schedule", klog.KObj(s))
	now := c.cfg.Clock.Now()

	sched, parseErr := cron.ParseStandard(s.Spec.Schedule)
	phase, problems := velerov1.SchedulePhaseEnabled, []string(nil)
	if parseErr != nil {
		phase, problems = velerov1.SchedulePhaseFailedValidation, []string{fmt.Sprintf("invalid schedule %q: %v", s.Spec.Schedule, parseErr)}
	}
	if s.Status.Phase != phase || fmt.Sprint(s.Status.ValidationErrors) != fmt.Sprint(problems) {
		if s, err = c.updateStatus(ctx, s, func(st *velerov1.ScheduleStatus) {
			st.Phase, st.ValidationErrors = phase, problems
		}); err != nil {
			return err
		}
		if phase == velerov1.SchedulePhaseFailedValidation {
			logger.Info("Schedule failed validation", "errors", problems)
		}
	}
	if phase != velerov1.SchedulePhaseEnabled || s.Spec.Paused {
		return nil
	}

	if s.Spec.SkipImmediately != nil && *s.Spec.SkipImmediately {
		// Consume and reset: the run due now is skipped.
		if s, err = c.updateStatus(ctx, s, func(st *velerov1.ScheduleStatus) { st.LastSkipped = &metav1.Time{Time: now} }); err != nil {
			return err
		}
		s = s.DeepCopy()
		no := false
		s.Spec.SkipImmediately = &no
		if s, err = c.cfg.Client.VeleroV1().Schedules(s.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsConflict(err) {
				c.Add(key)
				return nil
			}
			return fmt.Errorf("resetting spec.skipImmediately of schedule %s: %w", key, err)
		}
		logger.Info("Skipped the run due at once (skipImmediately)")
	}

	due, next := NextRunTime(s, sched, now)
	if !due {
		c.AddAfter(key, next.Sub(now)+time.Second)
		return nil
	}
	// The informer's copy may not show the last run yet: decide on the
	// schedule as stored.
	if s, err = c.cfg.Client.VeleroV1().Schedules(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if s.Spec.Paused {
		return nil
	}
	if due, next = NextRunTime(s, sched, now); !due {
		c.AddAfter(key, next.Sub(now)+time.Second)
		return nil
	}
	// Its backups as stored, too: a run is rare, a stale view costly.
	list, err := c.cfg.Client.VeleroV1().Backups(s.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{velerov1.ScheduleNameLabel: velerov1.LabelValue(s.Name)}).String()})
	if err != nil {
		return err
	}
	mine := make([]*velerov1.Backup, 0, len(list.Items))
	for i := range list.Items {
		mine = append(mine, &list.Items[i])
	}
	for _, b := range mine {
		if !b.CreationTimestamp.Time.Before(next) {
			// This run's backup exists (the last run was interrupted before
			// lastBackup was written): record it, do not run again.
			logger.Info("The due run's backup exists already", "backup", b.Name)
			return c.recordRun(ctx, key, s, sched, b.CreationTimestamp.Time, now)
		}
	}
	for _, b := range mine {
		if !b.Status.Phase.Terminal() {
			logger.Info("Skipping a due run: a backup of the schedule has not finished", "backup", b.Name, "phase", b.Status.Phase, "due", next)
			if _, err := c.updateStatus(ctx, s, func(st *velerov1.ScheduleStatus) { st.LastSkipped = &metav1.Time{Time: now} }); err != nil {
				return err
			}
			c.AddAfter(key, sched.Next(now).Sub(now)+time.Second)
			return nil
		}
	}
	var created velerov1.Backup
	err = c.cfg.Client.VeleroV1().RESTClient().Post().Namespace(s.Namespace).Resource("schedules").Name(s.Name).SubResource("trigger").
		Do(ctx).Into(&created)
	if apierrors.IsConflict(err) {
		// A backup appeared meanwhile (a trigger): the next pass decides.
		c.AddAfter(key, time.Second)
		return nil
	}
	if apierrors.IsAlreadyExists(err) {
		// A backup of this name (this second) exists already: try again
		// with the next second's name.
		c.AddAfter(key, time.Second)
		return nil
	}
	if err != nil {
		return fmt.Errorf("running schedule %s: %w", key, err)
	}
	logger.Info("Schedule is due: backup created", "backup", created.Name, "due", next)
	return c.recordRun(ctx, key, s, sched, now, now)
}

// recordRun sets status.lastBackup and comes back at the next run.
func (c *Controller) recordRun(ctx context.Context, key cache.ObjectName, s *velerov1.Schedule, sched cron.Schedule, at, now time.Time) error {
	if _, err := c.updateStatus(ctx, s, func(st *velerov1.ScheduleStatus) { st.LastBackup = &metav1.Time{Time: at} }); err != nil {
		return err
	}
	c.AddAfter(key, sched.Next(at).Sub(now)+time.Second)
	return nil
}

// updateStatus writes the schedule's status, changed by mutate, through
// the engine's status writer.
func (c *Controller) updateStatus(ctx context.Context, s *velerov1.Schedule, mutate func(*velerov1.ScheduleStatus)) (*velerov1.Schedule, error) {
	w := status.Writer{Engine: velerov1.EngineSchedule, Observers: c.cfg.Observers}.Schedules(c.cfg.Client, s.Namespace)
	return w.Update(ctx, s, func(cur *velerov1.Schedule) { mutate(&cur.Status) })
}
