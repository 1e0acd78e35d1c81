// Package backup is the backup engine: it runs the backups the queue has
// made ReadyToStart. A run discovers the source cluster's resources,
// selects namespaces, resources and items with Velero's filter rules, and
// streams them into a tarball in Velero's layout straight into the
// backup's storage location (memory stays flat however many items there
// are), with the backup's log, results and resource list beside it.
//
// Phases: ReadyToStart → InProgress → Finalizing → Completed or
// PartiallyFailed (items that could not be read), or Failed (the tarball
// could not be written). A cancel (spec.cancel or backups/<name>/cancel)
// stops the item collection at the next item or request:
// FinalizingCancelled, the backup's data is deleted but its log, then
// Failed with "Backup cancelled by user". Deleting a running backup stops
// it and deletes its data. After a restart, a backup the server was
// running is failed with a reason and its partial data removed, one that
// was finalizing is finished: nothing stays InProgress.
package backup

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/archive"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/failpoint"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	informers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v1"
	listers "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// ProgressInterval is how often a running backup's progress is written.
const ProgressInterval = time.Second

var (
	errCancelled = errors.New(velerov1.BackupCancelledReason)
	errDeleted   = errors.New("the backup was deleted")
)

// Config is what the engine needs.
type Config struct {
	Client    versioned.Interface
	Backups   informers.BackupInformer
	Locations informers.BackupStorageLocationInformer
	// Source is the cluster backed up.
	Source items.Source
	// Opener opens storage locations.
	Opener objectstore.Opener
	Clock  clock.Clock
	// ScratchDir holds a running backup's log and resource list until
	// they are uploaded.
	ScratchDir string
	// Actions start async operations for the items they apply to.
	Actions []ItemAction
	// OperationSyncFrequency is how often running operations are polled
	// (default DefaultOperationSyncFrequency).
	OperationSyncFrequency time.Duration
	// Observers are told about the phase transitions the engine writes.
	Observers []status.Observer
	// Crash kills the server at a named point (crash-point tests).
	Crash failpoint.Set
}

// Controller is the backup engine.
type Controller struct {
	*reconcile.Loop
	cfg       Config
	backups   listers.BackupLister
	locations listers.BackupStorageLocationLister
	synced    []cache.InformerSynced

	mu      sync.Mutex
	running map[string]*run // by backup name
	wg      sync.WaitGroup
}

// statusOf is the engine's status writer for the backups of a namespace.
func (c *Controller) statusOf(namespace string) *status.ResourceWriter[velerov1.Backup, *velerov1.Backup] {
	return status.Writer{Engine: velerov1.EngineBackup, Observers: c.cfg.Observers}.Backups(c.cfg.Client, namespace)
}

// run is a backup being executed.
type run struct {
	uid    types.UID
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// New returns the engine.
func New(cfg Config) (*Controller, error) {
	if cfg.OperationSyncFrequency <= 0 {
		cfg.OperationSyncFrequency = DefaultOperationSyncFrequency
	}
	c := &Controller{cfg: cfg, backups: cfg.Backups.Lister(), locations: cfg.Locations.Lister(), running: map[string]*run{}}
	c.Loop = reconcile.NewLoop("backup", c.sync)
	if err := c.Watch(cfg.Backups.Informer()); err != nil {
		return nil, err
	}
	if _, err := cfg.Backups.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if name, err := cache.DeletionHandlingObjectToName(obj); err == nil {
			c.Add(name)
		}
	}}); err != nil {
		return nil, fmt.Errorf("backup engine: watching deletions: %w", err)
	}
	c.WaitFor(cfg.Locations.Informer())
	c.synced = []cache.InformerSynced{cfg.Backups.Informer().HasSynced, cfg.Locations.Informer().HasSynced}
	return c, nil
}

