package restore

// One run of a restore: its state (restoreRun), the goroutine it runs in,
// the two passes over the tarball, its progress and its end.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/archive"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/engine/queue"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/livelog"
	"github.com/backstop-io/backstop/pkg/objectstore"
	"github.com/backstop-io/backstop/pkg/resourcemodifiers"
	"github.com/backstop-io/backstop/pkg/volumeinfo"
)

// restoreRun is one run of a restore, from InProgress to its end, in a
// goroutine of its own (start); a step that has not happened yet leaves
// its field nil (a restore failed before its location opened has no
// store). Its items are written several at a time (the items of one
// resource): mu guards what they share.
type restoreRun struct {
	c      *Controller
	r      *velerov1.Restore
	backup *velerov1.Backup
	store  objectstore.Store
	layout objectstore.Layout
	log    *items.Log
	count  *counter
	// target writes the items: the server's rights, or those of the user
	// the restore is for (as, "" for the server).
	target dynamic.Interface
	as     string
	// cancel ends the run early (the Restore was deleted).
	cancel context.CancelCauseFunc
	// entry is what the run writes, as the restore queue sees it.
	entry queue.Entry
	// pass is the state of the pass over the items under way.
	pass passState
	// volumes are the backup's volumes (its volume info file).
	volumes volumeinfo.Index
	// modifiers are the restore's resource modifiers (nil: none).
	modifiers *resourcemodifiers.Modifiers

	mu sync.Mutex
	// namespaces are the target namespaces known to exist.
	namespaces map[string]bool
	// crds are the CustomResourceDefinitions restored or found (the
	// first pass's, waited for before the second).
	crds []string
	// dependents are the items written without the owner references
	// they had (owners.go).
	dependents []dependent
	// moved are the restored claims whose data the data mover writes
	// (moved.go).
	moved []movedClaim
	// nsMu makes one item at a time create a missing namespace.
	nsMu sync.Mutex
	// preview, when set, makes the run a preview (preview.go): the
	// target takes every write as a dry run, each item's outcome is
	// recorded, and what a dry run cannot undo is not done.
	preview *preview
}

// passState is what one pass over the items decides by: the filters of the
// resources the target serves then (the second pass sees the CRDs the
// first restored), and which resources it said it skips.
type passState struct {
	filter       *items.Filter
	statusFilter *items.Filter
	// excluded is the restore's excludedResources alone (every scope):
	// what a restore for a user asks of the snapshot contents it takes
	// with the VolumeSnapshots it restores (snapshots.go).
	excluded *items.Filter
	byGR     map[string]items.Resource
	// counting: the first pass, which counts every item the restore
	// takes and says nothing of those it leaves to the second.
	counting bool
	skipped  map[string]bool
}

// counter is a restore's progress.
type counter struct {
	total, restored atomic.Int64
	// The VM disk restores (vms.go), Velero's restore item operations.
	opsAttempted, opsCompleted, opsFailed atomic.Int64
}

// operations writes the item operation counts into s.
func (c *counter) operations(s *velerov1.RestoreStatus) {
	s.RestoreItemOperationsAttempted = int(c.opsAttempted.Load())
	s.RestoreItemOperationsCompleted = int(c.opsCompleted.Load())
	s.RestoreItemOperationsFailed = int(c.opsFailed.Load())
}

// progress is what a running restore reports.
type progress struct {
	items                        velerov1.RestoreProgress
	errors, warnings             int
	attempted, completed, failed int64
}

// reportProgress writes the progress every ProgressInterval until done.
func (run *restoreRun) reportProgress(ctx context.Context, done <-chan struct{}) {
	c, r, count, log := run.c, run.r, run.count, run.log
	status.Report(ctx, ProgressInterval, done, func() progress {
		errs, warns := log.Counts()
		return progress{velerov1.RestoreProgress{TotalItems: int(count.total.Load()), ItemsRestored: int(count.restored.Load())}, errs, warns,
			count.opsAttempted.Load(), count.opsCompleted.Load(), count.opsFailed.Load()}
	}, func(p progress) error {
		return c.updateStatus(ctx, r, func(s *velerov1.RestoreStatus) {
			s.Progress = &p.items
			s.Errors, s.Warnings = p.errors, p.warnings
			s.RestoreItemOperationsAttempted, s.RestoreItemOperationsCompleted, s.RestoreItemOperationsFailed = int(p.attempted), int(p.completed), int(p.failed)
		})
	})
}

