package backup

// One run of a backup, step by step: collection, async operations,
// finalization, cancellation, failure.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/archive"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/failpoint"
	"github.com/backstop-io/backstop/pkg/livelog"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// backupRun is the state of one run of a backup: what it writes to and
// counts. Its steps are its methods; a step that has not happened yet
// leaves its field nil (a backup failed before its location opened has no
// store).
type backupRun struct {
	c       *Controller
	b       *velerov1.Backup
	store   objectstore.Store
	layout  objectstore.Layout
	log     *items.Log
	counter *Counter
	ops     *operations
}

// execute runs a backup that is InProgress. ctx lives as long as the
// server; runCtx ends when the backup is cancelled or deleted.
func (c *Controller) execute(ctx, runCtx context.Context, b *velerov1.Backup) {
	logger := klog.FromContext(ctx).WithValues("backup", klog.KObj(b))
	r := &backupRun{c: c, b: b}
	log, err := items.NewLog(c.cfg.ScratchDir, c.cfg.Clock, logger, "backup", b.Namespace+"/"+b.Name)
	if err != nil {
		r.fail(ctx, err.Error())
		return
	}
	defer log.Close()
	// Closed after the log is stored: its readers go on there.
	live := c.cfg.LiveLogs.Start(livelog.Key{Kind: string(velerov1.DownloadTargetKindBackupLog), Namespace: b.Namespace, Name: b.Name})
	defer live.Close()
	log.Tee(live)
	r.log = log
	log.Info("Backup started", "storageLocation", b.Spec.StorageLocation)

	if r.store, r.layout, err = c.openStore(ctx, b); err != nil {
		r.store = nil
		r.fail(ctx, err.Error())
		return
	}
	r.counter = &Counter{}
	r.ops = newOperations(c.cfg.Actions, b, log, c.cfg.Clock)
	r.ops.afterStart = func() { c.cfg.Crash.Hit(failpoint.BackupOperationStarted) }
	progressDone := make(chan struct{})
	go r.reportProgress(ctx, progressDone)
	err = r.collect(runCtx)
	close(progressDone)
	if err == nil && runCtx.Err() == nil && len(r.ops.list) > 0 {
		err = r.waitForOperations(ctx, runCtx)
	}
	r.end(ctx, runCtx, err)
}

// end ends a run whose collection and wait returned err: stopped with the
// server (left for the next start), deleted, cancelled, failed or
// finalized.
func (r *backupRun) end(ctx, runCtx context.Context, err error) {
	c, b := r.c, r.b
	logger := klog.FromContext(ctx).WithValues("backup", klog.KObj(b))
	cause := context.Cause(runCtx)
	switch {
	case ctx.Err() != nil:
		logger.Info("Server stopping: the backup will be recovered at the next start")
	case errors.Is(cause, errDeleted):
		r.ops.cancelAll(ctx, "the backup was deleted")
		if err := deleteData(ctx, r.store, r.layout, b.Name, false); err != nil {
			logger.Error(err, "Deleting the data of a deleted backup")
		}
		// Failed, so that the deletion engine finishes it (the Backup
		// stays until its finalizer is removed).
		now := metav1.NewTime(c.cfg.Clock.Now())
		if _, err := c.updateStatus(ctx, b, func(s *velerov1.BackupStatus) {
			s.Phase, s.FailureReason, s.CompletionTimestamp = velerov1.BackupPhaseFailed, velerov1.BackupDeletedReason, &now
		}); err != nil && !status.Gone(err) {
			logger.Error(err, "Failing a deleted backup")
		}
		logger.Info("Backup deleted while running: stopped and its data removed")
	case errors.Is(cause, errCancelled):
		r.ops.cancelAll(ctx, velerov1.BackupCancelledReason)
		r.cancelled(ctx)
	case err != nil:
		r.ops.cancelAll(ctx, "the backup failed")
		r.fail(ctx, err.Error())
	default:
		r.finalize(ctx)
	}
}

