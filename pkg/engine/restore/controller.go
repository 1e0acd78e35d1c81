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
// the server stopped is Failed at the next start.
package restore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	"github.com/backstop-io/backstop/pkg/apis/restoreas"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/archive"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	"github.com/backstop-io/backstop/pkg/engine/restoreaction"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/engine/vmhost"
	"github.com/backstop-io/backstop/pkg/failpoint"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	informers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v1"
	listers "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
	"github.com/backstop-io/backstop/pkg/objectstore"
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

// nonRestorable are never restored: Velero's list, and the request
// objects whose restore would act again (delete a backup, ...).
var nonRestorable = map[string]bool{
	"nodes": true, "events": true, "events.events.k8s.io": true,
	"backups.velero.io": true, "restores.velero.io": true, "resticrepositories.velero.io": true,
	"csinodes.storage.k8s.io": true, "volumeattachments.storage.k8s.io": true, "backuprepositories.velero.io": true,
	"deletebackuprequests.velero.io": true, "downloadrequests.velero.io": true, "serverstatusrequests.velero.io": true,
}

// tenantKind reports whether a resource is one of the tenants' kinds
// (oadp.openshift.io): a restore for a user never restores them, whatever
// the backup holds: a NonAdminBackup or storage location restored by a
// tenant would be one it made without admission's record of who made it.
func tenantKind(groupResource string) bool {
	_, group, _ := strings.Cut(groupResource, ".")
	return group == oadpv1alpha1.GroupName
}

// restoredFirst are restored in a first pass, before what lives in them
// or is defined by them.
var restoredFirst = map[string]bool{"namespaces": true, crdGroupResource: true}

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

// Controller is the restore engine.
type Controller struct {
	*reconcile.Loop
	cfg       Config
	restores  listers.RestoreLister
	backups   listers.BackupLister
	locations listers.BackupStorageLocationLister
	synced    []cache.InformerSynced
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
	c := &Controller{cfg: cfg, restores: cfg.Restores.Lister(), backups: cfg.Backups.Lister(), locations: cfg.Locations.Lister()}
	c.Loop = reconcile.NewLoop("restore", c.sync)
	if err := c.Watch(cfg.Restores.Informer()); err != nil {
		return nil, err
	}
	c.WaitFor(cfg.Backups.Informer(), cfg.Locations.Informer())
	c.synced = []cache.InformerSynced{cfg.Restores.Informer().HasSynced, cfg.Backups.Informer().HasSynced, cfg.Locations.Informer().HasSynced}
	return c, nil
}

// Run fails the restores a previous process left running, then runs
// restores one at a time (as Velero does) until ctx is done.
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
		return c.finishDeleted(ctx, r)
	}
	if r.Status.Phase != "" && r.Status.Phase != velerov1.RestorePhaseNew {
		return nil
	}
	// Restores run in the order of the restore queue (the sequence the
	// registry gave each at creation, whose positions tenants read): the
	// first waiting one goes now, this one when its turn comes.
	if first := c.firstWaiting(r.Namespace); first != nil && first.Name != r.Name {
		c.Add(key)
		r = first
		key = cache.MetaObjectToName(first)
	}
	r = r.DeepCopy()
	now := metav1.NewTime(c.cfg.Clock.Now())
	isNew := func(cur *velerov1.Restore) bool {
		return cur.Status.Phase == "" || cur.Status.Phase == velerov1.RestorePhaseNew
	}
	backup, problems := c.validate(r)
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
	c.run(ctx, r, backup)
	return nil
}