// start runs the restore, at its turn in the queue, in a goroutine the
// engine tracks (Run waits for it): the loop is free meanwhile, and deleting the Restore stops the run
// (cancelRunning) instead of waiting for its end.
func (c *Controller) start(ctx context.Context, r *velerov1.Restore, backup *velerov1.Backup, mods *resourcemodifiers.Modifiers, turn candidate) {
	work, cancel := context.WithCancelCause(ctx)
	run := &restoreRun{c: c, r: r, backup: backup, modifiers: mods, count: &counter{}, namespaces: map[string]bool{}, cancel: cancel}
	if r.Spec.Preview {
		// Kept in the stored Restore: its objects shown within less.
		run.preview = &preview{objectLimit: storedPreviewObjectBytes}
	}
	run.entry = turn.entry
	c.mu.Lock()
	c.running[r.UID] = run
	c.mu.Unlock()
	klog.FromContext(ctx).V(2).Info("Restore started", "restore", klog.KObj(r), "writes", turn.f.String())
	c.runs.Add(1)
	go func() {
		defer c.runs.Done()
		defer cancel(nil)
		run.execute(ctx, work)
		c.mu.Lock()
		delete(c.running, r.UID)
		c.mu.Unlock()
		// The restore again (deleted meanwhile: its data goes), and those
		// that waited for it.
		c.Add(cache.MetaObjectToName(r))
		c.addWaiting()
	}()
}

// execute restores the items, with work (ctx, or less when the restore is
// deleted); the status, written with ctx, ends Completed, PartiallyFailed
// or Failed.
func (run *restoreRun) execute(ctx, work context.Context) {
	c, r, backup := run.c, run.r, run.backup
	logger := klog.FromContext(ctx).WithValues("restore", klog.KObj(r), "backup", backup.Name)
	log, err := items.NewLog(c.cfg.ScratchDir, c.cfg.Clock, logger, "restore", r.Namespace+"/"+r.Name)
	if err != nil {
		run.finish(ctx, velerov1.RestorePhaseFailed, err.Error())
		return
	}
	defer log.Close()
	// Closed after the log is stored: its readers go on there.
	live := c.cfg.LiveLogs.Start(livelog.Key{Kind: string(velerov1.DownloadTargetKindRestoreLog), Namespace: r.Namespace, Name: r.Name})
	defer live.Close()
	log.Tee(live)
	run.log = log
	if run.target, run.as, err = c.targetOf(r); err != nil {
		run.finish(ctx, velerov1.RestorePhaseFailed, err.Error())
		return
	}
	run.target = run.writes(run.target)
	log.Info("Restore started", "backup", backup.Name)
	if run.preview != nil {
		log.Info("A preview (spec.preview): every write is a server-side dry run; nothing is written, the lines below say what would be")
	}
	if reason := run.asTenant(); reason != "" {
		run.finish(ctx, velerov1.RestorePhaseFailed, reason)
		return
	}
	if err := run.openLocation(work); err != nil {
		run.finish(ctx, velerov1.RestorePhaseFailed, err.Error())
		return
	}
	done := make(chan struct{})
	go run.reportProgress(ctx, done)
	restoreCtx, cancel := work, context.CancelFunc(func() {})
	if d := c.cfg.Limits.Duration; d > 0 {
		restoreCtx, cancel = context.WithTimeoutCause(work, d, fmt.Errorf("%w: it ran longer than %s (--restore-timeout)", errLimit, d))
	}
	err = run.restore(restoreCtx)
	if cause := context.Cause(restoreCtx); ctx.Err() == nil && (errors.Is(cause, errLimit) || errors.Is(cause, errDeleted)) {
		err = cause
	}
	cancel()
	close(done)
	switch {
	case ctx.Err() != nil:
		logger.Info("Server stopping: the restore will be failed at the next start")
	case errors.Is(err, errDeleted):
		run.finish(ctx, velerov1.RestorePhaseFailed, velerov1.RestoreDeletedReason)
	case err != nil:
		run.finish(ctx, velerov1.RestorePhaseFailed, err.Error())
	default:
		phase := velerov1.RestorePhaseCompleted
		if errs, _ := log.Counts(); errs > 0 {
			phase = velerov1.RestorePhasePartiallyFailed
		}
		restored := int(run.count.restored.Load())
		log.Info("Restore completed", "phase", string(phase), "itemsRestored", restored)
		var preview *velerov1.RestorePreview
		if run.preview != nil {
			preview = run.preview.result(log)
		}
		run.finish(ctx, phase, "", func(s *velerov1.RestoreStatus) {
			s.Progress = &velerov1.RestoreProgress{TotalItems: int(run.count.total.Load()), ItemsRestored: restored}
			run.count.operations(s)
			s.Preview = preview
		})
	}
}

