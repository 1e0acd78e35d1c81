// Package backupsync is the backup sync engine, Velero's backup-sync
// controller: every sync period it reads each available storage location
// and makes the server's Backups match what the location holds. A backup
// found in the location (its velero-backup.json) with no Backup of that
// name is created, with its final status, labelled and annotated with the
// location (backstop.io/synced-from-location), so that a second server, or this
// one after its data directory was lost, can restore from it. A Completed
// Backup of the location whose files are gone from it (deleted by another
// server) is deleted, as Velero does, unless a DeleteBackupRequest is
// deleting it. Backups that are not finished in the
// location (no terminal phase) are left alone.
//
// A tenant's location (made for a NonAdminBackupStorageLocation) is synced
// every TenantPeriod (the admin's non-admin backupSyncPeriod), and what its
// bucket says is not believed: only names the server gives tenants'
// backups are taken (oadpv1alpha1.TenantSyncable), the labels and
// annotations read are dropped (the name of the backup's NonAdminBackup
// is kept as oadpv1alpha1.SyncedNameAnnotation), and the spec is held to
// the tenant's namespace, the one the server recorded on the location.
// The non-admin sync then gives the Backup its NonAdminBackup.
package backupsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	oadpvalidation "github.com/backstop-io/backstop/pkg/apis/oadp/validation"
	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	informers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v1"
	listers "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// DefaultPeriod is how often locations are synced (Velero's
// --backup-sync-period default).
const DefaultPeriod = time.Minute

// maxMetadataSize bounds a velero-backup.json read from a location.
const maxMetadataSize = 16 << 20

// Config is what the engine needs.
type Config struct {
	Client    versioned.Interface
	Backups   informers.BackupInformer
	Locations informers.BackupStorageLocationInformer
	// Requests are the DeleteBackupRequests: a backup being deleted by
	// one is left to it.
	Requests informers.DeleteBackupRequestInformer
	Opener   objectstore.Opener
	// Period is the time between two syncs of a location.
	Period time.Duration
	// TenantPeriod reads the time between two syncs of a tenant's
	// location (0: not synced; nil: tenants' locations are not synced).
	TenantPeriod func() time.Duration
	// MaxPerPass is the most Backups one pass over a location makes
	// (default DefaultMaxPerPass): a bucket holding many, or one a tenant
	// filled, is taken a pass at a time.
	MaxPerPass int
	// TenantMaxBackups reads the most Backups a tenant's locations may
	// hold together in the admin namespace (the tenant's
	// maxBackupsPerNamespace; 0 or nil: no limit): a tenant's buckets make
	// none past it.
	TenantMaxBackups func() int
	// PassTimeout bounds a pass over a location, every call to its
	// endpoint included (default DefaultPassTimeout): one cut short goes
	// on at the next.
	PassTimeout time.Duration
}

// DefaultMaxPerPass is Config.MaxPerPass's default.
const DefaultMaxPerPass = 500

// DefaultPassTimeout is Config.PassTimeout's default.
const DefaultPassTimeout = 5 * time.Minute

// Workers is how many locations are synced at once: a location's endpoint
// is its owner's (a tenant's) to choose, and one that answers slowly
// holds a worker until its pass's deadline, never all of them (one
// tenant's locations hold one worker at a time, tenants' all but one: the
// admin's locations always find one).
const Workers = 4

// Controller is the backup sync engine.
type Controller struct {
	*reconcile.Loop
	cfg       Config
	backups   listers.BackupLister
	locations listers.BackupStorageLocationLister
	requests  listers.DeleteBackupRequestLister
	// gate shares the workers between tenants' locations and keeps one
	// for the admin's.
	gate *reconcile.OwnerGate
	// tenantSynced is when each tenant's location was last read: their
	// status changes do not bring them back sooner than TenantPeriod.
	mu           sync.Mutex
	tenantSynced map[string]time.Time
}