// firstWaiting is the restore of namespace that runs next: of those
// waiting (phase New, not deleted), the one with the smallest queue
// sequence (one without sorts first, then by name).
func (c *Controller) firstWaiting(namespace string) *velerov1.Restore {
	all, err := c.restores.Restores(namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var first *velerov1.Restore
	var firstSeq int64
	for _, r := range all {
		if (r.Status.Phase != "" && r.Status.Phase != velerov1.RestorePhaseNew) || r.DeletionTimestamp != nil {
			continue
		}
		seq, _ := velerov1.QueueSequence(r)
		if first == nil || seq < firstSeq || (seq == firstSeq && r.Name < first.Name) {
			first, firstSeq = r, seq
		}
	}
	return first
}

// finishDeleted deletes a deleted restore's log and results from its
// backup's storage location, then removes RestoreDataFinalizer. (Restores
// run one at a time in sync: a restore deleted while it runs is finished
// here after it ended; one the server was running when it stopped was
// failed by Run first.) Without the backup or its location there is
// nothing to find: the backup's deletion deleted the restore's data.
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
		all, err := c.backups.Backups(r.Namespace).List(labels.SelectorFromSet(labels.Set{ScheduleNameLabel: r.Spec.ScheduleName}))
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

// run restores the items; the status ends Completed, PartiallyFailed or Failed.
// restoreRun is the state of one run of a restore; a step that has not
// happened yet leaves its field nil (a restore failed before its location
// opened has no store).
type restoreRun struct {
	c      *Controller
	r      *velerov1.Restore
	backup *velerov1.Backup
	store  objectstore.Store
	layout objectstore.Layout
	log    *items.Log
	count  *counter
	// namespaces are the target namespaces known to exist.
	namespaces map[string]bool
	// crds are the CustomResourceDefinitions of the first pass.
	crds []string
	// dependents are the items written without the owner references
	// they had (owners.go).
	dependents []dependent
	// target writes the items: the server's rights, or those of the user
	// the restore is for (as, "" for the server).
	target dynamic.Interface
	as     string
}

func (c *Controller) run(ctx context.Context, r *velerov1.Restore, backup *velerov1.Backup) {
	logger := klog.FromContext(ctx).WithValues("restore", klog.KObj(r), "backup", backup.Name)
	run := &restoreRun{c: c, r: r, backup: backup, count: &counter{}, namespaces: map[string]bool{}}
	log, err := items.NewLog(c.cfg.ScratchDir, c.cfg.Clock, logger, "restore", r.Namespace+"/"+r.Name)
	if err != nil {
		run.finish(ctx, velerov1.RestorePhaseFailed, err.Error())
		return
	}
	defer log.Close()
	run.log = log
	if run.target, run.as, err = c.targetOf(r); err != nil {
		run.finish(ctx, velerov1.RestorePhaseFailed, err.Error())
		return
	}
	log.Info("Restore started", "backup", backup.Name)
	if reason := run.asTenant(); reason != "" {
		run.finish(ctx, velerov1.RestorePhaseFailed, reason)
		return
	}
	bsl, err := c.locations.BackupStorageLocations(r.Namespace).Get(backup.Spec.StorageLocation)
	if err != nil {
		run.finish(ctx, velerov1.RestorePhaseFailed, fmt.Sprintf("storage location %q: %v", backup.Spec.StorageLocation, err))
		return
	}
	store, layout, err := c.cfg.Opener.Open(ctx, bsl)
	if err != nil {
		run.finish(ctx, velerov1.RestorePhaseFailed, err.Error())
		return
	}
	run.store, run.layout = store, layout
	done := make(chan struct{})
	go run.reportProgress(ctx, done)
	restoreCtx, cancel := ctx, context.CancelFunc(func() {})
	if d := c.cfg.Limits.Duration; d > 0 {
		restoreCtx, cancel = context.WithTimeoutCause(ctx, d, fmt.Errorf("%w: it ran longer than %s (--restore-timeout)", errLimit, d))
	}
	err = run.restore(restoreCtx)
	if cause := context.Cause(restoreCtx); ctx.Err() == nil && errors.Is(cause, errLimit) {
		err = cause
	}
	cancel()
	close(done)
	switch {
	case ctx.Err() != nil:
		logger.Info("Server stopping: the restore will be failed at the next start")
	case err != nil:
		run.finish(ctx, velerov1.RestorePhaseFailed, err.Error())
	default:
		phase := velerov1.RestorePhaseCompleted
		if errs, _ := log.Counts(); errs > 0 {
			phase = velerov1.RestorePhasePartiallyFailed
		}
		restored := int(run.count.restored.Load())
		log.Info("Restore completed", "phase", string(phase), "itemsRestored", restored)
		run.finish(ctx, phase, "", func(s *velerov1.RestoreStatus) {
			s.Progress = &velerov1.RestoreProgress{TotalItems: int(run.count.total.Load()), ItemsRestored: restored}
			run.count.operations(s)
		})
	}
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
	pending, err := newSpool(c.cfg.ScratchDir)
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
			return !noClusterItems
		}
		return nsFilter.IncludesNamespace(it.Namespace)
	}
	var resources []items.Resource
	for pass := 0; pass < 2; pass++ {
		if pass == 1 {
			// The custom resources of the CRDs restored in the first pass
			// are served once those are Established.
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
		rd := &restorer{c: c, r: r, target: run.target, as: run.as, backup: backup, log: log, filter: filter, statusFilter: statusFilter, byGR: byGR,
			progress: progress, counting: pass == 0, skipped: map[string]bool{}, namespaces: run.namespaces, dependents: &run.dependents}
		visit := func(it *archive.Item) error {
			if restoredFirst[it.GroupResource] != (pass == 0) {
				if pass == 0 && rd.selected(it) {
					progress.total.Add(1)
				}
				return nil
			}
			if rd.selected(it) {
				if pass == 0 {
					progress.total.Add(1)
				}
				rd.restoreItem(ctx, it)
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
		run.crds = append(run.crds, rd.crds...)
	}
	run.relinkOwners(ctx, resources)
	if err := run.restoreVMs(ctx, spec, resources); err != nil {
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

// restorer restores the items of one pass, several at a time (the items
// of one resource): mu guards what they share.
type restorer struct {
	c            *Controller
	r            *velerov1.Restore
	target       dynamic.Interface
	as           string // the user the restore writes as; "": the server
	backup       *velerov1.Backup
	log          *items.Log
	filter       *items.Filter
	statusFilter *items.Filter
	byGR         map[string]items.Resource
	progress     *counter
	counting     bool

	mu      sync.Mutex
	skipped map[string]bool
	// namespaces are the target namespaces known to exist (shared by the
	// passes of a run).
	namespaces map[string]bool
	// crds are the CustomResourceDefinitions restored or found.
	crds []string
	// dependents collects the written items that had owner references.
	dependents *[]dependent
	// nsMu makes one item at a time create a missing namespace.
	nsMu sync.Mutex
}

// skipResource logs, once per restore, that the items of a resource are
// skipped and why.
func (rd *restorer) skipResource(groupResource, why string) {
	rd.mu.Lock()
	first := !rd.skipped[groupResource] && !rd.counting
	rd.skipped[groupResource] = true
	rd.mu.Unlock()
	if first {
		rd.log.Info(why, "resource", groupResource)
	}
}

// selected reports whether the restore takes an item (before any write).
func (rd *restorer) selected(it *archive.Item) bool {
	if nonRestorable[it.GroupResource] {
		rd.skipResource(it.GroupResource, "Skipping a resource that is never restored")
		return false
	}
	if rd.as != "" && tenantKind(it.GroupResource) {
		rd.skipResource(it.GroupResource, "Skipping a resource a restore for a user never restores: the tenants' own objects are made by the server, not restored")
		return false
	}
	res, ok := rd.byGR[it.GroupResource]
	if !ok {
		// Not served (yet): counted, and reported when restored.
		return rd.filter.IncludesNamespace(it.Namespace) || it.Namespace == ""
	}
	if res.Namespaced != (it.Namespace != "") {
		// Where the tarball put it says another scope than the target
		// serves: a namespaced item claimed cluster-wide, or the reverse.
		if !rd.counting {
			scope := ""
			if it.Namespace == "" {
				scope = items.ScopeCluster
			}
			rd.log.Warning(it.Namespace, scope, fmt.Sprintf("%s %s is filed in the backup as %s, but the target serves it %s: not restored",
				it.GroupResource, qualified(it.Namespace, it.Name), scopeWord(it.Namespace != ""), scopeWord(res.Namespaced)))
		}
		return false
	}
	if !rd.filter.IncludesResource(res) {
		return false
	}
	if res.Namespaced && !rd.filter.IncludesNamespace(it.Namespace) {
		return false
	}
	if items.IsNamespaces(res) && !rd.filter.IncludesNamespace(it.Name) {
		return false
	}
	var obj struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(it.Data, &obj); err != nil {
		return true // reported when restored
	}
	return rd.filter.IncludesItem(obj.Metadata.Labels)
}

func scopeWord(namespaced bool) string {
	if namespaced {
		return "namespaced"
	}
	return "cluster-scoped"
}

func (rd *restorer) mapNamespace(ns string) string { return restoreaction.MapNamespace(rd.r, ns) }

// restoreItem creates one item in the target, or reconciles it with the
// object already there.
func (rd *restorer) restoreItem(ctx context.Context, it *archive.Item) {
	namespace := rd.mapNamespace(it.Namespace)
	scope := ""
	if it.Namespace == "" {
		scope = items.ScopeCluster
	}
	fail := func(msg string) { rd.log.Error(namespace, scope, msg, "resource", it.GroupResource, "name", it.Name) }
	res, ok := rd.byGR[it.GroupResource]
	if it.GroupResource == vmGroupResource {
		if !ok {
			rd.log.Item("Skipped", "item", fmt.Sprintf("%s %s", it.GroupResource, qualified(namespace, it.Name)),
				"reason", "the target serves no VirtualMachines: the VM is its libvirt domain, whose disks are restored from its VM backup")
			rd.progress.total.Add(-1)
			return
		}
	}
	if !ok {
		fail(fmt.Sprintf("the target cluster serves no %s: %s %s/%s not restored", it.GroupResource, it.GroupResource, it.Namespace, it.Name))
		return
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(it.Data); err != nil {
		fail(fmt.Sprintf("decoding %s %s/%s from the backup: %v", it.GroupResource, it.Namespace, it.Name, err))
		return
	}
	// The backed-up version, for the actions that read it (a copy only
	// where one applies) and the owner references set last.
	var fromBackup *unstructured.Unstructured
	if restoreaction.Applies(rd.c.cfg.Actions, it.GroupResource) {
		fromBackup = obj.DeepCopy()
	}
	owners := obj.GetOwnerReferences()
	resetMetadata(obj)
	if rd.statusFilter == nil || !rd.statusFilter.IncludesResource(res) {
		unstructured.RemoveNestedField(obj.Object, "status")
	}
	status, hasStatus, _ := unstructured.NestedFieldCopy(obj.Object, "status")
	// The name is the one the item's path gives, which the filters
	// decided on, never another its JSON claims.
	obj.SetName(it.Name)
	if items.IsNamespaces(res) {
		obj.SetName(rd.mapNamespace(it.Name))
		if _, err := rd.waitNamespaceGone(ctx, obj.GetName()); err != nil {
			fail(err.Error())
			return
		}
	}
	if res.Namespaced {
		obj.SetNamespace(namespace)
	}
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[BackupNameLabel], l[RestoreNameLabel] = rd.backup.Name, rd.r.Name
	obj.SetLabels(l)

	what := fmt.Sprintf("%s %s", it.GroupResource, qualified(obj.GetNamespace(), obj.GetName()))
	result, err := restoreaction.Run(rd.c.cfg.Actions, it.GroupResource, restoreaction.Input{Item: obj, FromBackup: fromBackup, Restore: rd.r})
	if err != nil {
		fail(fmt.Sprintf("restoring %s: %v", what, err))
		return
	}
	if result.Skip {
		// Not an item the restore has to write: out of the total.
		rd.log.Item("Skipped", "item", what, "reason", result.Reason)
		rd.progress.total.Add(-1)
		return
	}
	if res.Namespaced {
		if err := rd.ensureNamespace(ctx, obj.GetNamespace()); err != nil {
			fail(fmt.Sprintf("restoring %s: %v", what, err))
			return
		}
	}
	gvr := schema.GroupVersionResource{Group: res.GVR.Group, Version: it.Version, Resource: res.GVR.Resource}
	client := rd.target.Resource(gvr)
	var ri = client.Namespace(obj.GetNamespace())
	if !res.Namespaced {
		ri = client.Namespace("")
	}
	created, err := ri.Create(ctx, obj, metav1.CreateOptions{})
	if (err == nil || apierrors.IsAlreadyExists(err)) && it.GroupResource == crdGroupResource {
		rd.mu.Lock()
		rd.crds = append(rd.crds, obj.GetName())
		rd.mu.Unlock()
	}
	switch {
	case err == nil:
		rd.log.Item("Restored", "item", what)
		rd.addDependent(gvr, obj.GetNamespace(), obj.GetName(), owners)
		if hasStatus {
			created.Object["status"] = status
			if _, err := ri.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
				rd.log.Warning(namespace, scope, fmt.Sprintf("restoring the status of %s: %v", what, err))
			}
		}
	case apierrors.IsAlreadyExists(err):
		existing, getErr := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if getErr != nil {
			fail(fmt.Sprintf("%s exists but could not be read: %v", what, getErr))
			return
		}
		if it.GroupResource == "persistentvolumes" {
			existing = rd.freeStaleClaimRef(ctx, ri, existing, obj)
		}
		if same(existing, obj) {
			rd.log.Item("Already exists, unchanged", "item", what)
			break
		}
		if rd.r.Spec.ExistingResourcePolicy != velerov1.PolicyTypeUpdate {
			rd.log.Warning(namespace, scope, fmt.Sprintf("could not restore, %s already exists. Warning: the in-cluster version is different than the backed-up version", what))
			return
		}
		obj.SetResourceVersion(existing.GetResourceVersion())
		obj.SetUID(existing.GetUID())
		if _, err := ri.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
			rd.log.Warning(namespace, scope, fmt.Sprintf("existingResourcePolicy update: updating %s: %v", what, err))
			return
		}
		rd.log.Item("Updated to the backed-up version (existingResourcePolicy: update)", "item", what)
		rd.addDependent(gvr, obj.GetNamespace(), obj.GetName(), owners)
	case apierrors.IsForbidden(err) && rd.as != "":
		// A restore for a user writes what that user may write; what it
		// may not is left out and said, not counted as an error.
		rd.log.Warning(namespace, scope, fmt.Sprintf("not restored: %s may not write %s (the restore writes with its rights)", rd.as, what))
		return
	default:
		fail(fmt.Sprintf("restoring %s: %v", what, err))
		return
	}
	rd.progress.restored.Add(1)
}

// freeStaleClaimRef: a volume that outlived its claim (the namespace was
// deleted; reclaim policy Retain) still names the old claim's UID, so the
// volume controller would never bind it to the restored claim. When the
// live volume names the claim the restore brings back and that claim does
// not exist, the old UID is removed from the volume's claim reference, as
// the restored item has it: the restored claim binds to it again. It
// returns the volume as it is now.
func (rd *restorer) freeStaleClaimRef(ctx context.Context, ri dynamic.ResourceInterface, existing, restored *unstructured.Unstructured) *unstructured.Unstructured {
	live, _, _ := unstructured.NestedStringMap(existing.Object, "spec", "claimRef")
	want, _, _ := unstructured.NestedStringMap(restored.Object, "spec", "claimRef")
	if live["uid"] == "" || live["namespace"] != want["namespace"] || live["name"] != want["name"] {
		return existing
	}
	claims := rd.target.Resource(schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"})
	if _, err := claims.Namespace(live["namespace"]).Get(ctx, live["name"], metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return existing
	}
	patch := []byte(`{"spec":{"claimRef":{"uid":null,"resourceVersion":null}}}`)
	freed, err := ri.Patch(ctx, existing.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		rd.log.Warning("", items.ScopeCluster, fmt.Sprintf("freeing the claim reference of persistentvolume %s for the restored claim: %v", existing.GetName(), err))
		return existing
	}
	rd.log.Info("Volume freed for its restored claim", "persistentvolume", existing.GetName(), "claim", live["namespace"]+"/"+live["name"])
	return freed
}

// addDependent records a written item whose backed-up version had owner
// references refs, for relinkOwners.
func (rd *restorer) addDependent(gvr schema.GroupVersionResource, namespace, name string, refs []metav1.OwnerReference) {
	if len(refs) > 0 {
		rd.mu.Lock()
		*rd.dependents = append(*rd.dependents, dependent{gvr: gvr, namespace: namespace, name: name, refs: refs})
		rd.mu.Unlock()
	}
}

// namespacesResource is the core group's namespaces.
var namespacesResource = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// crdGroupResource names CustomResourceDefinitions in a backup.
const crdGroupResource = "customresourcedefinitions.apiextensions.k8s.io"

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CRDEstablishedWait is how long a restore waits for the CRDs it restored
// to be Established before it restores their custom resources.
const CRDEstablishedWait = time.Minute

// waitEstablished waits until every CRD of the first pass is Established
// (kube-apiserver serves its resources); one that is not by
// CRDEstablishedWait is a warning, and its custom resources fail on their
// own.
func (run *restoreRun) waitEstablished(ctx context.Context) {
	client := run.target.Resource(crdResource)
	for _, name := range run.crds {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, CRDEstablishedWait, true, func(ctx context.Context) (bool, error) {
			crd, err := client.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, c := range conditions {
				cond, _ := c.(map[string]any)
				if cond["type"] == "Established" && cond["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			run.log.Warning("", items.ScopeCluster, fmt.Sprintf("CustomResourceDefinition %s is not Established after %s: its custom resources may not restore", name, CRDEstablishedWait))
		}
	}
}

// NamespaceDeletionWait is how long a restore waits for a namespace that
// is being deleted to be gone before it creates it again.
const NamespaceDeletionWait = 2 * time.Minute

// ensureNamespace creates the target namespace of an item when it is
// missing (the backup may not hold it, or namespaceMapping names a new
// one), labelled like restored items.
func (rd *restorer) ensureNamespace(ctx context.Context, name string) error {
	rd.nsMu.Lock()
	defer rd.nsMu.Unlock()
	if rd.namespaces[name] {
		return nil
	}
	exists, err := rd.waitNamespaceGone(ctx, name)
	if err != nil || !rd.namespacesServed() {
		return err
	}
	if !exists {
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
		ns.SetName(name)
		ns.SetLabels(map[string]string{BackupNameLabel: rd.backup.Name, RestoreNameLabel: rd.r.Name})
		if _, err := rd.target.Resource(namespacesResource).Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
		rd.log.Info("Created the missing namespace", "namespace", name)
	}
	rd.namespaces[name] = true
	return nil
}

// namespacesServed: a standalone target serves no namespaces, and has
// none to create or wait for.
func (rd *restorer) namespacesServed() bool {
	_, ok := rd.byGR["namespaces"]
	return ok
}

// waitNamespaceGone reports whether namespace name exists; one being
// deleted is waited for (up to NamespaceDeletionWait) until it is gone, so
// that a restore right after `kubectl delete namespace` restores into a
// new one instead of failing against the old one.
func (rd *restorer) waitNamespaceGone(ctx context.Context, name string) (bool, error) {
	if !rd.namespacesServed() {
		return true, nil
	}
	client := rd.target.Resource(namespacesResource)
	exists, waited := false, false
	err := wait.PollUntilContextTimeout(ctx, time.Second, NamespaceDeletionWait, true, func(ctx context.Context) (bool, error) {
		existing, err := client.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			exists = false
			return true, nil
		case err != nil:
			return false, fmt.Errorf("reading namespace %s: %w", name, err)
		case existing.GetDeletionTimestamp() != nil:
			if !waited {
				rd.log.Info("Waiting for the namespace being deleted to be gone", "namespace", name)
				waited = true
			}
			return false, nil
		}
		exists = true
		return true, nil
	})
	if wait.Interrupted(err) {
		return false, fmt.Errorf("namespace %s is still being deleted after %s: restore again once it is gone", name, NamespaceDeletionWait)
	}
	return exists, err
}

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// resetMetadata drops what the target cluster assigns, as Velero does.
func resetMetadata(obj *unstructured.Unstructured) {
	for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
		"deletionGracePeriodSeconds", "selfLink", "managedFields", "ownerReferences", "generateName"} {
		unstructured.RemoveNestedField(obj.Object, "metadata", f)
	}
}

// same reports whether the object in the cluster equals the one to
// restore, ignoring what the cluster assigns and the restore labels.
func same(existing, restored *unstructured.Unstructured) bool {
	a, b := existing.DeepCopy(), restored.DeepCopy()
	for _, o := range []*unstructured.Unstructured{a, b} {
		resetMetadata(o)
		unstructured.RemoveNestedField(o.Object, "status")
		l := o.GetLabels()
		delete(l, BackupNameLabel)
		delete(l, RestoreNameLabel)
		if len(l) == 0 {
			l = nil
		}
		o.SetLabels(l)
		if len(o.GetAnnotations()) == 0 {
			o.SetAnnotations(nil)
		}
	}
	return apiequality.Semantic.DeepEqual(a.Object, b.Object)
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

// statusOf is the engine's status writer for the restores of a namespace.
func (c *Controller) statusOf(namespace string) *status.ResourceWriter[velerov1.Restore, *velerov1.Restore] {
	return status.Writer{Engine: velerov1.EngineRestore, Observers: c.cfg.Observers}.Restores(c.cfg.Client, namespace)
}

func (c *Controller) updateStatus(ctx context.Context, r *velerov1.Restore, mutate func(*velerov1.RestoreStatus)) error {
	_, err := c.statusOf(r.Namespace).Update(ctx, r, func(cur *velerov1.Restore) { mutate(&cur.Status) })
	return err
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
