package backup

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/livelog"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// recover settles the backups a previous process was running: nothing is
// running yet in this one.
func (c *Controller) recover(ctx context.Context) {
	all, err := c.backups.List(labels.Everything())
	if err != nil {
		return
	}
	for _, b := range all {
		c.settle(ctx, b, velerov1.BackupRestartedReason)
	}
}

// unsettled reports whether b is in a phase of a run (InProgress,
// waiting for its async operations, finalizing) though no run of this
// process has it: a previous process's, or one of this process whose end
// could not be written.
func unsettled(b *velerov1.Backup) bool {
	switch b.Status.Phase {
	case velerov1.BackupPhaseInProgress, velerov1.BackupPhaseWaitingForPluginOperations,
		velerov1.BackupPhaseWaitingForPluginOperationsPartiallyFailed,
		velerov1.BackupPhaseFinalizing, velerov1.BackupPhaseFinalizingPartiallyFailed:
		return true
	case velerov1.BackupPhaseFinalizingCancelled:
		return b.Status.StartTimestamp != nil // (cancelled before it started: the queue's)
	}
	return false
}

// settleOrphan settles a backup the informer shows unsettled while no run
// of this process has it (sync holds its key: none starts meanwhile),
// decided on the backup as stored, which the informer may lag behind (a
// run that just wrote its end).
func (c *Controller) settleOrphan(ctx context.Context, key cache.ObjectName) error {
	b, err := c.cfg.Client.VeleroV1().Backups(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading backup %s: %w", key, err)
	}
	if !unsettled(b) {
		return nil
	}
	klog.FromContext(ctx).Info("Settling a backup no run has: its run stopped before it ended", "backup", klog.KObj(b), "phase", b.Status.Phase)
	c.settle(ctx, b, velerov1.BackupInterruptedReason)
	return nil
}

// settle ends a backup no run of this process has, as a restart does: one
// waiting for its async operations waits again, one finalizing is
// finished, one cancelled is cleaned up, and one in progress is failed
// with reason, its partial data removed.
func (c *Controller) settle(ctx context.Context, b *velerov1.Backup, reason string) {
	var err error
	logger := klog.FromContext(ctx).WithValues("backup", klog.KObj(b))
	r := &backupRun{c: c, b: b}
	switch b.Status.Phase {
	case velerov1.BackupPhaseInProgress, velerov1.BackupPhaseWaitingForPluginOperations,
		velerov1.BackupPhaseWaitingForPluginOperationsPartiallyFailed:
		if b.Status.Phase != velerov1.BackupPhaseInProgress && c.resume(ctx, b) {
			return
		}
		if r.store, r.layout, err = c.openStore(ctx, b); err != nil {
			r.store = nil
		}
		if log, err := items.NewLog(c.cfg.ScratchDir, c.cfg.Clock, logger, "backup", b.Namespace+"/"+b.Name); err == nil {
			r.log = log
			r.cancelInterruptedOperations(ctx)
		}
		if r.store != nil {
			if err := deleteData(ctx, r.store, r.layout, b.Name, false); err != nil {
				logger.Error(err, "Removing the partial data of an interrupted backup")
			}
		}
		r.fail(ctx, reason)
		if r.log != nil {
			r.log.Close()
		}
	case velerov1.BackupPhaseFinalizing, velerov1.BackupPhaseFinalizingPartiallyFailed:
		// The items were all written; what may be missing is the
		// metadata and the final status.
		if r.store, r.layout, err = c.openStore(ctx, b); err != nil {
			r.store = nil
			r.fail(ctx, fmt.Sprintf("finishing the backup after a restart: %v", err))
			return
		}
		tarKey, _ := r.layout.Key(velerov1.DownloadTargetKindBackupContents, b.Name)
		if tarball, err := r.store.Get(ctx, tarKey); err != nil {
			r.fail(ctx, fmt.Sprintf("finishing the backup after a restart: %v", err))
			return
		} else {
			_ = tarball.Close()
		}
		if log, err := items.NewLog(c.cfg.ScratchDir, c.cfg.Clock, logger, "backup", b.Namespace+"/"+b.Name); err == nil {
			r.log = log
			r.releaseRecordedOperations(ctx)
			log.Close()
		}
		final := velerov1.BackupPhaseCompleted
		if b.Status.Phase == velerov1.BackupPhaseFinalizingPartiallyFailed {
			final = velerov1.BackupPhasePartiallyFailed
		}
		r.complete(ctx, final)
	case velerov1.BackupPhaseFinalizingCancelled:
		if b.Status.StartTimestamp == nil {
			return // cancelled before it started: the queue's
		}
		if r.store, r.layout, err = c.openStore(ctx, b); err != nil {
			r.store = nil
		}
		r.cancelled(ctx)
	}
}

