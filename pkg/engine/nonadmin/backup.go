package nonadmin

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	oadpvalidation "github.com/backstop-io/backstop/pkg/apis/oadp/validation"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/failpoint"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	oadpinformers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/oadp/v1alpha1"
	veleroinformers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v1"
	oadplisters "github.com/backstop-io/backstop/pkg/generated/listers/oadp/v1alpha1"
	velerolisters "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
)

// RecheckInterval is how often a refused NonAdminBackup or NonAdminRestore
// is checked again, besides the events of what it depends on.
const RecheckInterval = 30 * time.Second

// DeleteRetryInterval is how long a failed DeleteBackupRequest is shown
// before another is made.
const DeleteRetryInterval = 30 * time.Second

// BackupConfig is what the NonAdminBackup engine needs.
type BackupConfig struct {
	Client versioned.Interface
	// AdminNamespace holds the Velero objects made for tenants.
	AdminNamespace string
	// NonAdminBackups and NonAdminRestores of every namespace.
	NonAdminBackups  oadpinformers.NonAdminBackupInformer
	NonAdminRestores oadpinformers.NonAdminRestoreInformer
	// Backups and DeleteBackupRequests of the admin namespace.
	Backups  veleroinformers.BackupInformer
	Requests veleroinformers.DeleteBackupRequestInformer
	// DPAs of the admin namespace hold the admin's policy.
	DPAs oadpinformers.DataProtectionApplicationInformer
	// TenantLocations (every namespace) and the Velero locations made for
	// them (admin namespace): where a tenant's backup may go.
	TenantLocations oadpinformers.NonAdminBackupStorageLocationInformer
	VeleroLocations veleroinformers.BackupStorageLocationInformer
	Clock           clock.Clock
	// Crash kills the server at a named point (crash-point tests).
	Crash failpoint.Set
	// Observers are told about the phase transitions the engine writes.
	Observers []status.Observer
}

// BackupController is the NonAdminBackup engine.
type BackupController struct {
	*reconcile.Loop
	cfg      BackupConfig
	nabs     oadplisters.NonAdminBackupLister
	nars     oadplisters.NonAdminRestoreLister
	backups  velerolisters.BackupLister
	requests velerolisters.DeleteBackupRequestLister
	dpas     oadplisters.DataProtectionApplicationLister
	// locations: where backups may go.
	locations locations
	status    status.Writer
	// made links each NonAdminBackup to the Backup made for it.
	made *mirror[*oadpv1alpha1.NonAdminBackup, *velerov1.Backup]
	// orphans deletes Velero Backups whose NonAdminBackup is gone.
	orphans *orphans
}

// NewBackupController returns the engine.
func NewBackupController(cfg BackupConfig) (*BackupController, error) {
	c := &BackupController{cfg: cfg, nabs: cfg.NonAdminBackups.Lister(), nars: cfg.NonAdminRestores.Lister(),
		backups: cfg.Backups.Lister(), requests: cfg.Requests.Lister(), dpas: cfg.DPAs.Lister(),
		locations: locations{adminNamespace: cfg.AdminNamespace, tenant: cfg.TenantLocations.Lister(), velero: cfg.VeleroLocations.Lister()},
		status:    status.Writer{Engine: oadpv1alpha1.EngineNonAdminBackup, Observers: cfg.Observers}}
	c.made = newMirror[*oadpv1alpha1.NonAdminBackup, *velerov1.Backup](backupLink, cfg.AdminNamespace, c.status.Engine, "NonAdminBackup", "Backup",
		c.nabs.NonAdminBackups, cfg.Client.OadpV1alpha1().NonAdminBackups, c.backups.Backups(cfg.AdminNamespace), cfg.Client.VeleroV1().Backups(cfg.AdminNamespace), recordedBackup)
	// Found in a storage location, not made here: adopted or left by the
	// non-admin sync, never deleted as an orphan.
	c.made.keep = func(b *velerov1.Backup) bool { return b.Annotations[velerov1.SyncedFromLocationAnnotation] != "" }
	c.made.orphanMessage += ", with its data"
	c.Loop = reconcile.NewLoop(oadpv1alpha1.EngineNonAdminBackup, c.sync)
	if err := c.Watch(cfg.NonAdminBackups.Informer()); err != nil {
		return nil, err
	}
	if err := c.WatchMapped(cfg.Backups.Informer(), backupLink.route); err != nil {
		return nil, err
	}
	if err := c.WatchMapped(cfg.Requests.Informer(), backupLink.route); err != nil {
		return nil, err
	}
	c.WaitFor(cfg.NonAdminRestores.Informer())
	// A policy changed may refuse, or let go, those not made yet.
	if err := c.WatchMapped(cfg.DPAs.Informer(), func(any) []cache.ObjectName {
		return notCreated(c.nabs.List, func(n *oadpv1alpha1.NonAdminBackup) oadpv1alpha1.NonAdminPhase { return n.Status.Phase })
	}); err != nil {
		return nil, err
	}
	// A location approved, made Available, or withdrawn lets go, or
	// refuses, the backups of its namespace not made yet.
	if err := c.WatchMapped(cfg.TenantLocations.Informer(), func(obj any) []cache.ObjectName {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil
		}
		return waitingFor(c.nabs, m.GetNamespace(), m.GetName())
	}); err != nil {
		return nil, err
	}
	c.WaitFor(cfg.VeleroLocations.Informer())

	// A NonAdminBackup gone (its finalizer removed by hand) leaves its
	// Backup behind.
	var err error
	if c.orphans, err = orphanLoop(oadpv1alpha1.EngineNonAdminBackup, c.made, cfg.NonAdminBackups.Informer(), cfg.Backups.Informer()); err != nil {
		return nil, err
	}
	return c, nil
}

