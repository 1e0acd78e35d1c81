package backup

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/items"
)

// recover settles the backups a previous process was running: nothing is
// running yet in this one.
func (c *Controller) recover(ctx context.Context) {
	all, err := c.backups.List(labels.Everything())
	if err != nil {
		return
	}
	for _, b := range all {
		logger := klog.FromContext(ctx).WithValues("backup", klog.KObj(b))
		r := &backupRun{c: c, b: b}
		switch b.Status.Phase {
		case velerov1.BackupPhaseInProgress, velerov1.BackupPhaseWaitingForPluginOperations,
			velerov1.BackupPhaseWaitingForPluginOperationsPartiallyFailed:
			if r.store, r.layout, err = c.openStore(ctx, b); err != nil {
				r.store = nil
				r.fail(ctx, velerov1.BackupRestartedReason)
				continue
			}
			if log, err := items.NewLog(c.cfg.ScratchDir, c.cfg.Clock, logger, "backup", b.Namespace+"/"+b.Name); err == nil {
				r.log = log
			}
			if b.Status.Phase != velerov1.BackupPhaseInProgress && r.log != nil {
				// Its async operations are in the item operations file.
				r.cancelRecordedOperations(ctx)
			}
			if err := deleteData(ctx, r.store, r.layout, b.Name, false); err != nil {
				logger.Error(err, "Removing the partial data of an interrupted backup")
			}
			r.fail(ctx, velerov1.BackupRestartedReason)
			if r.log != nil {
				r.log.Close()
			}
		case velerov1.BackupPhaseFinalizing, velerov1.BackupPhaseFinalizingPartiallyFailed:
			// The items were all written; what may be missing is the
			// metadata and the final status.
			if r.store, r.layout, err = c.openStore(ctx, b); err != nil {
				r.store = nil
				r.fail(ctx, fmt.Sprintf("finishing the backup after a restart: %v", err))
				continue
			}
			tarKey, _ := r.layout.Key(velerov1.DownloadTargetKindBackupContents, b.Name)
			if tarball, err := r.store.Get(ctx, tarKey); err != nil {
				r.fail(ctx, fmt.Sprintf("finishing the backup after a restart: %v", err))
				continue
			} else {
				_ = tarball.Close()
			}
			final := velerov1.BackupPhaseCompleted
			if b.Status.Phase == velerov1.BackupPhaseFinalizingPartiallyFailed {
				final = velerov1.BackupPhasePartiallyFailed
			}
			r.complete(ctx, final)
		case velerov1.BackupPhaseFinalizingCancelled:
			if b.Status.StartTimestamp == nil {
				continue // cancelled before it started: the queue's
			}
			if r.store, r.layout, err = c.openStore(ctx, b); err != nil {
				r.store = nil
			}
			r.cancelled(ctx)
		}
	}
}

// cancelRecordedOperations cancels the operations a backup interrupted by
// a restart was waiting for, as recorded in its item operations file.
func (r *backupRun) cancelRecordedOperations(ctx context.Context) {
	c, b, store, layout, log := r.c, r.b, r.store, r.layout, r.log
	key, _ := layout.Key(velerov1.DownloadTargetKindBackupItemOperations, b.Name)
	rc, err := store.Get(ctx, key)
	if err != nil {
		log.Warning("", items.ScopeVelero, fmt.Sprintf("reading the async operations to cancel them: %v", err))
		return
	}
	defer rc.Close()
	gz, err := gzip.NewReader(rc)
	if err != nil {
		log.Warning("", items.ScopeVelero, fmt.Sprintf("reading the async operations to cancel them: %v", err))
		return
	}
	data, err := io.ReadAll(gz)
	if err != nil {
		log.Warning("", items.ScopeVelero, fmt.Sprintf("reading the async operations to cancel them: %v", err))
		return
	}
	ops := newOperations(c.cfg.Actions, b, log, c.cfg.Clock)
	if err := ops.load(data); err != nil {
		log.Warning("", items.ScopeVelero, err.Error())
		return
	}
	ops.cancelAll(ctx, "the server stopped while the backup waited for it")
}