// waitForOperations is the WaitingForPluginOperations phase: the item
// operations file is uploaded (a restart finds the operations there), then
// operations are polled until all have ended (completed, failed or timed
// out after spec.itemOperationTimeout) or runCtx ends.
func (r *backupRun) waitForOperations(ctx, runCtx context.Context) error {
	c, b, store, layout, log, counter, ops := r.c, r.b, r.store, r.layout, r.log, r.counter, r.ops
	done, _ := counter.Progress()
	phase := velerov1.BackupPhaseWaitingForPluginOperations
	if errs, _ := log.Counts(); errs > 0 {
		phase = velerov1.BackupPhaseWaitingForPluginOperationsPartiallyFailed
	}
	attempted, _, _ := ops.counts()
	if err := putOperations(ctx, store, layout, b.Name, ops); err != nil {
		return err
	}
	if _, err := c.updateStatus(ctx, b, func(s *velerov1.BackupStatus) {
		s.Phase = phase
		s.Progress = &velerov1.BackupProgress{ItemsBackedUp: done, TotalItems: done}
		s.BackupItemOperationsAttempted = attempted
	}); err != nil {
		return err
	}
	c.cfg.Crash.Hit(failpoint.BackupWaitingForOps)
	log.Info("Waiting for async operations", "operations", attempted)
	var timeout time.Duration
	if b.Spec.ItemOperationTimeout.Duration > 0 {
		timeout = b.Spec.ItemOperationTimeout.Duration
	}
	lastCompleted, lastFailed := 0, 0
	return ops.wait(runCtx, c.cfg.OperationSyncFrequency, timeout, func() {
		_, completed, failed := ops.counts()
		if completed == lastCompleted && failed == lastFailed {
			return
		}
		errs, warns := log.Counts()
		if _, err := c.updateStatus(ctx, b, func(s *velerov1.BackupStatus) {
			s.BackupItemOperationsCompleted, s.BackupItemOperationsFailed = completed, failed
			s.Errors, s.Warnings = errs, warns
			if errs > 0 && s.Phase == velerov1.BackupPhaseWaitingForPluginOperations {
				s.Phase = velerov1.BackupPhaseWaitingForPluginOperationsPartiallyFailed
			}
		}); err == nil {
			lastCompleted, lastFailed = completed, failed
		}
	})
}

// collect writes the tarball and the resource list.
func (r *backupRun) collect(ctx context.Context) error {
	c, b, store, layout, log, counter, ops := r.c, r.b, r.store, r.layout, r.log, r.counter, r.ops
	resources, err := c.cfg.Source.Resources(func(group, msg string) {
		log.Warning("", items.ScopeVelero, fmt.Sprintf("discovering API group %s: %s", group, msg))
	})
	if err != nil {
		return err
	}
	resources = withoutMade(resources, c.cfg.Actions)
	filter, err := items.NewFilter(&b.Spec, withDiscovered(resources, c.cfg.Actions))
	if err != nil {
		return err
	}
	list, err := newResourceList(c.cfg.ScratchDir)
	if err != nil {
		return err
	}
	defer list.close()

	tarKey, _ := layout.Key(velerov1.DownloadTargetKindBackupContents, b.Name)
	if err := putStreamed(ctx, store, tarKey, "the backup tarball", func(w io.Writer) error {
		aw, err := archive.NewWriter(w, c.cfg.Clock.Now())
		if err != nil {
			return err
		}
		col := &collector{source: c.cfg.Source, filter: filter, archive: aw, resources: list, log: log, counter: counter, operations: ops,
			written: func(n int64) {
				if n == 1 {
					c.cfg.Crash.Hit(failpoint.BackupMidCollection)
				}
			}}
		if err := col.run(ctx, resources); err != nil {
			return err
		}
		c.cfg.Crash.Hit(failpoint.BackupBeforeUpload)
		return aw.Close()
	}); err != nil {
		return err
	}
	c.cfg.Crash.Hit(failpoint.BackupAfterUpload)
	ops.discover(ctx, filter, c.cfg.Source.Has, func(r items.Resource) bool {
		return slices.ContainsFunc(resources, func(s items.Resource) bool { return s.GroupResource() == r.GroupResource() })
	})
	done, _ := counter.Progress()
	log.Info("Backed up items", "items", done)

	listed, err := list.finish()
	if err != nil {
		return err
	}
	listKey, _ := layout.Key(velerov1.DownloadTargetKindBackupResourceList, b.Name)
	if err := store.Put(ctx, listKey, listed); err != nil {
		return fmt.Errorf("uploading the resource list: %w", err)
	}
	return nil
}