// Orphans is the engine's orphan loop, for the garbage collection.
func (c *BackupController) Orphans() Resyncer { return c.orphans }

// Run processes NonAdminBackups and orphaned Backups until ctx is done.
func (c *BackupController) Run(ctx context.Context, workers int) {
	go c.orphans.Run(ctx, 1)
	c.Loop.Run(ctx, workers)
}

func (c *BackupController) sync(ctx context.Context, key cache.ObjectName) error {
	nab, err := c.nabs.NonAdminBackups(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case nab.Spec.ForceDeleteBackup:
		return c.forceDelete(ctx, nab)
	case nab.Spec.DeleteBackup:
		return c.deleteBackup(ctx, nab)
	case nab.DeletionTimestamp != nil:
		return c.deletePending(ctx, nab)
	}
	return c.reconcile(ctx, nab)
}

// reconcile brings a NonAdminBackup that is not being deleted along: its
// spec checked, its NACUUID recorded, its Backup made, then mirrored.
func (c *BackupController) reconcile(ctx context.Context, nab *oadpv1alpha1.NonAdminBackup) error {
	logger := klog.FromContext(ctx).WithValues("nonadminbackup", klog.KObj(nab))
	if nab.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated {
		return c.mirror(ctx, nab)
	}
	if vb := nab.Status.VeleroBackup; vb != nil && vb.NACUUID != "" {
		// Made before a restart that came before phase Created was written.
		b, err := c.made.of(ctx, nab)
		if err != nil {
			return err
		}
		if b != nil {
			return c.created(ctx, nab, b)
		}
	}
	if nab.Labels[oadpv1alpha1.NabSyncLabel] != "" {
		// Made for a backup that exists (a tenant's schedule ran it): it
		// is adopted once its status names the backup and the backup is
		// linked to it; no backup is ever made here for it.
		return nil
	}
	spec, problem, err := c.checkBackup(nab)
	if err != nil {
		return err
	}
	if problem != "" {
		if _, err := c.writeStatus(ctx, nab, func(st *oadpv1alpha1.NonAdminBackupStatus) {
			st.Phase = oadpv1alpha1.NonAdminPhaseBackingOff
			setCondition(&st.Conditions, nab.Generation, oadpv1alpha1.NonAdminConditionAccepted, false, oadpv1alpha1.ReasonInvalidBackupSpec, problem)
		}); err != nil {
			return err
		}
		logger.V(2).Info("NonAdminBackup refused; checking again later", "problem", problem)
		c.AddAfter(cache.MetaObjectToName(nab), RecheckInterval)
		return nil
	}
	// The NACUUID is recorded before the Backup exists: a restart makes
	// the same Backup, never a second one.
	nab, err = c.writeStatus(ctx, nab, func(st *oadpv1alpha1.NonAdminBackupStatus) {
		if st.Phase == "" {
			st.Phase = oadpv1alpha1.NonAdminPhaseNew
		}
		setCondition(&st.Conditions, nab.Generation, oadpv1alpha1.NonAdminConditionAccepted, true, oadpv1alpha1.ReasonBackupAccepted, oadpv1alpha1.MessageBackupAccepted)
		if st.VeleroBackup == nil || st.VeleroBackup.NACUUID == "" {
			id := oadpv1alpha1.NewNACUUID(nab.Namespace, nab.Name)
			st.VeleroBackup = &oadpv1alpha1.VeleroBackup{NACUUID: id, Name: id, Namespace: c.cfg.AdminNamespace}
		}
	})
	if err != nil || nab.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated {
		return ignoreGone(err)
	}
	// Removed by hand: back before there is anything to clean up.
	if nab, err = reconcile.AddFinalizer(ctx, c.cfg.Client.OadpV1alpha1().NonAdminBackups(nab.Namespace), nab, oadpv1alpha1.NonAdminBackupFinalizer, c.status.Engine); err != nil {
		return ignoreGone(err)
	}
	c.cfg.Crash.Hit(failpoint.NonAdminBackupRecorded)
	backup, err := c.createBackup(ctx, nab, spec)
	if err != nil {
		return err
	}
	c.cfg.Crash.Hit(failpoint.NonAdminBackupMade)
	logger.V(2).Info("Velero Backup created", "backup", backup.Name)
	return c.created(ctx, nab, backup)
}

