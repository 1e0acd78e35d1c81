// Package deletion carries out velero.io DeleteBackupRequests, which
// `velero backup delete` creates: it deletes the backup's data from its
// storage location, the restores made from it (and their data), then the
// Backup object, and records the outcome on the request (phases New →
// InProgress → Processed, with errors). A backup still running is asked to
// cancel first and deleted once it has stopped. Processed requests are
// removed after a day, as Velero does.
package deletion

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/engine/vmoperation"
	"github.com/backstop-io/backstop/pkg/failpoint"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	informers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v1"
	listers "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
	"github.com/backstop-io/backstop/pkg/objectstore"
	"github.com/backstop-io/backstop/pkg/volumeinfo"
)

// MaxAge is how long a processed request is kept (Velero: 24 hours).
const MaxAge = 24 * time.Hour

// RunningPollInterval: how often a deletion waiting for a running backup
// to stop looks again (besides the backup's own events).
const RunningPollInterval = 2 * time.Second

// Controller processes DeleteBackupRequests.
type Controller struct {
	*reconcile.Loop
	client   versioned.Interface
	requests listers.DeleteBackupRequestLister
	// byBackup finds the requests of a backup (index byBackup).
	byBackup  cache.Indexer
	backups   listers.BackupLister
	restores  listers.RestoreLister
	locations listers.BackupStorageLocationLister
	opener    objectstore.Opener
	clock     clock.Clock
	status    status.Writer
	// finalize is the loop over deleted Backups (BackupDataFinalizer).
	finalize *reconcile.Loop
	crash    failpoint.Set
	// snapshots deletes the CSI snapshots of deleted backups (nil: none).
	snapshots SnapshotDeleter
	// moved forgets the data movers' snapshots of deleted backups (nil:
	// none).
	moved MovedDataForgetter
}

// MovedDataForgetter forgets the snapshots a backup's DataUploads made in
// its location's repositories (backuprepo.Repositories), given the
// backup's volumes (its volume info file).
type MovedDataForgetter interface {
	ForgetBackup(ctx context.Context, b *velerov1.Backup, volumes []volumeinfo.BackupVolumeInfo) (int, error)
}

// SnapshotDeleter deletes the snapshots a backup took in the source
// cluster's storage (csisnapshot.Action): started, not waited for (the
// CSI driver deletes them after), idempotent.
type SnapshotDeleter interface {
	DeleteBackupSnapshots(ctx context.Context, b *velerov1.Backup) (int, error)
}

// Informers are what the controller reads.
type Informers struct {
	Requests  informers.DeleteBackupRequestInformer
	Backups   informers.BackupInformer
	Restores  informers.RestoreInformer
	Locations informers.BackupStorageLocationInformer
}

// New returns the controller.
func New(client versioned.Interface, inf Informers, opener objectstore.Opener, snapshots SnapshotDeleter, moved MovedDataForgetter, clk clock.Clock, crash failpoint.Set, observers ...status.Observer) (*Controller, error) {
	c := &Controller{client: client, requests: inf.Requests.Lister(), backups: inf.Backups.Lister(),
		restores: inf.Restores.Lister(), locations: inf.Locations.Lister(), opener: opener, snapshots: snapshots, moved: moved, clock: clk, crash: crash,
		status: status.Writer{Engine: velerov1.EngineBackupDeletion, Observers: observers}}
	c.Loop = reconcile.NewLoop("deletebackuprequests", c.sync)
	if err := c.Watch(inf.Requests.Informer()); err != nil {
		return nil, err
	}
	// A request waiting for its running backup to stop goes on as soon
	// as it has stopped: requests are indexed by backup.
	if err := inf.Requests.Informer().AddIndexers(cache.Indexers{byBackup: requestBackup}); err != nil {
		return nil, fmt.Errorf("indexing deletion requests by backup: %w", err)
	}
	c.byBackup = inf.Requests.Informer().GetIndexer()
	if err := c.WatchMapped(inf.Backups.Informer(), c.requestsWaitingFor); err != nil {
		return nil, err
	}
	c.WaitFor(inf.Restores.Informer(), inf.Locations.Informer())
	c.finalize = reconcile.NewLoop("backup-data-finalizer", c.syncDeleted)
	if err := c.finalize.Watch(inf.Backups.Informer()); err != nil {
		return nil, err
	}
	c.finalize.WaitFor(inf.Restores.Informer(), inf.Locations.Informer())
	return c, nil
}