// Run recovers the backups a previous process left running, then runs
// backups until ctx is done. Backups still running then are left as they
// are, for the next start to recover.
func (c *Controller) Run(ctx context.Context, workers int) {
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("controller", "backup"))
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return
	}
	c.recover(ctx)
	c.Loop.Run(ctx, workers)
	c.wg.Wait()
}

func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	b, err := c.backups.Backups(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.stop(key.Name, "", errDeleted)
		return nil
	}
	if err != nil {
		return err
	}
	c.mu.Lock()
	r := c.running[b.Name]
	c.mu.Unlock()
	if r != nil {
		switch {
		case r.uid != b.UID:
			// Deleted and created again: stop the old one; the new one
			// starts once it has stopped.
			r.cancel(errDeleted)
			go func() { <-r.done; c.Add(key) }()
		case b.DeletionTimestamp != nil:
			r.cancel(errDeleted)
		case b.Spec.Cancel:
			r.cancel(errCancelled)
		}
		return nil
	}
	if b.Status.Phase == velerov1.BackupPhaseReadyToStart && !b.Spec.Cancel {
		// (A cancelled backup that has not started is the queue's.)
		return c.start(ctx, b)
	}
	return nil
}

// stop cancels the run of a backup (of any UID when uid is "").
func (c *Controller) stop(name string, uid types.UID, cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.running[name]; r != nil && (uid == "" || r.uid == uid) {
		r.cancel(cause)
	}
}

// start moves a ReadyToStart backup to InProgress and runs it.
func (c *Controller) start(ctx context.Context, b *velerov1.Backup) error {
	logger := klog.FromContext(ctx).WithValues("backup", klog.KObj(b))
	now := metav1.NewTime(c.cfg.Clock.Now())
	// Decided on the stored backup: one cancelled or moved meanwhile is
	// left to the next event.
	startable := func(cur *velerov1.Backup) bool {
		return cur.Status.Phase == velerov1.BackupPhaseReadyToStart && !cur.Spec.Cancel && cur.DeletionTimestamp == nil
	}
	if problems := c.validate(b); len(problems) > 0 {
		_, err := c.statusOf(b.Namespace).Update(ctx, b, func(cur *velerov1.Backup) {
			if startable(cur) {
				cur.Status.Phase = velerov1.BackupPhaseFailedValidation
				cur.Status.ValidationErrors = problems
				cur.Status.CompletionTimestamp = &now
			}
		})
		if err != nil && !status.Gone(err) {
			return err
		}
		logger.Info("Backup failed validation", "errors", problems)
		return nil
	}
	started := false
	out, err := c.statusOf(b.Namespace).Update(ctx, b, func(cur *velerov1.Backup) {
		if started = startable(cur); !started {
			return
		}
		cur.Status.Phase = velerov1.BackupPhaseInProgress
		cur.Status.StartTimestamp = &now
		expiration := metav1.NewTime(now.Add(cur.Spec.TTL.Duration))
		cur.Status.Expiration = &expiration
		cur.Status.FormatVersion = archive.FormatVersion
		cur.Status.Version = 1
		cur.Status.Progress = &velerov1.BackupProgress{}
	})
	if status.Gone(err) || (err == nil && !started) {
		return nil // cancelled or changed meanwhile: the next event decides
	}
	if err != nil {
		return err
	}
	c.cfg.Crash.Hit(failpoint.BackupInProgress)
	waited := ""
	if queued := b.CreationTimestamp; !queued.IsZero() {
		waited = now.Sub(queued.Time).Round(time.Millisecond).String()
	}
	logger.Info("Backup started", "waited", waited)

	runCtx, cancel := context.WithCancelCause(ctx)
	r := &run{uid: out.UID, cancel: cancel, done: make(chan struct{})}
	c.mu.Lock()
	c.running[out.Name] = r
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(r.done)
		defer func() {
			c.mu.Lock()
			delete(c.running, out.Name)
			c.mu.Unlock()
			cancel(nil)
		}()
		c.execute(ctx, runCtx, out)
	}()
	return nil
}