// created writes phase Created, with the Backup made.
func (c *BackupController) created(ctx context.Context, nab *oadpv1alpha1.NonAdminBackup, b *velerov1.Backup) error {
	_, err := c.writeStatus(ctx, nab, func(st *oadpv1alpha1.NonAdminBackupStatus) {
		st.Phase = oadpv1alpha1.NonAdminPhaseCreated
		setCondition(&st.Conditions, nab.Generation, oadpv1alpha1.NonAdminConditionAccepted, true, oadpv1alpha1.ReasonBackupAccepted, oadpv1alpha1.MessageBackupAccepted)
		setCondition(&st.Conditions, nab.Generation, oadpv1alpha1.NonAdminConditionQueued, true, oadpv1alpha1.ReasonBackupScheduled, oadpv1alpha1.MessageBackupScheduled)
		mirrorBackup(st, b)
	})
	return ignoreGone(err)
}

// checkBackup applies the tenant rules to a NonAdminBackup's spec again
// (the policy or its location may have changed since admission) and
// returns the Velero backup spec to make, or why not.
func (c *BackupController) checkBackup(nab *oadpv1alpha1.NonAdminBackup) (*velerov1.BackupSpec, string, error) {
	var spec oadp.NonAdminBackupSpec
	if err := oadpv1alpha1.Convert_v1alpha1_NonAdminBackupSpec_To_oadp_NonAdminBackupSpec(&nab.Spec, &spec, nil); err != nil {
		return nil, "", err
	}
	policy, err := policyOf(c.dpas, c.cfg.AdminNamespace)
	if err != nil {
		return nil, "", err
	}
	errs := oadpvalidation.ValidateNonAdminBackupSpec(nab.Namespace, &spec, field.NewPath("spec"))
	errs = append(errs, oadpvalidation.ValidateBackupPolicy(spec.BackupSpec, policy, field.NewPath("spec", "backupSpec"))...)
	if len(errs) > 0 {
		return nil, errs.ToAggregate().Error(), nil
	}
	return c.locations.veleroBackupSpec(nab.Namespace, spec.BackupSpec, policy)
}