// requestsWaitingFor maps a Backup that is not running to the requests
// not yet processed that ask for its deletion.
func (c *Controller) requestsWaitingFor(obj any) []cache.ObjectName {
	b, ok := obj.(*velerov1.Backup)
	if !ok || b.Status.Phase.Running() {
		return nil
	}
	reqs, err := c.byBackup.ByIndex(byBackup, b.Namespace+"/"+b.Name)
	if err != nil {
		return nil
	}
	var keys []cache.ObjectName
	for _, obj := range reqs {
		if r, ok := obj.(*velerov1.DeleteBackupRequest); ok && r.Status.Phase != velerov1.DeleteBackupRequestPhaseProcessed {
			keys = append(keys, cache.ObjectName{Namespace: r.Namespace, Name: r.Name})
		}
	}
	return keys
}

// byBackup indexes deletion requests by <namespace>/<backup name>
// (requestBackup).
const byBackup = "backup"

func requestBackup(obj any) ([]string, error) {
	r, ok := obj.(*velerov1.DeleteBackupRequest)
	if !ok {
		return nil, nil
	}
	return []string{r.Namespace + "/" + r.Spec.BackupName}, nil
}

// Run processes deletion requests and deleted backups until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	go c.finalize.Run(ctx, workers)
	c.Loop.Run(ctx, workers)
}

