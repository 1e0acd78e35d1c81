package backuprepo

import (
	"context"
	"fmt"
	"time"

	"github.com/kopia/kopia/repo/maintenance"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerovalidation "github.com/backstop-io/backstop/pkg/apis/velero/validation"
	"github.com/backstop-io/backstop/pkg/datamover/kopiarepo"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	informers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v1"
	listers "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
)

// ControllerName is the repository engine's name (--disable-controllers,
// field manager): Velero's controller of BackupRepositories.
const ControllerName = "backup-repo"

// RecentMaintenanceKept is how many runs status.recentMaintenance keeps
// (Velero's).
const RecentMaintenanceKept = 3

// NotReadyRecheck is how often a repository that does not open is tried
// again.
const NotReadyRecheck = time.Minute

// maintainer is what the engine needs of a repository.
type maintainer interface {
	Maintain(ctx context.Context, m kopiarepo.Maintenance) (maintenance.Mode, error)
}

// Controller is the repository engine, as Velero's BackupRepository
// controller: it sets each kopia BackupRepository's repository up (the
// one place repositories are created; Ready, or NotReady with the reason,
// tried again every NotReadyRecheck), and runs its maintenance every
// spec.maintenanceFrequency in the server instead of a job: kopia's
// schedule decides between quick and full (fullMaintenanceInterval of
// spec.repositoryConfig), with kopia's safety (maintenanceSafety). Each
// run is recorded in status.recentMaintenance (the last three), a success
// in status.lastMaintenanceTime; one status write per pass.
type Controller struct {
	*reconcile.Loop
	repos  *Repositories
	lister listers.BackupRepositoryLister
	clock  clock.Clock
	// setUp opens (creating it if needed) the repository br describes,
	// released by the caller once done (the repositories'; tests replace
	// it).
	setUp func(ctx context.Context, br *velerov1.BackupRepository) (maintainer, func(), error)
}

// NewController returns the repository engine of the repositories
// informer lists, opened by repos (which it closes when it stops).
func NewController(repos *Repositories, informer informers.BackupRepositoryInformer, clk clock.Clock) (*Controller, error) {
	c := &Controller{repos: repos, lister: informer.Lister(), clock: clk}
	c.setUp = func(ctx context.Context, br *velerov1.BackupRepository) (maintainer, func(), error) {
		rep, release, err := repos.setUp(ctx, br)
		if err != nil {
			// Not a nil *Repository in a non-nil maintainer.
			return nil, nil, err
		}
		return rep, release, nil
	}
	c.Loop = reconcile.NewLoop("backuprepositories", c.sync)
	if err := c.Watch(informer.Informer()); err != nil {
		return nil, err
	}
	return c, nil
}

// Run sets repositories up and maintains them until ctx ends, then closes
// them.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer c.repos.Close(context.WithoutCancel(ctx))
	c.Loop.Run(ctx, workers)
}

// frequency is the repository's maintenance frequency (Velero's default
// for kopia when unset).
func frequency(br *velerov1.BackupRepository) time.Duration {
	if f := br.Spec.MaintenanceFrequency.Duration; f > 0 {
		return f
	}
	return DefaultMaintenanceFrequency
}

// lastRun is when the last maintenance started (zero: never): a failed
// one is not tried again before the frequency has passed either.
func lastRun(br *velerov1.BackupRepository) time.Time {
	var last time.Time
	if t := br.Status.LastMaintenanceTime; t != nil {
		last = t.Time
	}
	for _, run := range br.Status.RecentMaintenance {
		if run.StartTimestamp != nil && run.StartTimestamp.After(last) {
			last = run.StartTimestamp.Time
		}
	}
	return last
}