// New returns the engine.
func New(cfg Config) (*Controller, error) {
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	c := &Controller{cfg: cfg, backups: cfg.Backups.Lister(), locations: cfg.Locations.Lister(), requests: cfg.Requests.Lister(), gate: reconcile.NewOwnerGate(Workers),
		tenantSynced: map[string]time.Time{}}
	c.Loop = reconcile.NewLoop("backup-sync", c.sync)
	if err := c.Watch(cfg.Locations.Informer()); err != nil {
		return nil, err
	}
	c.WaitFor(cfg.Backups.Informer(), cfg.Requests.Informer())
	return c, nil
}

// sync reconciles one location with its Backups, then comes back after the
// period. Informer events (the location's status written by the
// availability check) bring a location back sooner; a sync is cheap when
// nothing changed: one listing of the location.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	bsl, err := c.locations.BackupStorageLocations(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	period, tenant := c.cfg.Period, ""
	if bsl.Labels[oadpv1alpha1.NabslOriginNACUUIDLabel] != "" {
		tenant = bsl.Annotations[oadpv1alpha1.NabslOriginNamespaceAnnotation]
		if tenant == "" || c.cfg.TenantPeriod == nil {
			return nil // not made by the server for a tenant
		}
		if period = c.cfg.TenantPeriod(); period <= 0 {
			c.AddAfter(key, time.Minute) // off: the policy is read again
			return nil
		}
		release, err := c.gate.Enter(tenant)
		if err != nil {
			c.AddAfter(key, reconcile.OwnerRetry)
			return nil
		}
		defer release()
		if wait := c.tenantWait(bsl.Name, period); wait > 0 {
			c.AddAfter(key, wait)
			return nil
		}
	}
	defer c.AddAfter(key, period)
	if bsl.Status.Phase != velerov1.BackupStorageLocationPhaseAvailable {
		return nil // the availability check says why
	}
	logger := klog.FromContext(ctx).WithValues("location", klog.KObj(bsl))
	timeout := c.cfg.PassTimeout
	if timeout <= 0 {
		timeout = DefaultPassTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	store, layout, err := c.cfg.Opener.Open(ctx, bsl)
	if err != nil {
		logger.Error(err, "Opening the location to sync backups")
		return nil
	}
	// The bucket is walked, not read whole: memory stays flat in its
	// size, and a pass makes at most limit Backups.
	limit := c.cfg.MaxPerPass
	if limit <= 0 {
		limit = DefaultMaxPerPass
	}
	made := 0
	errAtLimit := errors.New("at the limit")
	// A tenant's locations hold at most its limit of Backups, all of
	// them together.
	tenantRoom := -1
	if tenant != "" && c.cfg.TenantMaxBackups != nil {
		if most := c.cfg.TenantMaxBackups(); most > 0 {
			held, err := c.tenantBackups(bsl.Namespace, tenant)
			if err != nil {
				return err
			}
			tenantRoom = max(most-held, 0)
		}
	}
	errTenantLimit := errors.New("at the tenant's limit")
	err = layout.WalkBackupNames(ctx, store, func(name string) error {
		if tenant != "" && !oadpv1alpha1.TenantSyncable(name) {
			return nil
		}
		if _, err := c.backups.Backups(bsl.Namespace).Get(name); err == nil || !apierrors.IsNotFound(err) {
			return nil
		}
		if made == limit {
			return errAtLimit
		}
		if tenantRoom >= 0 && made >= tenantRoom {
			return errTenantLimit
		}
		// Each attempt counts: a bucket full of broken metadata costs a
		// pass no more than one full of backups.
		made++
		if err := c.create(ctx, bsl, tenant, store, layout, name); err != nil {
			logger.Error(err, "Syncing a backup from the location", "backup", name)
		}
		return nil
	})
	switch {
	case errors.Is(err, errAtLimit):
		logger.Info("Sync pass at its limit: the location's other backups wait for the next passes", "limit", limit)
	case errors.Is(err, errTenantLimit):
		logger.Info("A tenant's location holds as many backups as its tenant's limit allows: its other backups are not synced", "namespace", tenant)
	case err != nil:
		logger.Error(err, "Listing the backups of the location")
		return nil
	}
	return c.deleteOrphans(ctx, bsl, store, layout)
}

