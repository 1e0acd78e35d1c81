package nonadmin

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	oadpinformers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/oadp/v1alpha1"
	veleroinformers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v1"
	oadplisters "github.com/backstop-io/backstop/pkg/generated/listers/oadp/v1alpha1"
	velerolisters "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
)

// EngineNonAdminSync is the engine that gives backups synced from tenants'
// storage locations their NonAdminBackups.
const EngineNonAdminSync = "nonadmin-sync"

// SyncConfig is what the non-admin sync needs.
type SyncConfig struct {
	Client         versioned.Interface
	AdminNamespace string
	// Backups and the Velero locations of the admin namespace.
	Backups         veleroinformers.BackupInformer
	VeleroLocations veleroinformers.BackupStorageLocationInformer
	// TenantLocations and NonAdminBackups of every namespace.
	TenantLocations oadpinformers.NonAdminBackupStorageLocationInformer
	NonAdminBackups oadpinformers.NonAdminBackupInformer
	// DPAs of the admin namespace hold the admin's policy.
	DPAs      oadpinformers.DataProtectionApplicationInformer
	Observers []status.Observer
}

// SyncController is the non-admin sync. The backup sync reads tenants'
// locations every non-admin backupSyncPeriod and makes a Backup of the
// admin namespace for each backup found there (on the server's terms: see
// package backupsync); this engine gives each such Backup a NonAdminBackup
// in the namespace of the NonAdminBackupStorageLocation the Backup's
// location was made for, as the server recorded it, never where anything
// read from the bucket says. The NonAdminBackup takes the name the backup's
// NonAdminBackup had (oadpv1alpha1.SyncedNameAnnotation) when it is free,
// else the backup's name; its spec names the location only.
type SyncController struct {
	*reconcile.Loop
	cfg       SyncConfig
	backups   velerolisters.BackupLister
	velero    velerolisters.BackupStorageLocationLister
	locations oadplisters.NonAdminBackupStorageLocationLister
	dpas      oadplisters.DataProtectionApplicationLister
	adopter   adopter
}

// NewSyncController returns the engine.
func NewSyncController(cfg SyncConfig) (*SyncController, error) {
	c := &SyncController{cfg: cfg, backups: cfg.Backups.Lister(), velero: cfg.VeleroLocations.Lister(),
		locations: cfg.TenantLocations.Lister(), dpas: cfg.DPAs.Lister(),
		adopter: adopter{client: cfg.Client, adminNamespace: cfg.AdminNamespace, nabs: cfg.NonAdminBackups.Lister(),
			status: status.Writer{Engine: EngineNonAdminSync, Observers: cfg.Observers}}}
	c.Loop = reconcile.NewLoop(EngineNonAdminSync, c.sync)
	if err := c.Watch(cfg.Backups.Informer()); err != nil {
		return nil, err
	}
	// The policy (tenants' backups enabled again) and a location's status
	// (its NACUUID recorded) may let a waiting backup through.
	waiting := func(any) []cache.ObjectName { return c.unadopted() }
	if err := c.WatchMapped(cfg.DPAs.Informer(), waiting); err != nil {
		return nil, err
	}
	if err := c.WatchMapped(cfg.TenantLocations.Informer(), waiting); err != nil {
		return nil, err
	}
	c.WaitFor(cfg.VeleroLocations.Informer(), cfg.NonAdminBackups.Informer())
	return c, nil
}

// unadopted lists the synced Backups not linked to a NonAdminBackup.
func (c *SyncController) unadopted() []cache.ObjectName {
	all, err := c.backups.Backups(c.cfg.AdminNamespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var keys []cache.ObjectName
	for _, b := range all {
		if b.Annotations[velerov1.SyncedFromLocationAnnotation] != "" && b.Labels[oadpv1alpha1.NabOriginNACUUIDLabel] == "" {
			keys = append(keys, cache.MetaObjectToName(b))
		}
	}
	return keys
}

func (c *SyncController) sync(ctx context.Context, key cache.ObjectName) error {
	b, err := c.backups.Backups(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if b.Namespace != c.cfg.AdminNamespace || b.Annotations[velerov1.SyncedFromLocationAnnotation] == "" ||
		b.Labels[oadpv1alpha1.NabOriginNACUUIDLabel] != "" || b.DeletionTimestamp != nil {
		return nil
	}
	l := c.tenantLocationOf(b)
	if l == nil {
		return nil // an admin's location
	}
	policy, err := policyOf(c.dpas, c.cfg.AdminNamespace)
	if err != nil {
		return err
	}
	if policy.Disabled() {
		return nil // the DPA's change brings it back
	}
	// Synced backups count toward the namespace's NonAdminBackups: a
	// tenant's bucket makes none past the limit (the Backup waits, and
	// is taken when one goes).
	if max := policy.Limits().MaxBackupsPerNamespace; max > 0 {
		held, err := c.adopter.nabs.NonAdminBackups(l.Namespace).List(labels.Everything())
		if err != nil {
			return err
		}
		if len(held) >= max {
			klog.FromContext(ctx).Info("A tenant's synced backup waits: its namespace holds as many NonAdminBackups as its limit allows",
				"backup", b.Name, "namespace", l.Namespace, "limit", max)
			c.AddAfter(key, time.Minute)
			return nil
		}
	}
	spec := &velerov1.BackupSpec{StorageLocation: l.Name}
	names := []string{b.Name}
	if name := b.Annotations[oadpv1alpha1.SyncedNameAnnotation]; name != "" && name != b.Name && len(validation.IsDNS1123Subdomain(name)) == 0 {
		names = append([]string{name}, names...)
	}
	logger := klog.FromContext(ctx).WithValues("backup", b.Name, "namespace", l.Namespace)
	for _, name := range names {
		got, err := c.adopter.adopt(ctx, l.Namespace, name, spec, b, nil)
		if err != nil {
			return ignoreGone(err)
		}
		if got == adoptedNow {
			logger.Info("Synced a tenant's backup from its storage location", "nonadminbackup", name, "location", l.Name)
			return nil
		}
	}
	logger.Info("A tenant's synced backup has no free NonAdminBackup name; left to the admin", "names", names)
	return nil
}

// tenantLocationOf is the NonAdminBackupStorageLocation b's Velero location
// was made for, nil when there is none (an admin's location, or one whose
// tenant location is gone or names another).
func (c *SyncController) tenantLocationOf(b *velerov1.Backup) *oadpv1alpha1.NonAdminBackupStorageLocation {
	bsl, err := c.velero.BackupStorageLocations(c.cfg.AdminNamespace).Get(b.Spec.StorageLocation)
	if err != nil {
		return nil
	}
	id, ns, name, ok := locationLink.origin(bsl)
	if !ok || bsl.Name != id {
		return nil
	}
	l, err := c.locations.NonAdminBackupStorageLocations(ns).Get(name)
	if err != nil || l.DeletionTimestamp != nil || l.Status.VeleroBackupStorageLocation == nil || l.Status.VeleroBackupStorageLocation.NACUUID != id {
		return nil
	}
	return l
}