// syncDeleted finishes a deleted Backup (deleted by a client, by a
// DeleteBackupRequest, by its TTL's expiry or by backup sync): once it is
// not running (the backup engine stops a running one and fails it), its
// data, the restores made from it, the VirtualMachineBackups it made and
// its CSI snapshots are deleted, then BackupDataFinalizer removed.
// Until then the Backup stays, with its deletionTimestamp: a crash in
// between leaves nothing orphaned, the next start finishes the work.
func (c *Controller) syncDeleted(ctx context.Context, key cache.ObjectName) error {
	b, err := c.backups.Backups(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if b.DeletionTimestamp == nil || !reconcile.HasFinalizer(b, velerov1.BackupDataFinalizer) || b.Status.Phase.Running() {
		return nil // not deleted, done, or the backup engine stops it first
	}
	if until, mode, locked := velerov1.LockedUntil(b); locked {
		// Deleted by a client before its lock's date: it stays, being
		// deleted, until then.
		if left := until.Sub(c.clock.Now()); left > 0 {
			klog.FromContext(ctx).Info("Deleted backup is locked: its data is deleted when the lock ends", "backup", klog.KObj(b), "until", until, "mode", mode)
			c.finalize.AddAfter(key, left)
			return nil
		}
	}
	c.crash.Hit(failpoint.DeleteBeforeCleanup)
	store, layout, err := c.storeOf(ctx, b)
	switch {
	case errors.Is(err, errNoLocation), errors.Is(err, errLocationGone):
		// Nothing can be deleted where there is no location.
	case err != nil:
		return fmt.Errorf("deleting the data of deleted backup %s: %w", b.Name, err)
	case c.readOnly(b):
		// Another server's location, synced from: its data is not ours.
	default:
		// The data movers' snapshots first: the volume info file, which
		// the prefix holds, names them.
		if err := c.forgetMovedData(ctx, b, store, layout); err != nil {
			return err
		}
		if err := objectstore.DeletePrefix(ctx, store, layout.BackupDir(b.Name)); err != nil {
			return fmt.Errorf("deleting the data of deleted backup %s: %w", b.Name, err)
		}
	}
	restores, err := c.restores.Restores(b.Namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	for _, r := range restores {
		if r.Spec.BackupName != b.Name {
			continue
		}
		// Deleted here, where the location is known: the restore engine
		// finds nothing left when the Restore's own finalizer runs.
		if store != nil && !c.readOnly(b) {
			if err := objectstore.DeletePrefix(ctx, store, layout.RestoreDir(r.Name)); err != nil {
				return fmt.Errorf("deleting the data of restore %s of deleted backup %s: %w", r.Name, b.Name, err)
			}
		}
		if r.DeletionTimestamp != nil {
			continue
		}
		if err := c.client.VeleroV1().Restores(r.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting restore %s of deleted backup %s: %w", r.Name, b.Name, err)
		}
	}
	// The VM disk backups it made (in their VMs' namespaces) go too: the
	// VM backup engine removes their files from their chains.
	vmbs, err := c.client.BackupV1alpha1().VirtualMachineBackups(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{vmoperation.BackupUIDLabel: string(b.UID)}).String()})
	if err != nil {
		return fmt.Errorf("listing the VM disk backups of deleted backup %s: %w", b.Name, err)
	}
	for _, vmb := range vmbs.Items {
		if vmb.DeletionTimestamp != nil {
			continue
		}
		if err := c.client.BackupV1alpha1().VirtualMachineBackups(vmb.Namespace).Delete(ctx, vmb.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting VM disk backup %s/%s of deleted backup %s: %w", vmb.Namespace, vmb.Name, b.Name, err)
		}
	}
	// The CSI snapshots it took go too: the driver deletes them.
	snapshots := 0
	if c.snapshots != nil {
		if snapshots, err = c.snapshots.DeleteBackupSnapshots(ctx, b); err != nil {
			return fmt.Errorf("deleting the CSI snapshots of deleted backup %s: %w", b.Name, err)
		}
	}
	if err := reconcile.RemoveFinalizer(ctx, c.client.VeleroV1().Backups(b.Namespace), b, velerov1.BackupDataFinalizer, velerov1.EngineBackupDeletion); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Deleted backup finished: its data is gone", "backup", klog.KObj(b), "vmBackups", len(vmbs.Items), "csiSnapshots", snapshots)
	return nil
}

// readOnly reports whether the backup's location may not be written.
func (c *Controller) readOnly(b *velerov1.Backup) bool {
	l, err := c.locations.BackupStorageLocations(b.Namespace).Get(b.Spec.StorageLocation)
	return err == nil && l.Spec.AccessMode == velerov1.BackupStorageLocationAccessModeReadOnly
}

func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	req, err := c.requests.DeleteBackupRequests(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	switch req.Status.Phase {
	case velerov1.DeleteBackupRequestPhaseProcessed:
		left := req.CreationTimestamp.Add(MaxAge).Sub(c.clock.Now())
		if left > 0 {
			c.AddAfter(key, left)
			return nil
		}
		return reconcile.DeleteIfUnchanged(ctx, c.client.VeleroV1().DeleteBackupRequests(key.Namespace).Delete, key.Name, req.UID)
	case "", velerov1.DeleteBackupRequestPhaseNew:
		if other := c.otherInProgress(req); other != "" {
			return c.finish(ctx, req, fmt.Sprintf("backup %s is already being deleted by request %s", req.Spec.BackupName, other))
		}
		if req, err = c.setPhase(ctx, req, velerov1.DeleteBackupRequestPhaseInProgress, nil); err != nil {
			return err
		}
	}
	return c.delete(ctx, req)
}

// otherInProgress names another request deleting the same backup.
func (c *Controller) otherInProgress(req *velerov1.DeleteBackupRequest) string {
	all, err := c.requests.DeleteBackupRequests(req.Namespace).List(labels.Everything())
	if err != nil {
		return ""
	}
	for _, o := range all {
		if o.Name != req.Name && o.Spec.BackupName == req.Spec.BackupName && o.Status.Phase == velerov1.DeleteBackupRequestPhaseInProgress {
			return o.Name
		}
	}
	return ""
}