// tenantWait is how long a tenant's location waits before it is read
// again (0: now, and now is recorded).
func (c *Controller) tenantWait(name string, period time.Duration) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if last, ok := c.tenantSynced[name]; ok {
		if wait := time.Until(last.Add(period)); wait > 0 {
			return wait
		}
	}
	c.tenantSynced[name] = time.Now()
	return 0
}

// create makes a Backup from the velero-backup.json of a location (of
// tenant's, when not "").
func (c *Controller) create(ctx context.Context, bsl *velerov1.BackupStorageLocation, tenant string, store objectstore.Store, layout objectstore.Layout, name string) error {
	rc, err := store.Get(ctx, layout.BackupMetadataKey(name))
	if errors.Is(err, objectstore.ErrNotFound) {
		return nil // deleted meanwhile
	}
	if err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(rc, maxMetadataSize))
	rc.Close()
	if err != nil {
		return fmt.Errorf("reading %s: %w", layout.BackupMetadataKey(name), err)
	}
	var stored velerov1.Backup
	if err := json.Unmarshal(data, &stored); err != nil {
		return fmt.Errorf("decoding %s: %w", layout.BackupMetadataKey(name), err)
	}
	if stored.Name != name {
		return fmt.Errorf("%s names backup %q", layout.BackupMetadataKey(name), stored.Name)
	}
	if p := stored.Status.Phase; !p.Terminal() || p == velerov1.BackupPhaseDeleting {
		return nil // written by a server that has not finished it
	}
	b := &velerov1.Backup{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: bsl.Namespace,
			Labels: stored.Labels, Annotations: stored.Annotations,
		},
		Spec:   stored.Spec,
		Status: stored.Status,
	}
	if b.Labels == nil {
		b.Labels = map[string]string{}
	}
	if b.Annotations == nil {
		b.Annotations = map[string]string{}
	}
	if tenant != "" {
		if b, err = tenantBackup(b, tenant); err != nil {
			return err
		}
	}
	lockedAsStored(ctx, b, store, layout)
	b.Status.SizeBytes = sizeAsStored(ctx, store, layout, name)
	b.Labels[velerov1.StorageLocationLabel] = bsl.Name
	b.Annotations[velerov1.SyncedFromLocationAnnotation] = bsl.Name
	delete(b.Annotations, velerov1.QueueSequenceAnnotation)
	b.Spec.StorageLocation = bsl.Name
	b.Spec.Cancel = false
	b.Status.QueuePosition = 0
	if _, err := c.cfg.Client.VeleroV1().Backups(bsl.Namespace).Create(ctx, b, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("creating backup %s: %w", name, err)
	}
	klog.FromContext(ctx).Info("Synced a backup from its storage location", "backup", name, "location", bsl.Name, "phase", b.Status.Phase)
	return nil
}

// tenantBackups counts the Backups of namespace in the storage locations
// made for tenant (a tenant namespace).
func (c *Controller) tenantBackups(namespace, tenant string) (int, error) {
	locations, err := c.locations.BackupStorageLocations(namespace).List(labels.Everything())
	if err != nil {
		return 0, err
	}
	held := 0
	for _, l := range locations {
		if l.Annotations[oadpv1alpha1.NabslOriginNamespaceAnnotation] != tenant {
			continue
		}
		in, err := c.backups.Backups(namespace).List(labels.SelectorFromSet(labels.Set{velerov1.StorageLocationLabel: velerov1.LabelValue(l.Name)}))
		if err != nil {
			return 0, err
		}
		held += len(in)
	}
	return held, nil
}