// openLocation opens the storage location of the restore's backup.
func (run *restoreRun) openLocation(ctx context.Context) error {
	name := run.backup.Spec.StorageLocation
	bsl, err := run.c.locations.BackupStorageLocations(run.r.Namespace).Get(name)
	if err != nil {
		return fmt.Errorf("storage location %q: %w", name, err)
	}
	run.store, run.layout, err = run.c.cfg.Opener.Open(ctx, bsl)
	return err
}

// readVolumes reads the backup's volume info file (none: nil; a backup
// written before Velero v1.14 has none).
func (run *restoreRun) readVolumes(ctx context.Context) volumeinfo.Index {
	key, _ := run.layout.Key(velerov1.DownloadTargetKindBackupVolumeInfos, run.backup.Name)
	data, err := objectstore.GetGzip(ctx, run.store, key, volumeinfo.MaxSize)
	if errors.Is(err, objectstore.ErrNotFound) {
		return nil
	}
	if err == nil {
		var list []volumeinfo.BackupVolumeInfo
		if list, err = volumeinfo.Decode(data); err == nil {
			return volumeinfo.NewIndex(list)
		}
	}
	run.log.Warning("", items.ScopeVelero, fmt.Sprintf("reading the backup's volume info: %v", err))
	return nil
}

// restore reads the tarball twice: namespaces and CRDs, then the rest.
func (run *restoreRun) restore(ctx context.Context) error {
	c, r, backup, store, layout, log, progress := run.c, run.r, run.backup, run.store, run.layout, run.log, run.count
	tarKey, _ := layout.Key(velerov1.DownloadTargetKindBackupContents, backup.Name)
	spec := &velerov1.BackupSpec{
		IncludedNamespaces: r.Spec.IncludedNamespaces, ExcludedNamespaces: r.Spec.ExcludedNamespaces,
		IncludedResources: r.Spec.IncludedResources, ExcludedResources: r.Spec.ExcludedResources,
		IncludeClusterResources: r.Spec.IncludeClusterResources,
		LabelSelector:           r.Spec.LabelSelector, OrLabelSelectors: r.Spec.OrLabelSelectors,
	}
	run.volumes = run.readVolumes(ctx)
	pending, err := newSpool(c.cfg.ScratchDir, c.cfg.ScratchBudget)
	if err != nil {
		return err
	}
	pending.maxBytes = c.cfg.Limits.ScratchBytes
	defer pending.close()
	// What the restore can never take is not spooled: items of namespaces
	// it does not restore, cluster-scoped items when it takes none.
	nsFilter, err := items.NewFilter(&velerov1.BackupSpec{IncludedNamespaces: r.Spec.IncludedNamespaces, ExcludedNamespaces: r.Spec.ExcludedNamespaces}, nil)
	if err != nil {
		return err
	}
	noClusterItems := r.Spec.IncludeClusterResources != nil && !*r.Spec.IncludeClusterResources
	spooled := func(it *archive.Item) bool {
		if it.Namespace == "" {
			return !noClusterItems || run.forUser() && it.GroupResource == snapshotContentsGR
		}
		return nsFilter.IncludesNamespace(it.Namespace)
	}
	var resources []items.Resource
	for pass := 0; pass < 2; pass++ {
		if pass == 1 && run.preview == nil {
			// The custom resources of the CRDs restored in the first pass
			// are served once those are Established (a preview restores
			// none: their custom resources are refused as not served).
			run.waitEstablished(ctx)
		}
		// Discovery again for the second pass: restored CRDs add resources.
		resources, err = c.cfg.Target.Resources(func(group, msg string) {
			log.Warning("", items.ScopeVelero, fmt.Sprintf("discovering API group %s: %s", group, msg))
		})
		if err != nil {
			return err
		}
		filter, err := items.NewFilter(spec, resources)
		if err != nil {
			return err
		}
		var statusFilter *items.Filter
		if rs := r.Spec.RestoreStatus; rs != nil {
			if statusFilter, err = items.NewFilter(&velerov1.BackupSpec{IncludedResources: rs.IncludedResources, ExcludedResources: rs.ExcludedResources,
				IncludeClusterResources: ptrTrue()}, resources); err != nil {
				return err
			}
		}
		byGR := make(map[string]items.Resource, len(resources))
		for _, res := range resources {
			byGR[res.GroupResource()] = res
		}
		excluded, err := items.NewFilter(&velerov1.BackupSpec{ExcludedResources: r.Spec.ExcludedResources, IncludeClusterResources: ptrTrue()}, resources)
		if err != nil {
			return err
		}
		run.pass = passState{filter: filter, statusFilter: statusFilter, excluded: excluded, byGR: byGR, counting: pass == 0, skipped: map[string]bool{}}
		visit := func(it *archive.Item) error {
			if restoredFirst[it.GroupResource] != (pass == 0) {
				if pass == 0 && run.selected(it) {
					progress.total.Add(1)
				}
				return nil
			}
			if run.selected(it) {
				if pass == 0 {
					progress.total.Add(1)
				}
				run.restoreItem(ctx, it)
			}
			return ctx.Err()
		}
		if pass == 0 {
			// One read of the tarball: namespaces and CRDs restored, the
			// rest spooled for the second pass.
			err = c.readTarball(ctx, store, tarKey, log, func(it *archive.Item) error {
				if !restoredFirst[it.GroupResource] {
					if !spooled(it) {
						return nil
					}
					if err := pending.add(it); err != nil {
						return err
					}
				}
				return visit(it)
			})
		} else {
			err = pending.replay(ctx, restoreOrder(resources, pending.present()), c.cfg.ItemWorkers, visit)
		}
		if err != nil {
			return err
		}
	}
	if run.preview != nil {
		return run.previewVolumes(ctx, spec, resources)
	}
	run.relinkOwners(ctx, resources)
	if err := run.restoreVMs(ctx, spec, resources); err != nil {
		return err
	}
	if err := run.restoreMovedData(ctx); err != nil {
		return err
	}
	return ctx.Err()
}