// withDiscovered adds the resources of discovered items the source does not
// serve, so that filters can name them.
func withDiscovered(resources []items.Resource, actions []ItemAction) []items.Resource {
	out := resources
	for _, a := range actions {
		d, ok := a.(ItemDiscoverer)
		if !ok {
			continue
		}
		r := d.DiscoveredResource()
		if !slices.ContainsFunc(resources, func(s items.Resource) bool { return s.GroupResource() == r.GroupResource() }) {
			out = append(slices.Clip(out), r)
		}
	}
	return out
}

// withoutMade leaves out the resources actions make and back up themselves
// (ResourceMaker).
func withoutMade(resources []items.Resource, actions []ItemAction) []items.Resource {
	made := map[string]bool{}
	for _, a := range actions {
		if m, ok := a.(ResourceMaker); ok {
			for _, gr := range m.MadeResources() {
				made[gr] = true
			}
		}
	}
	if len(made) == 0 {
		return resources
	}
	return slices.DeleteFunc(slices.Clone(resources), func(r items.Resource) bool { return made[r.GroupResource()] })
}

// progress is what a running backup reports.
type progress struct {
	done, total, errors, warnings int
}

// reportProgress writes the progress every ProgressInterval until done.
func (r *backupRun) reportProgress(ctx context.Context, done <-chan struct{}) {
	c, b, counter, log := r.c, r.b, r.counter, r.log
	status.Report(ctx, ProgressInterval, done, func() progress {
		d, total := counter.Progress()
		errs, warns := log.Counts()
		return progress{d, total, errs, warns}
	}, func(p progress) error {
		_, err := c.updateStatus(ctx, b, func(s *velerov1.BackupStatus) {
			s.Progress = &velerov1.BackupProgress{ItemsBackedUp: p.done, TotalItems: p.total}
			s.Errors, s.Warnings = p.errors, p.warnings
		})
		return err
	})
}

// finalize finishes the async operations (their items into the tarball,
// the volume info file), then writes the Finalizing status, releases what
// the operations made in the cluster, uploads the log, results and
// metadata and completes the backup.
func (r *backupRun) finalize(ctx context.Context) {
	c, b, log, counter, ops := r.c, r.b, r.log, r.counter, r.ops
	fin, err := r.finishOperations(ctx)
	if err == nil {
		err = r.putFinished(ctx, fin)
	}
	if err != nil {
		ops.cancelAll(ctx, "the backup failed")
		r.fail(ctx, err.Error())
		return
	}
	done, _ := counter.Progress()
	errs, warns := log.Counts()
	finalizing, final := velerov1.BackupPhaseFinalizing, velerov1.BackupPhaseCompleted
	if errs > 0 {
		finalizing, final = velerov1.BackupPhaseFinalizingPartiallyFailed, velerov1.BackupPhasePartiallyFailed
	}
	attempted, completed, failed := ops.counts()
	csiAttempted, csiCompleted := csiSnapshotCounts(fin.volumes)
	out, err := c.updateStatus(ctx, b, func(s *velerov1.BackupStatus) {
		s.Phase = finalizing
		s.Progress = &velerov1.BackupProgress{ItemsBackedUp: done, TotalItems: done}
		s.Errors, s.Warnings = errs, warns
		s.BackupItemOperationsAttempted, s.BackupItemOperationsCompleted, s.BackupItemOperationsFailed = attempted, completed, failed
		s.CSIVolumeSnapshotsAttempted, s.CSIVolumeSnapshotsCompleted = csiAttempted, csiCompleted
	})
	if err != nil {
		klog.FromContext(ctx).Error(err, "Finalizing backup", "backup", klog.KObj(b))
		return
	}
	c.cfg.Crash.Hit(failpoint.BackupFinalizing)
	releaseOperations(ctx, ops, b, log)
	log.Info("Backup completed", "phase", string(final), "items", done, "errors", errs, "warnings", warns)
	r.b = out
	if err := r.uploadRecords(ctx); err != nil {
		r.log = nil // its log is what failed to upload
		r.fail(ctx, err.Error())
		return
	}
	r.complete(ctx, final)
}