// deleteOrphans deletes the Completed Backups of a location whose files
// are no longer in it, as Velero's backup sync does.
func (c *Controller) deleteOrphans(ctx context.Context, bsl *velerov1.BackupStorageLocation, store objectstore.Store, layout objectstore.Layout) error {
	all, err := c.backups.Backups(bsl.Namespace).List(labels.SelectorFromSet(labels.Set{velerov1.StorageLocationLabel: bsl.Name}))
	if err != nil {
		return err
	}
	requests, err := c.requests.DeleteBackupRequests(bsl.Namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	beingDeleted := sets.New[string]()
	for _, r := range requests {
		if r.Status.Phase != velerov1.DeleteBackupRequestPhaseProcessed {
			beingDeleted.Insert(r.Spec.BackupName)
		}
	}
	for _, b := range all {
		if b.Status.Phase != velerov1.BackupPhaseCompleted || b.Spec.StorageLocation != bsl.Name ||
			b.DeletionTimestamp != nil || beingDeleted.Has(b.Name) {
			continue
		}
		// Asked of the bucket Backup by Backup: what the server holds is
		// bounded, what a bucket holds is not.
		switch rc, err := store.Get(ctx, layout.BackupMetadataKey(b.Name)); {
		case err == nil:
			_ = rc.Close()
			continue
		case !errors.Is(err, objectstore.ErrNotFound):
			return fmt.Errorf("looking for backup %s in location %s: %w", b.Name, bsl.Name, err)
		}
		err := reconcile.DeleteIfUnchanged(ctx, c.cfg.Client.VeleroV1().Backups(b.Namespace).Delete, b.Name, b.UID)
		if err != nil {
			return fmt.Errorf("deleting backup %s, gone from location %s: %w", b.Name, bsl.Name, err)
		}
		klog.FromContext(ctx).Info("Deleted a backup whose files are gone from its storage location", "backup", b.Name, "location", bsl.Name)
	}
	return nil
}

// tenantBackup is the Backup made from one found in the location of
// tenant: nothing its labels and annotations say is kept but the name of
// its NonAdminBackup, and its spec reaches the tenant's namespace only.
func tenantBackup(b *velerov1.Backup, tenant string) (*velerov1.Backup, error) {
	out := b.DeepCopy()
	out.Labels, out.Annotations = map[string]string{}, map[string]string{}
	if name := b.Annotations[oadpv1alpha1.NabOriginNameAnnotation]; len(validation.IsDNS1123Subdomain(name)) == 0 {
		out.Annotations[oadpv1alpha1.SyncedNameAnnotation] = name
	}
	var spec velero.BackupSpec
	if err := velerov1.Convert_v1_BackupSpec_To_velero_BackupSpec(&b.Spec, &spec, nil); err != nil {
		return nil, fmt.Errorf("reading the spec of backup %s: %w", b.Name, err)
	}
	if err := velerov1.Convert_velero_BackupSpec_To_v1_BackupSpec(oadpvalidation.TenantBackupSpec(tenant, &spec, b.Spec.StorageLocation), &out.Spec, nil); err != nil {
		return nil, fmt.Errorf("writing the spec of backup %s: %w", b.Name, err)
	}
	return out, nil
}

// lockedAsStored keeps a synced backup's Locked condition only where the
// store says so: the location has object lock and velero-backup.json is
// locked until the backup's expiration. The file is input (anyone who can
// write the bucket wrote it): a Locked condition it claims alone would
// hold off the backup's deletion.
func lockedAsStored(ctx context.Context, b *velerov1.Backup, store objectstore.Store, layout objectstore.Layout) {
	if meta.FindStatusCondition(b.Status.Conditions, velerov1.BackupConditionLocked) == nil {
		return
	}
	if l := objectstore.LockedStore(store); l != nil && b.Status.Expiration != nil {
		mode, until, err := l.RetainedUntil(ctx, layout.BackupMetadataKey(b.Name))
		if err == nil && mode != "" && !until.Before(b.Status.Expiration.Truncate(time.Second)) {
			return
		}
	}
	meta.RemoveStatusCondition(&b.Status.Conditions, velerov1.BackupConditionLocked)
}

// sizeAsStored is the size of a synced backup's objects as its manifest
// records them (velero-backup.json is written before the size is known);
// 0 without a manifest that reads well.
func sizeAsStored(ctx context.Context, store objectstore.Store, layout objectstore.Layout, name string) int64 {
	m, err := objectstore.GetManifest(ctx, store, layout, name, objectstore.MaxManifestSize)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("A synced backup's size is not known", "backup", name, "err", err)
		return 0
	}
	return m.Size()
}