// delete carries out an InProgress request.
func (c *Controller) delete(ctx context.Context, req *velerov1.DeleteBackupRequest) error {
	logger := klog.FromContext(ctx).WithValues("request", req.Name, "backup", req.Spec.BackupName)
	backup, err := c.backups.Backups(req.Namespace).Get(req.Spec.BackupName)
	if apierrors.IsNotFound(err) {
		return c.finish(ctx, req, fmt.Sprintf("backup %s not found", req.Spec.BackupName))
	}
	if err != nil {
		return err
	}
	if uid := req.Labels[velerov1.BackupUIDLabel]; uid != "" && types.UID(uid) != backup.UID {
		return c.finish(ctx, req, fmt.Sprintf("backup %s was replaced by a newer backup of the same name: not deleting it", backup.Name))
	}
	if backup.Status.Phase.Running() {
		// A running backup is cancelled first, then deleted once it stops.
		if !backup.Spec.Cancel {
			patch := []byte(`{"spec":{"cancel":true}}`)
			if _, err := c.client.VeleroV1().Backups(backup.Namespace).Patch(ctx, backup.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("cancelling backup %s before deleting it: %w", backup.Name, err)
			}
			logger.Info("Cancelling the running backup before deleting it")
		}
		c.AddAfter(cache.ObjectName{Namespace: req.Namespace, Name: req.Name}, RunningPollInterval)
		return nil
	}
	if until, mode, locked := velerov1.LockedUntil(backup); locked && c.clock.Now().Before(until) {
		// Refused before anything changes: the Backup stays as it is.
		return c.finish(ctx, req, fmt.Sprintf("backup %s cannot be deleted before %s: its objects are locked in storage location %s (S3 object lock, %s); garbage collection deletes it then",
			backup.Name, until.UTC().Format(time.RFC3339), backup.Spec.StorageLocation, mode))
	}
	marked, err := c.status.Backups(c.client, backup.Namespace).Update(ctx, backup, func(cur *velerov1.Backup) {
		if !cur.Status.Phase.Running() {
			cur.Status.Phase = velerov1.BackupPhaseDeleting
		}
	})
	if status.Gone(err) {
		return c.finish(ctx, req, fmt.Sprintf("backup %s not found", req.Spec.BackupName))
	}
	if err != nil {
		return err
	}
	if marked.Status.Phase != velerov1.BackupPhaseDeleting {
		// It started meanwhile: cancelled first, as above.
		c.Add(cache.ObjectName{Namespace: req.Namespace, Name: req.Name})
		return nil
	}

	var errs []string
	store, layout, err := c.storeOf(ctx, backup)
	switch {
	case errors.Is(err, errNoLocation):
		// Nothing was stored: nothing to delete.
	case err != nil:
		// Keep the Backup so the deletion can be retried once the location works.
		return c.finish(ctx, req, fmt.Sprintf("deleting the data of backup %s: %v", backup.Name, err))
	default:
		// The data movers' snapshots first: the volume info file, which
		// the prefix holds, names them.
		if err := c.forgetMovedData(ctx, backup, store, layout); err != nil {
			return c.finish(ctx, req, err.Error())
		}
		if err := objectstore.DeletePrefix(ctx, store, layout.BackupDir(backup.Name)); err != nil {
			return c.finish(ctx, req, fmt.Sprintf("deleting the data of backup %s: %v", backup.Name, err))
		}
	}
	c.crash.Hit(failpoint.DeletionInProgress)
	restores, err := c.restores.Restores(req.Namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	for _, r := range restores {
		if r.Spec.BackupName != backup.Name {
			continue
		}
		if store != nil {
			if err := objectstore.DeletePrefix(ctx, store, layout.RestoreDir(r.Name)); err != nil {
				errs = append(errs, fmt.Sprintf("deleting the data of restore %s: %v", r.Name, err))
				continue
			}
		}
		if err := c.client.VeleroV1().Restores(r.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Sprintf("deleting restore %s: %v", r.Name, err))
		}
	}
	if len(errs) == 0 {
		err := c.client.VeleroV1().Backups(backup.Namespace).Delete(ctx, backup.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &backup.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Sprintf("deleting backup %s: %v", backup.Name, err))
		}
	}
	logger.Info("Deleted the backup", "errors", len(errs))
	return c.finish(ctx, req, errs...)
}