// complete writes velero-backup.json with the final status, then the
// manifest of every object (objectstore.Manifest); in a location with
// object lock it locks every object until the backup's expiration; then
// the status.
func (r *backupRun) complete(ctx context.Context, final velerov1.BackupPhase) {
	c, b, store, layout := r.c, r.b, r.store, r.layout
	now := metav1.NewTime(c.cfg.Clock.Now())
	done := b.DeepCopy()
	done.Status.Phase = final
	done.Status.CompletionTimestamp = &now
	locked := lockedCondition(store, b, now)
	if locked != nil {
		// In velero-backup.json too: a cluster that syncs the backup
		// knows it is locked.
		meta.SetStatusCondition(&done.Status.Conditions, *locked)
	}
	manifest, err := r.putFinal(ctx, done, locked != nil)
	if err == nil && locked != nil {
		// The manifest last: once it is locked, every object is.
		_, err = objectstore.RetainPrefix(ctx, store, layout.BackupDir(b.Name), b.Status.Expiration.Time, layout.ManifestKey(b.Name))
	}
	if err != nil {
		r.log = nil
		r.fail(ctx, err.Error())
		return
	}
	if _, err := c.updateStatus(ctx, b, func(s *velerov1.BackupStatus) {
		s.Phase = final
		s.CompletionTimestamp = &now
		s.SizeBytes = manifest.Size()
		if locked != nil {
			meta.SetStatusCondition(&s.Conditions, *locked)
		}
	}); err != nil {
		klog.FromContext(ctx).Error(err, "Completing backup", "backup", klog.KObj(b))
		return
	}
	klog.FromContext(ctx).Info("Backup finished", "backup", klog.KObj(b), "phase", final)
}

// uploadRecords uploads the results, the item operations and the log.
func (r *backupRun) uploadRecords(ctx context.Context) error {
	b, store, layout, log, ops := r.b, r.store, r.layout, r.log, r.ops
	results, err := log.Results()
	if err != nil {
		return err
	}
	operations, err := ops.json()
	if err != nil {
		return err
	}
	for kind, data := range map[velerov1.DownloadTargetKind][]byte{
		velerov1.DownloadTargetKindBackupResults:         results,
		velerov1.DownloadTargetKindBackupItemOperations:  operations,
		velerov1.DownloadTargetKindBackupVolumeSnapshots: []byte("[]"),
	} {
		if err := putGzip(ctx, store, layout, kind, b.Name, data); err != nil {
			return err
		}
	}
	return uploadLog(ctx, store, layout, b.Name, log)
}

// cancelled finishes a backup cancelled while running: FinalizingCancelled,
// data deleted but the log, Failed.
func (r *backupRun) cancelled(ctx context.Context) {
	c, b, store, layout, log, counter := r.c, r.b, r.store, r.layout, r.log, r.counter
	logger := klog.FromContext(ctx).WithValues("backup", klog.KObj(b))
	done, total := 0, 0
	if counter != nil {
		done, total = counter.Progress()
	}
	if _, err := c.updateStatus(ctx, b, func(s *velerov1.BackupStatus) {
		s.Phase = velerov1.BackupPhaseFinalizingCancelled
		s.Progress = &velerov1.BackupProgress{ItemsBackedUp: done, TotalItems: total}
	}); err != nil {
		logger.Error(err, "Cancelling backup")
		return
	}
	c.cfg.Crash.Hit(failpoint.BackupFinalizingCanceled)
	var problems []string
	if store != nil {
		if err := deleteData(ctx, store, layout, b.Name, true); err != nil {
			problems = append(problems, fmt.Sprintf("deleting the data of the cancelled backup: %v", err))
		}
		if log != nil {
			log.Info("Backup cancelled by user: its data was deleted, this log is kept", "itemsBackedUp", done)
			if err := uploadLog(ctx, store, layout, b.Name, log); err != nil {
				problems = append(problems, err.Error())
			}
		}
	}
	for _, p := range problems {
		logger.Error(errors.New(p), "Cancelling backup")
	}
	now := metav1.NewTime(c.cfg.Clock.Now())
	if _, err := c.updateStatus(ctx, b, func(s *velerov1.BackupStatus) {
		if ownEnd(s, velerov1.BackupCancelledReason, now) {
			// This write landed though it answered an error (sent again
			// from the backup as stored): its problems are counted.
			return
		}
		s.Phase = velerov1.BackupPhaseFailed
		s.FailureReason = velerov1.BackupCancelledReason
		s.CompletionTimestamp = &now
		s.Errors += len(problems)
	}); err != nil {
		logger.Error(err, "Cancelling backup")
		return
	}
	logger.Info("Backup cancelled", "itemsBackedUp", done)
}