// validate returns what keeps a backup from running at all.
func (c *Controller) validate(b *velerov1.Backup) []string {
	if b.Spec.StorageLocation == "" {
		return []string{"no storage location: the backup names none and there is no default backup storage location"}
	}
	l, err := c.locations.BackupStorageLocations(b.Namespace).Get(b.Spec.StorageLocation)
	if apierrors.IsNotFound(err) {
		return []string{fmt.Sprintf("backup storage location %q does not exist", b.Spec.StorageLocation)}
	}
	if err != nil {
		return []string{fmt.Sprintf("backup storage location %q: %v", b.Spec.StorageLocation, err)}
	}
	if l.Spec.AccessMode == velerov1.BackupStorageLocationAccessModeReadOnly {
		return []string{fmt.Sprintf("backup storage location %q is read-only", l.Name)}
	}
	if l.Status.Phase == velerov1.BackupStorageLocationPhaseUnavailable {
		// As Velero; a location not checked yet is tried.
		return []string{unavailable(l)}
	}
	return nil
}

// unavailable says why a location is unavailable.
func unavailable(l *velerov1.BackupStorageLocation) string {
	msg := fmt.Sprintf("backup storage location %q is unavailable", l.Name)
	if l.Status.Message != "" {
		msg += ": " + l.Status.Message
	}
	return msg
}

// openStore opens the backup's storage location.
func (c *Controller) openStore(ctx context.Context, b *velerov1.Backup) (objectstore.Store, objectstore.Layout, error) {
	l, err := c.locations.BackupStorageLocations(b.Namespace).Get(b.Spec.StorageLocation)
	if err != nil {
		return nil, objectstore.Layout{}, fmt.Errorf("backup storage location %q: %w", b.Spec.StorageLocation, err)
	}
	return c.cfg.Opener.Open(ctx, l)
}