// waitingFor lists the NonAdminBackups of namespace not made yet that
// name the location name.
func waitingFor(nabs oadplisters.NonAdminBackupLister, namespace, name string) []cache.ObjectName {
	all, err := nabs.NonAdminBackups(namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var keys []cache.ObjectName
	for _, n := range all {
		if n.Status.Phase != oadpv1alpha1.NonAdminPhaseCreated && n.DeletionTimestamp == nil && n.Spec.BackupSpec != nil && n.Spec.BackupSpec.StorageLocation == name {
			keys = append(keys, cache.MetaObjectToName(n))
		}
	}
	return keys
}

// notCreated lists the keys of the objects list returns whose phase is not
// Created yet (every namespace): what a policy change may affect.
func notCreated[T any, PT interface {
	*T
	metav1.Object
}](list func(labels.Selector) ([]PT, error), phase func(PT) oadpv1alpha1.NonAdminPhase) []cache.ObjectName {
	all, err := list(labels.Everything())
	if err != nil {
		return nil
	}
	var keys []cache.ObjectName
	for _, o := range all {
		if phase(o) != oadpv1alpha1.NonAdminPhaseCreated && o.GetDeletionTimestamp() == nil {
			keys = append(keys, cache.MetaObjectToName(o))
		}
	}
	return keys
}

// createBackup makes the NonAdminBackup's Backup, or finds it made.
func (c *BackupController) createBackup(ctx context.Context, nab *oadpv1alpha1.NonAdminBackup, spec *velerov1.BackupSpec) (*velerov1.Backup, error) {
	id := nab.Status.VeleroBackup.NACUUID
	b := &velerov1.Backup{ObjectMeta: backupLink.objectMeta(c.cfg.AdminNamespace, id, id, nab), Spec: *spec}
	// Who made it: an admin's restore of the backup runs with that user's
	// rights (the restore engine).
	if who := nab.Annotations[oadpv1alpha1.CreatedByAnnotation]; who != "" {
		b.Annotations[oadpv1alpha1.CreatedByAnnotation] = who
	}
	return c.made.create(ctx, nab, b)
}

// recordedBackup is the Backup nab's status records: name and NACUUID.
func recordedBackup(nab *oadpv1alpha1.NonAdminBackup) (name, nacuuid string) {
	if vb := nab.Status.VeleroBackup; vb != nil {
		return vb.Name, vb.NACUUID
	}
	return "", ""
}

// ownedBackup: b is the Backup nab's status names, made for it.
func ownedBackup(nab *oadpv1alpha1.NonAdminBackup, b *velerov1.Backup) bool {
	return owns(backupLink, recordedBackup, nab, b)
}

// mirror copies the Backup's spec and status into a Created
// NonAdminBackup; a Backup gone (expired, deleted by an admin) is said in
// condition Accepted.
func (c *BackupController) mirror(ctx context.Context, nab *oadpv1alpha1.NonAdminBackup) error {
	b, err := c.made.of(ctx, nab)
	if err != nil {
		return err
	}
	if b != nil {
		if err := c.passVerifyRequest(ctx, nab, b); err != nil {
			return err
		}
	}
	_, err = c.writeStatus(ctx, nab, func(st *oadpv1alpha1.NonAdminBackupStatus) {
		if b == nil {
			setCondition(&st.Conditions, nab.Generation, oadpv1alpha1.NonAdminConditionAccepted, false, oadpv1alpha1.ReasonVeleroBackupNotFound, oadpv1alpha1.MessageVeleroBackupNotFound)
			return
		}
		mirrorBackup(st, b)
	})
	return ignoreGone(err)
}

// passVerifyRequest passes the tenant's request for a verification (the
// NonAdminBackup's backstop.io/verify annotation) on to its Backup, whose
// verification the status mirrors (status.veleroBackup.status.verification
// and its Verified condition).
func (c *BackupController) passVerifyRequest(ctx context.Context, nab *oadpv1alpha1.NonAdminBackup, b *velerov1.Backup) error {
	want := nab.Annotations[velerov1.VerifyAnnotation]
	if want == "" || want == b.Annotations[velerov1.VerifyAnnotation] {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{velerov1.VerifyAnnotation: want}}})
	if err != nil {
		return err
	}
	if _, err := c.cfg.Client.VeleroV1().Backups(b.Namespace).Patch(ctx, b.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: c.status.Engine}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("passing the verification request of NonAdminBackup %s/%s on to backup %s: %w", nab.Namespace, nab.Name, b.Name, err)
	}
	return nil
}

// mirrorBackup copies b into the status. The queue positions are the
// registry's, filled in when read: never stored, so that a copy read with
// them (a list) is written back without them, and the queue moving
// rewrites nothing.
func mirrorBackup(st *oadpv1alpha1.NonAdminBackupStatus, b *velerov1.Backup) {
	spec, bs := b.Spec.DeepCopy(), b.Status.DeepCopy()
	bs.QueuePosition = 0
	st.VeleroBackup.Spec, st.VeleroBackup.Status = spec, bs
	st.QueueInfo = &oadpv1alpha1.QueueInfo{}
}

// deletePending: deleted without deleteBackup or forceDeleteBackup. With a
// Backup, the NonAdminBackup waits until its owner says what becomes of
// the data; without one there is nothing to keep and it goes.
func (c *BackupController) deletePending(ctx context.Context, nab *oadpv1alpha1.NonAdminBackup) error {
	b, err := c.made.of(ctx, nab)
	if err != nil {
		return err
	}
	if b == nil {
		return c.removeFinalizer(ctx, nab)
	}
	_, err = c.writeStatus(ctx, nab, func(st *oadpv1alpha1.NonAdminBackupStatus) {
		st.Phase = oadpv1alpha1.NonAdminPhaseDeleting
		setCondition(&st.Conditions, nab.Generation, oadpv1alpha1.NonAdminConditionDeleting, true, oadpv1alpha1.ReasonDeletionPending, oadpv1alpha1.MessageBackupDeleteNeedsSpec)
	})
	return ignoreGone(err)
}

