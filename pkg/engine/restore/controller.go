// Package restore is the restore engine: a New Restore is validated (its
// backup, or the newest completed backup of its schedule, must have
// finished and its storage location must exist), goes InProgress, and the
// backup's tarball is streamed from the storage location into the target
// cluster (the backup source: this server standalone, the host cluster
// aggregated, or --source-kubeconfig) in two passes: namespaces and
// CustomResourceDefinitions first (the tarball read once, the other items
// spooled to disk), then, once those CRDs are Established, everything else
// in Velero's restore order (order.go). Velero's rules apply, and the
// restore item actions of pkg/engine/restoreaction: namespace and resource filters, label selectors,
// namespaceMapping, metadata reset, velero.io/backup-name and
// velero.io/restore-name labels, status restored only where restoreStatus
// asks, resources that are never restored (nodes, events, backups, ...),
// existingResourcePolicy for objects that already exist (none: a
// warning when they differ; update: they are updated to the backed-up
// version), a volume that outlived its claim freed for the restored claim,
// and owner references set last, to the owners in the target cluster
// (owners.go), and then the disks of the VMs the backup took are restored
// from their VM backups' chains (vms.go). The restore's log and results go beside the backup's data
// (restores/<name>/). Phases: New → InProgress → Completed, PartiallyFailed
// (some items failed) or Failed; FailedValidation. A restore running when
// the server stopped is Failed at the next start; one deleted while it
// runs is stopped and Failed.
//
// The files follow the engine's seams: controller.go decides (sync,
// validation, the queue's order, deleted restores), run.go runs one
// restore in a goroutine of its own (the passes over the tarball, progress,
// the end), item.go prepares and writes one item, namespaces.go waits for
// namespaces and CRDs, order.go orders and spools the items, owners.go
// sets owner references last, vms.go restores VM disks, tenant.go narrows
// an admin's restore of a tenant's backup.
package restore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/backstop-io/backstop/pkg/apis/restoreas"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/engine/queue"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	"github.com/backstop-io/backstop/pkg/engine/restoreaction"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/engine/vmhost"
	"github.com/backstop-io/backstop/pkg/failpoint"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	informers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v1"
	listers "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
	"github.com/backstop-io/backstop/pkg/livelog"
	"github.com/backstop-io/backstop/pkg/objectstore"
	"github.com/backstop-io/backstop/pkg/resourcemodifiers"
	"github.com/backstop-io/backstop/pkg/virt"
)

// Labels put on restored items, as Velero does.
const (
	BackupNameLabel   = "velero.io/backup-name"
	RestoreNameLabel  = "velero.io/restore-name"
	ScheduleNameLabel = "velero.io/schedule-name"
)

// ProgressInterval is how often a running restore's progress is written.
const ProgressInterval = time.Second

// Config is what the engine needs.
type Config struct {
	Client    versioned.Interface
	Restores  informers.RestoreInformer
	Backups   informers.BackupInformer
	Locations informers.BackupStorageLocationInformer
	// Target is the cluster restored into.
	Target items.Source
	// TargetAs is the target as a user (impersonated): restores that say
	// whom they restore for (restoreas.Annotation) write with that
	// user's rights. Nil: such restores fail.
	TargetAs   func(restoreas.User) (dynamic.Interface, error)
	Opener     objectstore.Opener
	Clock      clock.Clock
	ScratchDir string
	// ScratchBudget is shared by the restores and previews of the process
	// (nil: the scratch disk alone bounds them).
	ScratchBudget *ScratchBudget
	// LiveLogs keeps the logs of the restores running here, for the logs
	// subresource to serve while they run (nil: none kept).
	LiveLogs *livelog.Registry
	// Observers are told about the phase transitions the engine writes.
	Observers []status.Observer
	// Crash kills the server at a named point (crash-point tests).
	Crash failpoint.Set
	// Actions change or skip items before they are written (default:
	// restoreaction.Default()).
	Actions []restoreaction.Action
	// Virt is the libvirt connection VM disks are restored through, and
	// VolumeRoot where VM backups' files are (vms.go); nil or "": VM
	// disks are not restored, and a restore that takes VMs says so.
	Virt       func() (virt.Hypervisor, error)
	VolumeRoot string
	// VMBootDirs are where a VM defined anew may boot its kernel or
	// firmware from (nil: virt.DefaultBootDirs), and the libvirt networks
	// and bridges its interfaces may be on (nil: virt.DefaultNetworks).
	VMBootDirs, VMNetworks []string
	// VMLocks are shared with the VM backup engine: a VM's disks are
	// restored while no backup of it runs and its chain is not edited
	// (nil: not shared).
	VMLocks *vmhost.Locks
	// ItemWorkers is how many items of one resource a restore writes at
	// once (default DefaultItemWorkers); the client's rate limit holds
	// for them together.
	ItemWorkers int
	// Limits bound each restore (zero fields: no bound).
	Limits Limits
	// Concurrent is how many restores run at once at most (default
	// DefaultConcurrent); restores that overlap run one after the other
	// (footprint.go).
	Concurrent int
}