func ptrTrue() *bool { t := true; return &t }

// readTarball calls fn for each preferred-version item of the tarball.
func (c *Controller) readTarball(ctx context.Context, store objectstore.Store, key string, log *items.Log, fn func(*archive.Item) error) error {
	rc, err := store.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("opening the backup tarball: %w", err)
	}
	defer rc.Close()
	ar, err := archive.NewReader(rc)
	if err != nil {
		return fmt.Errorf("reading the backup tarball: %w", err)
	}
	defer ar.Close()
	limits := c.cfg.Limits
	if limits.Items > 0 {
		// Each item has a copy per version, and a tarball some metadata.
		ar.Limits.Entries = 8*limits.Items + 1024
	}
	ar.Limits.Bytes = limits.Bytes
	ar.Skipped = func(name, why string) {
		log.Warning("", items.ScopeVelero, fmt.Sprintf("backup tarball entry %q skipped: %s", name, why))
	}
	var n int64
	for {
		it, err := ar.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if errors.Is(err, archive.ErrLimit) {
			return fmt.Errorf("%w: reading the backup tarball: %v (--restore-max-items, --restore-max-bytes)", errLimit, err)
		}
		if err != nil {
			return fmt.Errorf("reading the backup tarball: %w", err)
		}
		if n++; limits.Items > 0 && n > limits.Items {
			return fmt.Errorf("%w: the backup tarball holds more than %d items (--restore-max-items)", errLimit, limits.Items)
		}
		if !it.Preferred {
			continue
		}
		if err := fn(it); err != nil {
			return err
		}
	}
}

// finish uploads the log and results (when there is a location) and
// writes the final status.
func (run *restoreRun) finish(ctx context.Context, phase velerov1.RestorePhase, reason string, more ...func(*velerov1.RestoreStatus)) {
	c, r, log := run.c, run.r, run.log
	logger := klog.FromContext(ctx).WithValues("restore", klog.KObj(r))
	errs, warns := 0, 0
	if reason != "" {
		errs = 1
	}
	if log != nil {
		if reason != "" {
			log.Error("", items.ScopeVelero, "Restore failed: "+reason)
		}
		errs, warns = log.Counts()
		if run.store != nil {
			if err := uploadRecords(ctx, run.store, run.layout, r.Name, log); err != nil {
				logger.Error(err, "Uploading the restore's log and results")
			}
		}
	}
	now := metav1.NewTime(c.cfg.Clock.Now())
	if err := c.updateStatus(ctx, r, func(s *velerov1.RestoreStatus) {
		s.Phase = phase
		s.FailureReason = reason
		s.CompletionTimestamp = &now
		s.Errors, s.Warnings = errs, warns
		for _, m := range more {
			m(s)
		}
	}); err != nil {
		logger.Error(err, "Finishing restore")
		return
	}
	logger.Info("Restore finished", "phase", phase, "reason", reason, "errors", errs, "warnings", warns)
}

func uploadRecords(ctx context.Context, store objectstore.Store, layout objectstore.Layout, name string, log *items.Log) error {
	results, err := log.Results()
	if err != nil {
		return err
	}
	key, _ := layout.Key(velerov1.DownloadTargetKindRestoreResults, name)
	if err := objectstore.PutGzip(ctx, store, key, results); err != nil {
		return err
	}
	rd, err := log.Finish()
	if err != nil {
		return err
	}
	key, _ = layout.Key(velerov1.DownloadTargetKindRestoreLog, name)
	if err := store.Put(ctx, key, rd); err != nil {
		return fmt.Errorf("uploading the restore log: %w", err)
	}
	return nil
}