// forceDelete: the NonAdminBackup goes at once; its Backup is deleted, and
// with it its data (a running backup is stopped first), in the background.
func (c *BackupController) forceDelete(ctx context.Context, nab *oadpv1alpha1.NonAdminBackup) error {
	nab, err := c.startDeleting(ctx, nab)
	if err != nil || nab == nil {
		return err
	}
	b, err := c.made.of(ctx, nab)
	if err != nil {
		return err
	}
	if b != nil && b.DeletionTimestamp == nil {
		if err := reconcile.DeleteIfUnchanged(ctx, c.cfg.Client.VeleroV1().Backups(c.cfg.AdminNamespace).Delete, b.Name, b.UID); err != nil {
			return fmt.Errorf("deleting backup %s of NonAdminBackup %s/%s: %w", b.Name, nab.Namespace, nab.Name, err)
		}
	}
	if err := c.deleteRestores(ctx, nab); err != nil {
		return err
	}
	return c.removeFinalizer(ctx, nab)
}

// deleteBackup: the Backup and its data are deleted through a
// DeleteBackupRequest, whose status is mirrored; the NonAdminBackup goes
// when the Backup is gone. A failed request is shown and made again.
func (c *BackupController) deleteBackup(ctx context.Context, nab *oadpv1alpha1.NonAdminBackup) error {
	nab, err := c.startDeleting(ctx, nab)
	if err != nil || nab == nil {
		return err
	}
	if err := c.deleteRestores(ctx, nab); err != nil {
		return err
	}
	b, err := c.made.of(ctx, nab)
	if err != nil {
		return err
	}
	if b == nil {
		return c.removeFinalizer(ctx, nab)
	}
	req, err := c.latestRequest(b)
	if err != nil {
		return err
	}
	now := c.cfg.Clock.Now()
	// A request that ended with errors left the Backup: shown, and made
	// again after DeleteRetryInterval, or, for a backup locked in its
	// storage location, once the lock ends (the request said until when).
	// One that succeeded leaves a Backup being deleted (its data
	// finalizer): waited for.
	failed := req != nil && req.Status.Phase == velerov1.DeleteBackupRequestPhaseProcessed && len(req.Status.Errors) > 0 && b.DeletionTimestamp == nil
	var retryAt time.Time
	if req != nil {
		retryAt = req.CreationTimestamp.Add(DeleteRetryInterval)
		if until, _, locked := velerov1.LockedUntil(b); locked && until.After(retryAt) {
			retryAt = until
		}
	}
	if req == nil || (failed && !now.Before(retryAt)) {
		if req, err = c.createRequest(ctx, nab, b); err != nil {
			return err
		}
		c.cfg.Crash.Hit(failpoint.NonAdminBackupDeleting)
	} else if failed {
		c.AddAfter(cache.MetaObjectToName(nab), retryAt.Sub(now))
	}
	_, err = c.writeStatus(ctx, nab, func(st *oadpv1alpha1.NonAdminBackupStatus) {
		st.VeleroDeleteBackupRequest = &oadpv1alpha1.VeleroDeleteBackupRequest{
			NACUUID: nab.Status.VeleroBackup.NACUUID, Name: req.Name, Namespace: req.Namespace, Status: req.Status.DeepCopy()}
	})
	return ignoreGone(err)
}

// startDeleting writes phase Deleting and marks the NonAdminBackup deleted
// (it stays until its finalizer goes); nil when it is gone.
func (c *BackupController) startDeleting(ctx context.Context, nab *oadpv1alpha1.NonAdminBackup) (*oadpv1alpha1.NonAdminBackup, error) {
	nab, err := c.writeStatus(ctx, nab, func(st *oadpv1alpha1.NonAdminBackupStatus) {
		st.Phase = oadpv1alpha1.NonAdminPhaseDeleting
		setCondition(&st.Conditions, nab.Generation, oadpv1alpha1.NonAdminConditionDeleting, true, oadpv1alpha1.ReasonDeletionPending, oadpv1alpha1.MessageBackupDeletionPending)
	})
	if err != nil {
		return nil, ignoreGone(err)
	}
	if nab.DeletionTimestamp == nil {
		if err := reconcile.DeleteIfUnchanged(ctx, c.cfg.Client.OadpV1alpha1().NonAdminBackups(nab.Namespace).Delete, nab.Name, nab.UID); err != nil {
			return nil, err
		}
	}
	return nab, nil
}