// DefaultItemWorkers is Config.ItemWorkers's default.
const DefaultItemWorkers = 8

// Limits bound what one restore may cost: a backup's tarball is input from
// a bucket, which others than the server may write (a tenant's own
// location). A restore past one of them fails with the limit in its
// reason, and the queue goes on.
type Limits struct {
	// Items is the most items the tarball may hold.
	Items int64
	// Bytes is the most bytes the tarball may hold, uncompressed.
	Bytes int64
	// ScratchBytes is the most bytes spooled on the scratch disk.
	ScratchBytes int64
	// Duration is the longest a restore may run.
	Duration time.Duration
}

// DefaultLimits are the limits of a restore unless the server is told
// otherwise (--restore-max-items, --restore-max-bytes,
// --restore-max-scratch-bytes, --restore-timeout).
var DefaultLimits = Limits{Items: 1_000_000, Bytes: 64 << 30, ScratchBytes: 16 << 30, Duration: 24 * time.Hour}

// errLimit is the error of a restore past one of its Limits.
var errLimit = errors.New("the restore is past its limit")

// errDeleted ends the run of a restore deleted while it runs.
var errDeleted = errors.New("the restore was deleted")

// Controller is the restore engine.
type Controller struct {
	*reconcile.Loop
	cfg       Config
	restores  listers.RestoreLister
	backups   listers.BackupLister
	locations listers.BackupStorageLocationLister
	synced    []cache.InformerSynced

	// mu guards running: the restores being run, by UID, at most
	// Config.Concurrent (footprint.go).
	mu      sync.Mutex
	running map[types.UID]*restoreRun
	// runs tracks the runs' goroutines: Run returns once they have ended.
	runs sync.WaitGroup

	// The sync loop's own (one worker): the namespaces of the queue's
	// entries, and the waiting restores' places in the queue.
	interner   *queue.Interner
	candidates map[types.UID]candidate
}

// New returns the engine.
func New(cfg Config) (*Controller, error) {
	if cfg.Actions == nil {
		cfg.Actions = restoreaction.Default()
	}
	if cfg.VMLocks == nil {
		cfg.VMLocks = vmhost.NewLocks()
	}
	if cfg.ItemWorkers < 1 {
		cfg.ItemWorkers = DefaultItemWorkers
	}
	if cfg.Concurrent < 1 {
		cfg.Concurrent = DefaultConcurrent
	}
	c := &Controller{cfg: cfg, restores: cfg.Restores.Lister(), backups: cfg.Backups.Lister(), locations: cfg.Locations.Lister(),
		running: map[types.UID]*restoreRun{}, interner: queue.NewInterner(), candidates: map[types.UID]candidate{}}
	c.Loop = reconcile.NewLoop("restore", c.sync)
	if err := c.Watch(cfg.Restores.Informer()); err != nil {
		return nil, err
	}
	c.WaitFor(cfg.Backups.Informer(), cfg.Locations.Informer())
	c.synced = []cache.InformerSynced{cfg.Restores.Informer().HasSynced, cfg.Backups.Informer().HasSynced, cfg.Locations.Informer().HasSynced}
	return c, nil
}