var (
	errNoLocation   = errors.New("the backup has no storage location")
	errLocationGone = errors.New("does not exist")
)

func (c *Controller) storeOf(ctx context.Context, b *velerov1.Backup) (objectstore.Store, objectstore.Layout, error) {
	if b.Spec.StorageLocation == "" {
		return nil, objectstore.Layout{}, errNoLocation
	}
	l, err := c.locations.BackupStorageLocations(b.Namespace).Get(b.Spec.StorageLocation)
	if apierrors.IsNotFound(err) {
		return nil, objectstore.Layout{}, fmt.Errorf("storage location %s %w", b.Spec.StorageLocation, errLocationGone)
	}
	if err != nil {
		return nil, objectstore.Layout{}, err
	}
	return c.opener.Open(ctx, l)
}

// finish marks the request Processed with errs.
func (c *Controller) finish(ctx context.Context, req *velerov1.DeleteBackupRequest, errs ...string) error {
	_, err := c.setPhase(ctx, req, velerov1.DeleteBackupRequestPhaseProcessed, errs)
	if err == nil {
		c.AddAfter(cache.ObjectName{Namespace: req.Namespace, Name: req.Name}, MaxAge)
	}
	return err
}

func (c *Controller) setPhase(ctx context.Context, req *velerov1.DeleteBackupRequest, phase velerov1.DeleteBackupRequestPhase, errs []string) (*velerov1.DeleteBackupRequest, error) {
	return c.status.DeleteBackupRequests(c.client, req.Namespace).Update(ctx, req, func(cur *velerov1.DeleteBackupRequest) {
		if !cur.Status.Phase.Terminal() {
			cur.Status.Phase = phase
			cur.Status.Errors = errs
		}
	})
}

// forgetMovedData forgets the snapshots the backup's DataUploads made, and
// deletes its DataUploads.
func (c *Controller) forgetMovedData(ctx context.Context, b *velerov1.Backup, store objectstore.Store, layout objectstore.Layout) error {
	if c.moved == nil {
		return nil
	}
	key, _ := layout.Key(velerov1.DownloadTargetKindBackupVolumeInfos, b.Name)
	data, err := objectstore.GetGzip(ctx, store, key, volumeinfo.MaxSize)
	switch {
	case errors.Is(err, objectstore.ErrNotFound):
		data = nil
	case err != nil:
		return fmt.Errorf("reading the volume info of deleted backup %s: %w", b.Name, err)
	}
	if data != nil {
		volumes, err := volumeinfo.Decode(data)
		if err != nil {
			return fmt.Errorf("deleted backup %s: %w", b.Name, err)
		}
		n, err := c.moved.ForgetBackup(ctx, b, volumes)
		if err != nil {
			return fmt.Errorf("forgetting the moved data of deleted backup %s: %w", b.Name, err)
		}
		if n > 0 {
			klog.FromContext(ctx).Info("Forgot the snapshots of the data moved by a deleted backup", "backup", klog.KObj(b), "snapshots", n)
		}
	}
	dus := c.client.VeleroV2alpha1().DataUploads(b.Namespace)
	list, err := dus.List(ctx, metav1.ListOptions{LabelSelector: velerov1.BackupUIDSelector(b.UID)})
	if err != nil {
		return fmt.Errorf("listing the DataUploads of deleted backup %s: %w", b.Name, err)
	}
	for _, du := range list.Items {
		if err := dus.Delete(ctx, du.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting DataUpload %s of deleted backup %s: %w", du.Name, b.Name, err)
		}
	}
	return nil
}