// deleteRestores deletes the NonAdminRestores made from nab.
func (c *BackupController) deleteRestores(ctx context.Context, nab *oadpv1alpha1.NonAdminBackup) error {
	nars, err := c.nars.NonAdminRestores(nab.Namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	for _, nar := range nars {
		if nar.Spec.RestoreSpec == nil || nar.Spec.RestoreSpec.BackupName != nab.Name || nar.DeletionTimestamp != nil {
			continue
		}
		if err := reconcile.DeleteIfUnchanged(ctx, c.cfg.Client.OadpV1alpha1().NonAdminRestores(nar.Namespace).Delete, nar.Name, nar.UID); err != nil {
			return fmt.Errorf("deleting NonAdminRestore %s/%s of a deleted NonAdminBackup: %w", nar.Namespace, nar.Name, err)
		}
	}
	return nil
}

// latestRequest is the newest DeleteBackupRequest of b.
func (c *BackupController) latestRequest(b *velerov1.Backup) (*velerov1.DeleteBackupRequest, error) {
	reqs, err := c.requests.DeleteBackupRequests(c.cfg.AdminNamespace).List(labels.SelectorFromSet(labels.Set{velerov1.BackupNameLabel: b.Name}))
	if err != nil {
		return nil, err
	}
	var latest *velerov1.DeleteBackupRequest
	for _, r := range reqs {
		if r.Spec.BackupName != b.Name {
			continue
		}
		if latest == nil || r.CreationTimestamp.After(latest.CreationTimestamp.Time) ||
			(r.CreationTimestamp.Equal(&latest.CreationTimestamp) && r.Name > latest.Name) {
			latest = r
		}
	}
	return latest, nil
}

func (c *BackupController) createRequest(ctx context.Context, nab *oadpv1alpha1.NonAdminBackup, b *velerov1.Backup) (*velerov1.DeleteBackupRequest, error) {
	req := &velerov1.DeleteBackupRequest{
		ObjectMeta: backupLink.objectMeta(c.cfg.AdminNamespace, "", nab.Status.VeleroBackup.NACUUID, nab),
		Spec:       velerov1.DeleteBackupRequestSpec{BackupName: b.Name},
	}
	req.GenerateName = b.Name + "-"
	req.Labels[velerov1.BackupNameLabel], req.Labels[velerov1.BackupUIDLabel] = b.Name, string(b.UID)
	out, err := c.cfg.Client.VeleroV1().DeleteBackupRequests(c.cfg.AdminNamespace).Create(ctx, req, metav1.CreateOptions{FieldManager: c.status.Engine})
	if err != nil {
		return nil, fmt.Errorf("requesting the deletion of backup %s of NonAdminBackup %s/%s: %w", b.Name, nab.Namespace, nab.Name, err)
	}
	return out, nil
}

func (c *BackupController) removeFinalizer(ctx context.Context, nab *oadpv1alpha1.NonAdminBackup) error {
	return reconcile.RemoveFinalizer(ctx, c.cfg.Client.OadpV1alpha1().NonAdminBackups(nab.Namespace), nab, oadpv1alpha1.NonAdminBackupFinalizer, c.status.Engine)
}

func (c *BackupController) writeStatus(ctx context.Context, nab *oadpv1alpha1.NonAdminBackup, mutate func(*oadpv1alpha1.NonAdminBackupStatus)) (*oadpv1alpha1.NonAdminBackup, error) {
	return c.status.NonAdminBackups(c.cfg.Client, nab.Namespace).Update(ctx, nab, func(cur *oadpv1alpha1.NonAdminBackup) { mutate(&cur.Status) })
}

// setCondition sets one condition, its transition time kept when its
// status does not change.
func setCondition(conds *[]metav1.Condition, generation int64, t oadpv1alpha1.NonAdminCondition, ok bool, reason, message string) {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: string(t), Status: s, Reason: reason, Message: message, ObservedGeneration: generation})
}

func ignoreGone(err error) error {
	if status.Gone(err) {
		return nil
	}
	return err
}