// Run fails the restores a previous process left running, then runs
// restores, several at once where they do not overlap (footprint.go),
// until ctx is done, and returns once the runs under way have stopped.
func (c *Controller) Run(ctx context.Context, _ int) {
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("controller", "restore"))
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return
	}
	if all, err := c.restores.List(labels.Everything()); err == nil {
		for _, r := range all {
			if r.Status.Phase == velerov1.RestorePhaseInProgress {
				(&restoreRun{c: c, r: r}).finish(ctx, velerov1.RestorePhaseFailed, velerov1.RestoreRestartedReason)
			}
		}
	}
	c.Loop.Run(ctx, 1)
	c.runs.Wait()
}

func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	r, err := c.restores.Restores(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if r.DeletionTimestamp != nil {
		if c.cancelRunning(r) {
			return nil // its run's end brings it back here
		}
		return c.finishDeleted(ctx, r)
	}
	if r.Status.Phase == velerov1.RestorePhaseInProgress && !c.isRunning(r.UID) {
		return c.settleOrphan(ctx, key)
	}
	if !r.Status.Phase.Pending() {
		return nil
	}
	r = r.DeepCopy()
	now := metav1.NewTime(c.cfg.Clock.Now())
	isNew := func(cur *velerov1.Restore) bool {
		return cur.Status.Phase.Pending()
	}
	// A restore that cannot run says so at once, wherever it is in the
	// queue.
	backup, problems := c.validate(r)
	var turn candidate
	if len(problems) == 0 {
		var ok bool
		if turn, ok = c.mayStart(ctx, r); !ok {
			// Its turn comes: a run's end brings every waiting restore
			// back here.
			return nil
		}
	}
	var mods *resourcemodifiers.Modifiers
	if len(problems) == 0 {
		var problem string
		if mods, problem, err = c.modifiersOf(ctx, r); err != nil {
			return err
		} else if problem != "" {
			problems = append(problems, problem)
		}
	}
	if len(problems) > 0 {
		_, err := c.statusOf(r.Namespace).Update(ctx, r, func(cur *velerov1.Restore) {
			if isNew(cur) {
				cur.Status.Phase = velerov1.RestorePhaseFailedValidation
				cur.Status.ValidationErrors = problems
				cur.Status.CompletionTimestamp = &now
			}
		})
		if err != nil && !status.Gone(err) {
			return err
		}
		return nil
	}
	if r.Spec.BackupName == "" {
		// From a schedule: record the backup chosen, as Velero does.
		r.Spec.BackupName = backup.Name
		if r, err = c.cfg.Client.VeleroV1().Restores(r.Namespace).Update(ctx, r, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("restore %s: recording backup %s: %w", key.Name, backup.Name, err)
		}
	}
	started := false
	r, err = c.statusOf(r.Namespace).Update(ctx, r, func(cur *velerov1.Restore) {
		if ownStart(cur, now) {
			// This write landed though it answered an error (a
			// transient failure, tried again): the restore is ours to
			// run.
			started = true
			return
		}
		if started = isNew(cur); started {
			cur.Status.Phase = velerov1.RestorePhaseInProgress
			cur.Status.StartTimestamp = &now
			cur.Status.Progress = &velerov1.RestoreProgress{}
		}
	})
	if status.Gone(err) || (err == nil && !started) {
		return nil
	}
	if err != nil {
		return err
	}
	c.cfg.Crash.Hit(failpoint.RestoreInProgress)
	c.start(ctx, r, backup, mods, turn)
	return nil
}