// resume runs again a backup a previous process left waiting for its
// async operations, as Velero's operations controller picks such backups
// up: its item operations file in the location says what they are, and
// the wait, then the finalization, go on as if nothing had stopped. It
// reports false, leaving the backup to fail, when the location or the file
// cannot be read. The log of the resumed run starts at the restart (the
// earlier lines were the stopped process's): it says so, and carries the
// errors and warnings the status counted.
func (c *Controller) resume(ctx context.Context, b *velerov1.Backup) bool {
	logger := klog.FromContext(ctx).WithValues("backup", klog.KObj(b))
	r := &backupRun{c: c, b: b}
	var err error
	if r.store, r.layout, err = c.openStore(ctx, b); err != nil {
		logger.Error(err, "Resuming a backup waiting for its async operations: its location")
		return false
	}
	log, err := items.NewLog(c.cfg.ScratchDir, c.cfg.Clock, logger, "backup", b.Namespace+"/"+b.Name)
	if err != nil {
		logger.Error(err, "Resuming a backup waiting for its async operations: its log")
		return false
	}
	r.log = log
	if r.ops, err = r.recordedOperations(ctx); err != nil {
		logger.Error(err, "Resuming a backup waiting for its async operations: its item operations file")
		log.Close()
		return false
	}
	// Closed after the log is stored, as a run's.
	live := c.cfg.LiveLogs.Start(livelog.Key{Kind: string(velerov1.DownloadTargetKindBackupLog), Namespace: b.Namespace, Name: b.Name})
	log.Tee(live)
	errs := b.Status.Errors
	if errs == 0 && b.Status.Phase == velerov1.BackupPhaseWaitingForPluginOperationsPartiallyFailed {
		errs = 1
	}
	log.Carry(errs, b.Status.Warnings)
	attempted, _, _ := r.ops.counts()
	log.Info("Backup resumed after a restart of the server: waiting for its async operations again (the log lines before the restart were the stopped process's)",
		"operations", attempted, "errorsBefore", errs, "warningsBefore", b.Status.Warnings)
	r.counter = &Counter{}
	if p := b.Status.Progress; p != nil {
		r.counter.backedUp.Store(int64(p.ItemsBackedUp))
	}
	c.launch(ctx, b, nil, func(ctx, runCtx context.Context, _ *velerov1.Backup) {
		defer log.Close()
		defer live.Close()
		r.end(ctx, runCtx, r.waitForOperations(ctx, runCtx))
	})
	return true
}

// cancelInterruptedOperations cancels the async operations a backup
// interrupted by a restart had started, and discards what they made: those
// its item operations file records (it was waiting for them) and those the
// actions find in the cluster (started while it collected, not recorded
// yet).
func (r *backupRun) cancelInterruptedOperations(ctx context.Context) {
	ops := newOperations(r.c.cfg.Actions, r.b, r.log, r.c.cfg.Clock)
	if r.b.Status.Phase != velerov1.BackupPhaseInProgress && r.store != nil {
		recorded, err := r.recordedOperations(ctx)
		switch {
		case err == nil:
			ops = recorded
		case !errors.Is(err, objectstore.ErrNotFound):
			r.log.Warning("", items.ScopeVelero, fmt.Sprintf("reading the async operations to cancel them: %v", err))
		}
	}
	ops.find(ctx)
	ops.cancelAll(ctx, "the server stopped while the backup ran it")
}

// recordedOperations reads the backup's item operations file.
func (r *backupRun) recordedOperations(ctx context.Context) (*operations, error) {
	key, _ := r.layout.Key(velerov1.DownloadTargetKindBackupItemOperations, r.b.Name)
	data, err := objectstore.GetGzip(ctx, r.store, key, maxRecordSize)
	if err != nil {
		return nil, err
	}
	ops := newOperations(r.c.cfg.Actions, r.b, r.log, r.c.cfg.Clock)
	if err := ops.load(data); err != nil {
		return nil, err
	}
	return ops, nil
}

// releaseRecordedOperations releases again what the completed operations
// of a backup interrupted while Finalizing made (finish.go).
func (r *backupRun) releaseRecordedOperations(ctx context.Context) {
	ops, err := r.recordedOperations(ctx)
	if errors.Is(err, objectstore.ErrNotFound) {
		return // a backup without async operations
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Reading the async operations of a backup interrupted while finalizing", "backup", klog.KObj(r.b))
		return
	}
	releaseOperations(ctx, ops, r.b, r.log)
}