// sync sets a repository up, runs its maintenance when due, and records
// both.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	br, err := c.lister.BackupRepositories(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if br.Spec.RepositoryType != RepositoryType || br.DeletionTimestamp != nil {
		return nil
	}
	phase, message := velerov1.BackupRepositoryPhaseReady, ""
	rep, release, err := c.setUp(ctx, br)
	if err != nil {
		phase, message = velerov1.BackupRepositoryPhaseNotReady, err.Error()
	} else {
		defer release()
	}
	// Never maintained: due at once, as in Velero.
	freq, next := frequency(br), time.Duration(0)
	if last := lastRun(br); !last.IsZero() {
		next = last.Add(freq).Sub(c.clock.Now())
	}
	retry := rep == nil
	if rep != nil {
		if rotation := c.rotate(ctx, br); rotation != "" {
			message, retry = rotation, true
		}
	}
	var run *velerov1.BackupRepositoryMaintenanceStatus
	if rep != nil && next <= 0 {
		r := c.maintain(ctx, br, rep)
		run, next = &r, freq
	}
	_, err = c.repos.cfg.Status.BackupRepositories(c.repos.cfg.Client, br.Namespace).Update(ctx, br, func(cur *velerov1.BackupRepository) {
		cur.Status.Phase, cur.Status.Message = phase, message
		if run != nil {
			recordRun(&cur.Status, *run)
		}
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if retry {
		next = min(next, NotReadyRecheck)
		if rep == nil {
			next = NotReadyRecheck
		}
	}
	c.AddAfter(key, next)
	return nil
}

// rotate rotates br's password when its RotatePasswordAnnotation asks for
// a rotation not yet made, and says why one failed ("": none asked, or
// done).
func (c *Controller) rotate(ctx context.Context, br *velerov1.BackupRepository) string {
	asked := br.Annotations[RotatePasswordAnnotation]
	if asked == "" {
		return ""
	}
	done, err := c.repos.rotatedFor(ctx, br)
	if err == nil && done == asked {
		return ""
	}
	if err == nil {
		err = c.repos.rotate(ctx, br, asked, c.clock.Now())
	}
	if err != nil {
		klog.FromContext(ctx).Info("Rotating a repository's password failed", "backupRepository", klog.KObj(br), "err", err)
		return "rotating the password failed (tried again): " + err.Error()
	}
	klog.FromContext(ctx).Info("Rotated a repository's password", "backupRepository", klog.KObj(br), "request", asked)
	return ""
}

// maintain runs br's maintenance and says how it went.
func (c *Controller) maintain(ctx context.Context, br *velerov1.BackupRepository, rep maintainer) velerov1.BackupRepositoryMaintenanceStatus {
	start := metav1.NewTime(c.clock.Now())
	message, err := func() (string, error) {
		cfg, errs := velerovalidation.ParseRepositoryMaintenance(br.Spec.RepositoryConfig, field.NewPath("spec", "repositoryConfig"))
		if errs != nil {
			return "", errs.ToAggregate()
		}
		mode, err := rep.Maintain(ctx, kopiarepo.Maintenance{FullInterval: cfg.FullInterval, Unsafe: cfg.Unsafe})
		if err != nil {
			return "", err
		}
		if mode == maintenance.ModeNone {
			return "no maintenance due (" + cfg.String() + ")", nil
		}
		return fmt.Sprintf("%s maintenance (%s)", mode, cfg), nil
	}()
	done := metav1.NewTime(c.clock.Now())
	run := velerov1.BackupRepositoryMaintenanceStatus{Result: velerov1.BackupRepositoryMaintenanceSucceeded, StartTimestamp: &start, CompleteTimestamp: &done, Message: message}
	if told := c.repos.cfg.Maintained; told != nil {
		told(br.Name, err == nil, done.Sub(start.Time))
	}
	if err != nil {
		run.Result, run.Message = velerov1.BackupRepositoryMaintenanceFailed, err.Error()
		klog.FromContext(ctx).Info("Repository maintenance failed", "backupRepository", klog.KObj(br), "err", err)
	} else {
		klog.FromContext(ctx).V(2).Info("Repository maintained", "backupRepository", klog.KObj(br), "run", message)
	}
	return run
}

// recordRun adds run to the status: the last RecentMaintenanceKept runs,
// and the time of the last success.
func recordRun(st *velerov1.BackupRepositoryStatus, run velerov1.BackupRepositoryMaintenanceStatus) {
	st.RecentMaintenance = append(st.RecentMaintenance, run)
	if n := len(st.RecentMaintenance); n > RecentMaintenanceKept {
		st.RecentMaintenance = st.RecentMaintenance[n-RecentMaintenanceKept:]
	}
	if run.Result == velerov1.BackupRepositoryMaintenanceSucceeded {
		st.LastMaintenanceTime = run.CompleteTimestamp
	}
}