// mayStart reports whether r may start now, and its place in the queue
// (footprint.go); the other restores that may are synced again.
func (c *Controller) mayStart(ctx context.Context, r *velerov1.Restore) (candidate, bool) {
	var turn candidate
	ok := false
	for _, cd := range c.startable(ctx) {
		if cd.r.UID == r.UID {
			turn, ok = cd, true
			continue
		}
		c.Add(cache.MetaObjectToName(cd.r))
	}
	return turn, ok
}

// ownStart reports whether r is InProgress from this engine's start at
// now: only the engines' leader starts restores (a former leader's writes
// are fenced), and now is the start's own time.
func ownStart(r *velerov1.Restore, now metav1.Time) bool {
	return r.Status.Phase == velerov1.RestorePhaseInProgress && r.Status.CompletionTimestamp == nil && status.WrittenAt(r.Status.StartTimestamp, now)
}

// isRunning reports whether a run of this process has the restore of uid.
func (c *Controller) isRunning(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running[uid] != nil
}

// settleOrphan fails a restore the informer shows InProgress while no run
// of this process has it (sync holds its key: none starts meanwhile),
// decided on the restore as stored, which the informer may lag behind (a
// run that just wrote its end). What it had written stays, as for a
// restore the server stopped.
func (c *Controller) settleOrphan(ctx context.Context, key cache.ObjectName) error {
	r, err := c.cfg.Client.VeleroV1().Restores(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading restore %s: %w", key, err)
	}
	if r.Status.Phase != velerov1.RestorePhaseInProgress || c.isRunning(r.UID) {
		return nil
	}
	klog.FromContext(ctx).Info("Failing a restore no run has: its run stopped before it ended", "restore", klog.KObj(r))
	(&restoreRun{c: c, r: r}).finish(ctx, velerov1.RestorePhaseFailed, velerov1.RestoreInterruptedReason)
	return nil
}

// cancelRunning stops the run of r if r is running, and reports whether it
// was.
func (c *Controller) cancelRunning(r *velerov1.Restore) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	run := c.running[r.UID]
	if run == nil {
		return false
	}
	run.cancel(errDeleted)
	return true
}

// addWaiting syncs every restore waiting to run again.
func (c *Controller) addWaiting() {
	all, err := c.restores.List(labels.Everything())
	if err != nil {
		return
	}
	for _, r := range all {
		if r.Status.Phase.Pending() {
			c.Add(cache.MetaObjectToName(r))
		}
	}
}

// finishDeleted deletes a deleted restore's log and results from its
// backup's storage location, then removes RestoreDataFinalizer. (A
// restore deleted while it runs is stopped first, and finished here once
// its run has ended; one the server was running when it stopped was failed
// by Run first.) Without the backup or its location there is nothing to
// find: the backup's deletion deleted the restore's data.
func (c *Controller) finishDeleted(ctx context.Context, r *velerov1.Restore) error {
	if !reconcile.HasFinalizer(r, velerov1.RestoreDataFinalizer) {
		return nil
	}
	if b, err := c.backups.Backups(r.Namespace).Get(r.Spec.BackupName); err == nil {
		bsl, err := c.locations.BackupStorageLocations(r.Namespace).Get(b.Spec.StorageLocation)
		if err == nil && bsl.Spec.AccessMode != velerov1.BackupStorageLocationAccessModeReadOnly {
			store, layout, err := c.cfg.Opener.Open(ctx, bsl)
			if err != nil {
				return fmt.Errorf("deleting the data of deleted restore %s: %w", r.Name, err)
			}
			if err := objectstore.DeletePrefix(ctx, store, layout.RestoreDir(r.Name)); err != nil {
				return fmt.Errorf("deleting the data of deleted restore %s: %w", r.Name, err)
			}
		}
	}
	return reconcile.RemoveFinalizer(ctx, c.cfg.Client.VeleroV1().Restores(r.Namespace), r, velerov1.RestoreDataFinalizer, velerov1.EngineRestore)
}