// execute runs a backup that is InProgress. ctx lives as long as the
// server; runCtx ends when the backup is cancelled or deleted.
func (c *Controller) execute(ctx, runCtx context.Context, b *velerov1.Backup) {
	logger := klog.FromContext(ctx).WithValues("backup", klog.KObj(b))
	log, err := items.NewLog(c.cfg.ScratchDir, c.cfg.Clock, logger, "backup", b.Namespace+"/"+b.Name)
	if err != nil {
		c.fail(ctx, b, nil, objectstore.Layout{}, nil, err.Error())
		return
	}
	defer log.Close()
	log.Info("Backup started", "storageLocation", b.Spec.StorageLocation)

	store, layout, err := c.openStore(ctx, b)
	if err != nil {
		c.fail(ctx, b, nil, layout, log, err.Error())
		return
	}
	counter := &Counter{}
	ops := newOperations(c.cfg.Actions, b, log, c.cfg.Clock)
	progressDone := make(chan struct{})
	go c.reportProgress(ctx, b, counter, log, progressDone)
	err = c.collect(runCtx, b, store, layout, log, counter, ops)
	close(progressDone)
	if err == nil && runCtx.Err() == nil && len(ops.list) > 0 {
		err = c.waitForOperations(ctx, runCtx, b, store, layout, log, counter, ops)
	}

	cause := context.Cause(runCtx)
	switch {
	case ctx.Err() != nil:
		logger.Info("Server stopping: the backup will be recovered at the next start")
	case errors.Is(cause, errDeleted):
		ops.cancelAll(ctx, "the backup was deleted")
		if err := deleteData(ctx, store, layout, b.Name, false); err != nil {
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
		ops.cancelAll(ctx, velerov1.BackupCancelledReason)
		c.cancelled(ctx, b, store, layout, log, counter)
	case err != nil:
		ops.cancelAll(ctx, "the backup failed")
		c.fail(ctx, b, store, layout, log, err.Error())
	default:
		c.finalize(ctx, b, store, layout, log, counter, ops)
	}
}

// waitForOperations is the WaitingForPluginOperations phase: the item
// operations file is uploaded (a restart finds the operations there), then
// operations are polled until all have ended (completed, failed or timed
// out after spec.itemOperationTimeout) or runCtx ends.
func (c *Controller) waitForOperations(ctx, runCtx context.Context, b *velerov1.Backup, store objectstore.Store, layout objectstore.Layout, log *items.Log, counter *Counter, ops *operations) error {
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

// putOperations uploads the item operations file.
func putOperations(ctx context.Context, store objectstore.Store, layout objectstore.Layout, name string, ops *operations) error {
	data, err := ops.json()
	if err != nil {
		return err
	}
	return putGzip(ctx, store, layout, velerov1.DownloadTargetKindBackupItemOperations, name, data)
}

// collect writes the tarball and the resource list.
func (c *Controller) collect(ctx context.Context, b *velerov1.Backup, store objectstore.Store, layout objectstore.Layout, log *items.Log, counter *Counter, ops *operations) error {
	resources, err := c.cfg.Source.Resources(func(group, msg string) {
		log.Warning("", items.ScopeVelero, fmt.Sprintf("discovering API group %s: %s", group, msg))
	})
	if err != nil {
		return err
	}
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
	pr, pw := io.Pipe()
	uploaded := make(chan error, 1)
	go func() {
		err := store.Put(ctx, tarKey, pr)
		_ = pr.CloseWithError(fmt.Errorf("upload ended: %v", err))
		uploaded <- err
	}()
	aw, err := archive.NewWriter(pw, c.cfg.Clock.Now())
	if err == nil {
		col := &collector{source: c.cfg.Source, filter: filter, archive: aw, resources: list, log: log, counter: counter, operations: ops,
			written: func(n int64) {
				if n == 1 {
					c.cfg.Crash.Hit(failpoint.BackupMidCollection)
				}
			}}
		err = col.run(ctx, resources)
		if err == nil {
			c.cfg.Crash.Hit(failpoint.BackupBeforeUpload)
			err = aw.Close()
		}
	}
	if err != nil {
		_ = pw.CloseWithError(err)
		<-uploaded
		return err
	}
	_ = pw.Close()
	if err := <-uploaded; err != nil {
		return fmt.Errorf("uploading the backup tarball: %w", err)
	}
	c.cfg.Crash.Hit(failpoint.BackupAfterUpload)
	ops.discover(ctx, filter)
	done, _ := counter.Progress()
	log.Info("Backed up items", "items", done)

	r, err := list.finish()
	if err != nil {
		return err
	}
	listKey, _ := layout.Key(velerov1.DownloadTargetKindBackupResourceList, b.Name)
	if err := store.Put(ctx, listKey, r); err != nil {
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

// progress is what a running backup reports.
type progress struct {
	done, total, errors, warnings int
}

// reportProgress writes the progress every ProgressInterval until done.
func (c *Controller) reportProgress(ctx context.Context, b *velerov1.Backup, counter *Counter, log *items.Log, done <-chan struct{}) {
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

// updateStatus applies mutate to the backup's current status through the
// engine's status writer.
func (c *Controller) updateStatus(ctx context.Context, b *velerov1.Backup, mutate func(*velerov1.BackupStatus)) (*velerov1.Backup, error) {
	return c.statusOf(b.Namespace).Update(ctx, b, func(cur *velerov1.Backup) { mutate(&cur.Status) })
}

// finalize uploads the log, results and metadata and completes the backup.
func (c *Controller) finalize(ctx context.Context, b *velerov1.Backup, store objectstore.Store, layout objectstore.Layout, log *items.Log, counter *Counter, ops *operations) {
	done, _ := counter.Progress()
	errs, warns := log.Counts()
	finalizing, final := velerov1.BackupPhaseFinalizing, velerov1.BackupPhaseCompleted
	if errs > 0 {
		finalizing, final = velerov1.BackupPhaseFinalizingPartiallyFailed, velerov1.BackupPhasePartiallyFailed
	}
	attempted, completed, failed := ops.counts()
	out, err := c.updateStatus(ctx, b, func(s *velerov1.BackupStatus) {
		s.Phase = finalizing
		s.Progress = &velerov1.BackupProgress{ItemsBackedUp: done, TotalItems: done}
		s.Errors, s.Warnings = errs, warns
		s.BackupItemOperationsAttempted, s.BackupItemOperationsCompleted, s.BackupItemOperationsFailed = attempted, completed, failed
	})
	if err != nil {
		klog.FromContext(ctx).Error(err, "Finalizing backup", "backup", klog.KObj(b))
		return
	}
	c.cfg.Crash.Hit(failpoint.BackupFinalizing)
	log.Info("Backup completed", "phase", string(final), "items", done, "errors", errs, "warnings", warns)
	if err := c.uploadRecords(ctx, out, store, layout, log, ops); err != nil {
		c.fail(ctx, out, store, layout, nil, err.Error())
		return
	}
	c.complete(ctx, out, store, layout, final)
}

// complete writes velero-backup.json with the final status, then the status.
func (c *Controller) complete(ctx context.Context, b *velerov1.Backup, store objectstore.Store, layout objectstore.Layout, final velerov1.BackupPhase) {
	now := metav1.NewTime(c.cfg.Clock.Now())
	done := b.DeepCopy()
	done.Status.Phase = final
	done.Status.CompletionTimestamp = &now
	if err := putMetadata(ctx, store, layout, done); err != nil {
		c.fail(ctx, b, store, layout, nil, err.Error())
		return
	}
	if _, err := c.updateStatus(ctx, b, func(s *velerov1.BackupStatus) {
		s.Phase = final
		s.CompletionTimestamp = &now
	}); err != nil {
		klog.FromContext(ctx).Error(err, "Completing backup", "backup", klog.KObj(b))
		return
	}
	klog.FromContext(ctx).Info("Backup finished", "backup", klog.KObj(b), "phase", final)
}

// uploadRecords uploads the results, the item operations and the log.
func (c *Controller) uploadRecords(ctx context.Context, b *velerov1.Backup, store objectstore.Store, layout objectstore.Layout, log *items.Log, ops *operations) error {
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

func uploadLog(ctx context.Context, store objectstore.Store, layout objectstore.Layout, name string, log *items.Log) error {
	r, err := log.Finish()
	if err != nil {
		return err
	}
	key, _ := layout.Key(velerov1.DownloadTargetKindBackupLog, name)
	if err := store.Put(ctx, key, r); err != nil {
		return fmt.Errorf("uploading the backup log: %w", err)
	}
	return nil
}

func putGzip(ctx context.Context, store objectstore.Store, layout objectstore.Layout, kind velerov1.DownloadTargetKind, name string, data []byte) error {
	key, err := layout.Key(kind, name)
	if err != nil {
		return err
	}
	return objectstore.PutGzip(ctx, store, key, data)
}

// putMetadata writes velero-backup.json, the backup as Velero stores it.
func putMetadata(ctx context.Context, store objectstore.Store, layout objectstore.Layout, b *velerov1.Backup) error {
	b = b.DeepCopy()
	b.APIVersion, b.Kind = velerov1.SchemeGroupVersion.String(), "Backup"
	b.ManagedFields = nil
	data, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("encoding the backup metadata: %w", err)
	}
	if err := store.Put(ctx, layout.BackupMetadataKey(b.Name), bytes.NewReader(data)); err != nil {
		return fmt.Errorf("uploading the backup metadata: %w", err)
	}
	return nil
}

// deleteData removes a backup's objects, its log too unless keepLog.
func deleteData(ctx context.Context, store objectstore.Store, layout objectstore.Layout, name string, keepLog bool) error {
	var keep []string
	if keepLog {
		logKey, _ := layout.Key(velerov1.DownloadTargetKindBackupLog, name)
		keep = append(keep, logKey)
	}
	return objectstore.DeletePrefix(ctx, store, layout.BackupDir(name), keep...)
}

// cancelled finishes a backup cancelled while running: FinalizingCancelled,
// data deleted but the log, Failed.
func (c *Controller) cancelled(ctx context.Context, b *velerov1.Backup, store objectstore.Store, layout objectstore.Layout, log *items.Log, counter *Counter) {
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
func (c *Controller) fail(ctx context.Context, b *velerov1.Backup, store objectstore.Store, layout objectstore.Layout, log *items.Log, reason string) {
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

// recover settles the backups a previous process was running: nothing is
// running yet in this one.
func (c *Controller) recover(ctx context.Context) {
	all, err := c.backups.List(labels.Everything())
	if err != nil {
		return
	}
	for _, b := range all {
		logger := klog.FromContext(ctx).WithValues("backup", klog.KObj(b))
		switch b.Status.Phase {
		case velerov1.BackupPhaseInProgress, velerov1.BackupPhaseWaitingForPluginOperations,
			velerov1.BackupPhaseWaitingForPluginOperationsPartiallyFailed:
			store, layout, err := c.openStore(ctx, b)
			if err != nil {
				c.fail(ctx, b, nil, layout, nil, velerov1.BackupRestartedReason)
				continue
			}
			log, err := items.NewLog(c.cfg.ScratchDir, c.cfg.Clock, logger, "backup", b.Namespace+"/"+b.Name)
			if err != nil {
				log = nil
			}
			if b.Status.Phase != velerov1.BackupPhaseInProgress && log != nil {
				// Its async operations are in the item operations file.
				c.cancelRecordedOperations(ctx, b, store, layout, log)
			}
			if err := deleteData(ctx, store, layout, b.Name, false); err != nil {
				logger.Error(err, "Removing the partial data of an interrupted backup")
			}
			c.fail(ctx, b, store, layout, log, velerov1.BackupRestartedReason)
			if log != nil {
				log.Close()
			}
		case velerov1.BackupPhaseFinalizing, velerov1.BackupPhaseFinalizingPartiallyFailed:
			// The items were all written; what may be missing is the
			// metadata and the final status.
			store, layout, err := c.openStore(ctx, b)
			if err != nil {
				c.fail(ctx, b, nil, layout, nil, fmt.Sprintf("finishing the backup after a restart: %v", err))
				continue
			}
			tarKey, _ := layout.Key(velerov1.DownloadTargetKindBackupContents, b.Name)
			if r, err := store.Get(ctx, tarKey); err != nil {
				c.fail(ctx, b, store, layout, nil, fmt.Sprintf("finishing the backup after a restart: %v", err))
				continue
			} else {
				_ = r.Close()
			}
			final := velerov1.BackupPhaseCompleted
			if b.Status.Phase == velerov1.BackupPhaseFinalizingPartiallyFailed {
				final = velerov1.BackupPhasePartiallyFailed
			}
			c.complete(ctx, b, store, layout, final)
		case velerov1.BackupPhaseFinalizingCancelled:
			if b.Status.StartTimestamp == nil {
				continue // cancelled before it started: the queue's
			}
			store, layout, err := c.openStore(ctx, b)
			if err != nil {
				store = nil
			}
			c.cancelled(ctx, b, store, layout, nil, nil)
		}
	}
}

// cancelRecordedOperations cancels the operations a backup interrupted by
// a restart was waiting for, as recorded in its item operations file.
func (c *Controller) cancelRecordedOperations(ctx context.Context, b *velerov1.Backup, store objectstore.Store, layout objectstore.Layout, log *items.Log) {
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
