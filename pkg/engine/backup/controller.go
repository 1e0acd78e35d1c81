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
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/archive"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	"github.com/backstop-io/backstop/pkg/engine/resourcepolicy"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/failpoint"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	informers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v1"
	listers "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
	"github.com/backstop-io/backstop/pkg/livelog"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// ProgressInterval is how often a running backup's progress is written.
const ProgressInterval = time.Second

// settleDelay is how long after a run ends its backup is looked at again,
// to settle it if the run's end was not written.
const settleDelay = 2 * time.Second

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
	// LiveLogs keeps the logs of the backups running here, for the logs
	// subresource to serve while they run (nil: none kept).
	LiveLogs *livelog.Registry
	// Actions start async operations for the items they apply to.
	Actions []ItemAction
	// OperationSyncFrequency is how often running operations are polled
	// (default DefaultOperationSyncFrequency).
	OperationSyncFrequency time.Duration
	// Observers are told about the phase transitions the engine writes.
	Observers []status.Observer
	// TarballSize is told the size of each completed backup's tarball, by
	// the backup's schedule ("" for none; nil: told nothing), from the
	// backup's manifest.
	TarballSize func(schedule string, bytes int64)
	// Crash kills the server at a named point (crash-point tests).
	Crash failpoint.Set
	// Policies reads the resource policies a backup names
	// (spec.resourcePolicy; nil: none can be read, a backup naming some
	// fails validation).
	Policies func(ctx context.Context, b *velerov1.Backup) (*resourcepolicy.Policies, error)
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
	if unsettled(b) {
		return c.settleOrphan(ctx, key)
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
	problems := c.validate(b)
	var policies *resourcepolicy.Policies
	if len(problems) == 0 && b.Spec.ResourcePolicy != nil {
		var err error
		if c.cfg.Policies == nil {
			err = errors.New("this server reads no resource policies")
		} else {
			policies, err = c.cfg.Policies(ctx, b)
		}
		if err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
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
		if ownStart(cur, now) {
			// This write landed though it answered an error (a
			// transient failure, tried again): the backup is ours to run.
			started = true
			return
		}
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

	c.launch(ctx, out, func(runCtx context.Context) context.Context { return resourcepolicy.NewContext(runCtx, policies) }, c.execute)
	return nil
}

// ownStart reports whether b is InProgress from this engine's start at
// now: only the engines' leader starts backups (a former leader's writes
// are fenced), and now is the start's own time.
func ownStart(b *velerov1.Backup, now metav1.Time) bool {
	return b.Status.Phase == velerov1.BackupPhaseInProgress && b.Status.CompletionTimestamp == nil && status.WrittenAt(b.Status.StartTimestamp, now)
}

// ownEnd reports whether a backup's status is the end Failed with reason
// this engine wrote at now (stored to the second).
func ownEnd(s *velerov1.BackupStatus, reason string, now metav1.Time) bool {
	return s.Phase == velerov1.BackupPhaseFailed && s.FailureReason == reason && status.WrittenAt(s.CompletionTimestamp, now)
}

// launch runs body as backup b's run, in the background: runCtx (made
// from ctx, then by wrap) ends when b is cancelled or deleted.
func (c *Controller) launch(ctx context.Context, b *velerov1.Backup, wrap func(context.Context) context.Context,
	body func(ctx, runCtx context.Context, b *velerov1.Backup)) {
	runCtx, cancel := context.WithCancelCause(ctx)
	if wrap != nil {
		runCtx = wrap(runCtx)
	}
	r := &run{uid: b.UID, cancel: cancel, done: make(chan struct{})}
	c.mu.Lock()
	c.running[b.Name] = r
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(r.done)
		defer func() {
			c.mu.Lock()
			delete(c.running, b.Name)
			c.mu.Unlock()
			cancel(nil)
			// A run whose end could not be written is settled then
			// (sync); by then the informer has seen the end of most.
			c.AddAfter(cache.ObjectName{Namespace: b.Namespace, Name: b.Name}, settleDelay)
		}()
		body(ctx, runCtx, b)
	}()
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

// openStore opens the backup's storage location, recording what the run
// writes there for its manifest (objectstore.Hashing).
func (c *Controller) openStore(ctx context.Context, b *velerov1.Backup) (objectstore.Store, objectstore.Layout, error) {
	l, err := c.locations.BackupStorageLocations(b.Namespace).Get(b.Spec.StorageLocation)
	if err != nil {
		return nil, objectstore.Layout{}, fmt.Errorf("backup storage location %q: %w", b.Spec.StorageLocation, err)
	}
	store, layout, err := c.cfg.Opener.Open(ctx, l)
	if err != nil {
		return nil, objectstore.Layout{}, err
	}
	return objectstore.NewHashing(store), layout, nil
}

// updateStatus applies mutate to the backup's current status through the
// engine's status writer.
func (c *Controller) updateStatus(ctx context.Context, b *velerov1.Backup, mutate func(*velerov1.BackupStatus)) (*velerov1.Backup, error) {
	return c.statusOf(b.Namespace).Update(ctx, b, func(cur *velerov1.Backup) { mutate(&cur.Status) })
}