// validate finds the restore's backup and says what keeps it from running.
func (c *Controller) validate(r *velerov1.Restore) (*velerov1.Backup, []string) {
	var backup *velerov1.Backup
	switch {
	case r.Spec.BackupName != "":
		b, err := c.backups.Backups(r.Namespace).Get(r.Spec.BackupName)
		if err != nil {
			return nil, []string{fmt.Sprintf("backup %q: %v", r.Spec.BackupName, notFoundText(err))}
		}
		backup = b
	case r.Spec.ScheduleName != "":
		all, err := c.backups.Backups(r.Namespace).List(labels.SelectorFromSet(labels.Set{ScheduleNameLabel: velerov1.LabelValue(r.Spec.ScheduleName)}))
		if err != nil {
			return nil, []string{err.Error()}
		}
		var done []*velerov1.Backup
		for _, b := range all {
			if b.Status.Phase == velerov1.BackupPhaseCompleted || b.Status.Phase == velerov1.BackupPhasePartiallyFailed {
				done = append(done, b)
			}
		}
		if len(done) == 0 {
			return nil, []string{fmt.Sprintf("schedule %q has no completed backup to restore from", r.Spec.ScheduleName)}
		}
		sort.Slice(done, func(i, j int) bool { return done[j].CreationTimestamp.Before(&done[i].CreationTimestamp) })
		backup = done[0]
	default:
		return nil, []string{"either backupName or scheduleName must be set"}
	}
	if p := backup.Status.Phase; !p.Restorable() {
		return nil, []string{fmt.Sprintf("backup %q is %s: only Completed or PartiallyFailed backups can be restored", backup.Name, phaseText(p))}
	}
	bsl, err := c.locations.BackupStorageLocations(r.Namespace).Get(backup.Spec.StorageLocation)
	if err != nil {
		return nil, []string{fmt.Sprintf("the storage location %q of backup %q: %v", backup.Spec.StorageLocation, backup.Name, notFoundText(err))}
	}
	if bsl.Status.Phase == velerov1.BackupStorageLocationPhaseUnavailable {
		msg := fmt.Sprintf("the storage location %q of backup %q is unavailable", bsl.Name, backup.Name)
		if bsl.Status.Message != "" {
			msg += ": " + bsl.Status.Message
		}
		return nil, []string{msg}
	}
	return backup, nil
}

func notFoundText(err error) string {
	if apierrors.IsNotFound(err) {
		return "not found"
	}
	return err.Error()
}

func phaseText(p velerov1.BackupPhase) string {
	if p == "" {
		return "New"
	}
	return string(p)
}

// targetOf is the client a restore writes with, and the user it acts as:
// the server's (""), or, for a restore made for a user (a tenant's
// NonAdminRestore), that user's.
func (c *Controller) targetOf(r *velerov1.Restore) (dynamic.Interface, string, error) {
	as, ok, err := restoreas.Of(r.Annotations)
	switch {
	case err != nil:
		return nil, "", err
	case !ok:
		return c.cfg.Target.Dynamic, "", nil
	case c.cfg.TargetAs == nil:
		return nil, "", fmt.Errorf("the restore is for user %q, and this server cannot act as a user", as.Username)
	}
	target, err := c.cfg.TargetAs(as)
	if err != nil {
		return nil, "", fmt.Errorf("acting as user %q: %w", as.Username, err)
	}
	return target, as.Username, nil
}

// statusOf is the engine's status writer for the restores of a namespace.
func (c *Controller) statusOf(namespace string) *status.ResourceWriter[velerov1.Restore, *velerov1.Restore] {
	return status.Writer{Engine: velerov1.EngineRestore, Observers: c.cfg.Observers}.Restores(c.cfg.Client, namespace)
}

func (c *Controller) updateStatus(ctx context.Context, r *velerov1.Restore, mutate func(*velerov1.RestoreStatus)) error {
	_, err := c.statusOf(r.Namespace).Update(ctx, r, func(cur *velerov1.Restore) { mutate(&cur.Status) })
	return err
}