// fail ends a backup Failed with reason; its log (when there is one) and
// metadata are uploaded so that `velero backup logs/describe` explain it.
func (r *backupRun) fail(ctx context.Context, reason string) {
	c, b, store, layout, log := r.c, r.b, r.store, r.layout, r.log
	logger := klog.FromContext(ctx).WithValues("backup", klog.KObj(b))
	now := metav1.NewTime(c.cfg.Clock.Now())
	errs := 1
	if log != nil {
		log.Error("", items.ScopeVelero, "Backup failed: "+reason)
		errs, _ = log.Counts()
	}
	if store != nil {
		if log != nil {
			if err := uploadLog(ctx, store, layout, b.Name, log); err != nil {
				logger.Error(err, "Uploading the log of a failed backup")
			}
		}
		failed := b.DeepCopy()
		failed.Status.Phase, failed.Status.FailureReason, failed.Status.CompletionTimestamp = velerov1.BackupPhaseFailed, reason, &now
		if err := putMetadata(ctx, store, layout, failed); err != nil {
			logger.Error(err, "Uploading the metadata of a failed backup")
		}
	}
	if _, err := c.updateStatus(ctx, b, func(s *velerov1.BackupStatus) {
		s.Phase = velerov1.BackupPhaseFailed
		s.FailureReason = reason
		s.CompletionTimestamp = &now
		s.Errors = errs
	}); err != nil {
		logger.Error(err, "Failing backup")
		return
	}
	logger.Info("Backup failed", "reason", reason)
}

// putFinal writes velero-backup.json (done), then the manifest. In a
// location with object lock (locked) a previous run of complete() that a
// restart interrupted may have locked them: a locked manifest means every
// object is locked and nothing is written again; a locked
// velero-backup.json is kept as it is (the manifest, written next, records
// it as it is).
// It returns the manifest (nil when a locked one cannot be read back).
func (r *backupRun) putFinal(ctx context.Context, done *velerov1.Backup, locked bool) (*objectstore.Manifest, error) {
	store, layout, name := r.store, r.layout, done.Name
	if l := objectstore.LockedStore(store); locked && l != nil {
		if mode, _, err := l.RetainedUntil(ctx, layout.ManifestKey(name)); err == nil && mode != "" {
			// Written and locked by an earlier attempt: done. Its size
			// is read back if it can be (unknown, 0, if not).
			manifest, err := objectstore.GetManifest(ctx, store, layout, name, objectstore.MaxManifestSize)
			if err != nil {
				klog.FromContext(ctx).Error(err, "Reading the locked manifest of a completed backup: its size is not known", "backup", klog.KObj(done))
			}
			return manifest, nil
		}
	}
	if err := putMetadata(ctx, store, layout, done); err != nil && !(locked && errors.Is(err, objectstore.ErrLocked)) {
		return nil, err
	}
	manifest, err := objectstore.MakeManifest(ctx, store, layout.BackupDir(name), name)
	if err != nil {
		return nil, err
	}
	if err := objectstore.PutManifest(ctx, store, layout, manifest); err != nil {
		return nil, err
	}
	if told := r.c.cfg.TarballSize; told != nil {
		tarKey, _ := layout.Key(velerov1.DownloadTargetKindBackupContents, name)
		for _, o := range manifest.Objects {
			if path.Join(layout.BackupDir(name), o.Name) == tarKey {
				told(done.Labels[velerov1.ScheduleNameLabel], o.Size)
			}
		}
	}
	return manifest, nil
}

// lockedCondition is the Locked condition of a backup that completes in a
// location with object lock (nil in another): its objects are locked until
// its expiration.
func lockedCondition(store objectstore.Store, b *velerov1.Backup, now metav1.Time) *metav1.Condition {
	l := objectstore.LockedStore(store)
	if l == nil || b.Status.Expiration == nil || !b.Status.Expiration.After(now.Add(velerov1.ObjectLockSkew)) {
		// An expired backup (its TTL shorter than its run) is not
		// locked: garbage collection deletes it now.
		return nil
	}
	return &metav1.Condition{Type: velerov1.BackupConditionLocked, Status: metav1.ConditionTrue, Reason: l.Mode,
		ObservedGeneration: b.Generation, LastTransitionTime: now,
		Message: fmt.Sprintf("every object of the backup's directory in its storage location is locked until %s (S3 object lock, %s): nobody can delete or rewrite it before then",
			b.Status.Expiration.UTC().Format(time.RFC3339), l.Mode)}
}
