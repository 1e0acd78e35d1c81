package nonadmin

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	oadpvalidation "github.com/backstop-io/backstop/pkg/apis/oadp/validation"
	"github.com/backstop-io/backstop/pkg/apis/restoreas"
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

// RestoreConfig is what the NonAdminRestore engine needs.
type RestoreConfig struct {
	Client         versioned.Interface
	AdminNamespace string
	// NonAdminRestores and NonAdminBackups of every namespace.
	NonAdminRestores oadpinformers.NonAdminRestoreInformer
	NonAdminBackups  oadpinformers.NonAdminBackupInformer
	// Restores and Backups of the admin namespace.
	Restores veleroinformers.RestoreInformer
	Backups  veleroinformers.BackupInformer
	// DPAs of the admin namespace hold the admin's policy.
	DPAs      oadpinformers.DataProtectionApplicationInformer
	Observers []status.Observer
	// Crash kills the server at a named point (crash-point tests).
	Crash failpoint.Set
}

// RestoreController is the NonAdminRestore engine.
type RestoreController struct {
	*reconcile.Loop
	cfg      RestoreConfig
	nars     oadplisters.NonAdminRestoreLister
	nabs     oadplisters.NonAdminBackupLister
	restores velerolisters.RestoreLister
	backups  velerolisters.BackupLister
	dpas     oadplisters.DataProtectionApplicationLister
	status   status.Writer
	// made links each NonAdminRestore to the Restore made for it.
	made    *mirror[*oadpv1alpha1.NonAdminRestore, *velerov1.Restore]
	orphans *orphans
}

// NewRestoreController returns the engine.
func NewRestoreController(cfg RestoreConfig) (*RestoreController, error) {
	c := &RestoreController{cfg: cfg, nars: cfg.NonAdminRestores.Lister(), nabs: cfg.NonAdminBackups.Lister(),
		restores: cfg.Restores.Lister(), backups: cfg.Backups.Lister(), dpas: cfg.DPAs.Lister(),
		status: status.Writer{Engine: oadpv1alpha1.EngineNonAdminRestore, Observers: cfg.Observers}}
	c.made = newMirror[*oadpv1alpha1.NonAdminRestore, *velerov1.Restore](restoreLink, cfg.AdminNamespace, c.status.Engine, "NonAdminRestore", "Restore",
		c.nars.NonAdminRestores, cfg.Client.OadpV1alpha1().NonAdminRestores, c.restores.Restores(cfg.AdminNamespace), cfg.Client.VeleroV1().Restores(cfg.AdminNamespace), recordedRestore)
	c.Loop = reconcile.NewLoop(oadpv1alpha1.EngineNonAdminRestore, c.sync)
	if err := c.Watch(cfg.NonAdminRestores.Informer()); err != nil {
		return nil, err
	}
	if err := c.WatchMapped(cfg.Restores.Informer(), restoreLink.route); err != nil {
		return nil, err
	}
	// A NonAdminBackup that changes may make the restores waiting for it
	// ready.
	if err := c.WatchMapped(cfg.NonAdminBackups.Informer(), func(obj any) []cache.ObjectName {
		nab, ok := obj.(*oadpv1alpha1.NonAdminBackup)
		if !ok {
			return nil
		}
		nars, err := c.nars.NonAdminRestores(nab.Namespace).List(labels.Everything())
		if err != nil {
			return nil
		}
		var keys []cache.ObjectName
		for _, nar := range nars {
			if nar.Spec.RestoreSpec != nil && nar.Spec.RestoreSpec.BackupName == nab.Name && nar.Status.Phase != oadpv1alpha1.NonAdminPhaseCreated {
				keys = append(keys, cache.MetaObjectToName(nar))
			}
		}
		return keys
	}); err != nil {
		return nil, err
	}
	c.WaitFor(cfg.Backups.Informer())
	if err := c.WatchMapped(cfg.DPAs.Informer(), func(any) []cache.ObjectName {
		return notCreated(c.nars.List, func(n *oadpv1alpha1.NonAdminRestore) oadpv1alpha1.NonAdminPhase { return n.Status.Phase })
	}); err != nil {
		return nil, err
	}

	var err error
	if c.orphans, err = orphanLoop(oadpv1alpha1.EngineNonAdminRestore, c.made, cfg.NonAdminRestores.Informer(), cfg.Restores.Informer()); err != nil {
		return nil, err
	}
	return c, nil
}

// Orphans is the engine's orphan loop, for the garbage collection.
func (c *RestoreController) Orphans() Resyncer { return c.orphans }

// Run processes NonAdminRestores and orphaned Restores until ctx is done.
func (c *RestoreController) Run(ctx context.Context, workers int) {
	go c.orphans.Run(ctx, 1)
	c.Loop.Run(ctx, workers)
}

func (c *RestoreController) sync(ctx context.Context, key cache.ObjectName) error {
	nar, err := c.nars.NonAdminRestores(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if nar.DeletionTimestamp != nil {
		return c.delete(ctx, nar)
	}
	r, err := c.made.of(ctx, nar)
	if err != nil {
		return err
	}
	if r != nil {
		return c.created(ctx, nar, r)
	}
	if nar.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated {
		_, err := c.writeStatus(ctx, nar, func(st *oadpv1alpha1.NonAdminRestoreStatus) {
			setCondition(&st.Conditions, nar.Generation, oadpv1alpha1.NonAdminConditionAccepted, false, oadpv1alpha1.ReasonVeleroRestoreNotFound, oadpv1alpha1.MessageVeleroRestoreNotFound)
		})
		return ignoreGone(err)
	}
	spec, problem, err := c.checkRestore(nar)
	if err != nil {
		return err
	}
	if problem == "" {
		// Fail closed: a restore for nobody would write with the
		// server's rights.
		problem = creatorProblem(nar)
	}
	if problem != "" {
		if _, err := c.writeStatus(ctx, nar, func(st *oadpv1alpha1.NonAdminRestoreStatus) {
			st.Phase = oadpv1alpha1.NonAdminPhaseBackingOff
			setCondition(&st.Conditions, nar.Generation, oadpv1alpha1.NonAdminConditionAccepted, false, oadpv1alpha1.ReasonInvalidRestoreSpec, problem)
		}); err != nil {
			return ignoreGone(err)
		}
		klog.FromContext(ctx).V(2).Info("NonAdminRestore refused; checking again later", "nonadminrestore", klog.KObj(nar), "problem", problem)
		c.AddAfter(key, RecheckInterval)
		return nil
	}
	nar, err = c.writeStatus(ctx, nar, func(st *oadpv1alpha1.NonAdminRestoreStatus) {
		if st.Phase == "" {
			st.Phase = oadpv1alpha1.NonAdminPhaseNew
		}
		setCondition(&st.Conditions, nar.Generation, oadpv1alpha1.NonAdminConditionAccepted, true, oadpv1alpha1.ReasonRestoreAccepted, oadpv1alpha1.MessageRestoreAccepted)
		if st.VeleroRestore == nil || st.VeleroRestore.NACUUID == "" {
			id := oadpv1alpha1.NewNACUUID(nar.Namespace, nar.Name)
			st.VeleroRestore = &oadpv1alpha1.VeleroRestore{NACUUID: id, Name: id, Namespace: c.cfg.AdminNamespace}
		}
	})
	if err != nil {
		return ignoreGone(err)
	}
	if nar, err = reconcile.AddFinalizer(ctx, c.cfg.Client.OadpV1alpha1().NonAdminRestores(nar.Namespace), nar, oadpv1alpha1.NonAdminRestoreFinalizer, c.status.Engine); err != nil {
		return ignoreGone(err)
	}
	id := nar.Status.VeleroRestore.NACUUID
	r = &velerov1.Restore{ObjectMeta: restoreLink.objectMeta(c.cfg.AdminNamespace, id, id, nar), Spec: *spec}
	// It restores with the rights of whoever created the NonAdminRestore
	// (creatorProblem made sure there is one).
	r.Annotations[restoreas.Annotation] = nar.Annotations[oadpv1alpha1.CreatedByAnnotation]
	created, err := c.made.create(ctx, nar, r)
	if err != nil {
		return err
	}
	c.cfg.Crash.Hit(failpoint.NonAdminRestoreMade)
	return c.created(ctx, nar, created)
}

// checkRestore applies the tenant rules to a NonAdminRestore again and
// checks the NonAdminBackup it names: of the same namespace, Created, its
// Backup finished and restorable. It returns the Velero restore spec to
// make, or why not.
func (c *RestoreController) checkRestore(nar *oadpv1alpha1.NonAdminRestore) (*velerov1.RestoreSpec, string, error) {
	var spec oadp.NonAdminRestoreSpec
	if err := oadpv1alpha1.Convert_v1alpha1_NonAdminRestoreSpec_To_oadp_NonAdminRestoreSpec(&nar.Spec, &spec, nil); err != nil {
		return nil, "", err
	}
	policy, err := policyOf(c.dpas, c.cfg.AdminNamespace)
	if err != nil {
		return nil, "", err
	}
	errs := oadpvalidation.ValidateNonAdminRestoreSpec(nar.Namespace, &spec, field.NewPath("spec"))
	errs = append(errs, oadpvalidation.ValidateRestorePolicy(spec.RestoreSpec, policy, field.NewPath("spec", "restoreSpec"))...)
	if len(errs) > 0 {
		return nil, errs.ToAggregate().Error(), nil
	}
	name := spec.RestoreSpec.BackupName
	nab, err := c.nabs.NonAdminBackups(nar.Namespace).Get(name)
	if err != nil {
		return nil, fmt.Sprintf("NonAdminRestore spec.restoreSpec.backupName is invalid: NonAdminBackup %s not found in namespace %s", name, nar.Namespace), nil
	}
	notReady := "NonAdminRestore spec.restoreSpec.backupName is invalid: NonAdminBackup is not ready to be restored"
	if nab.DeletionTimestamp != nil || nab.Status.Phase != oadpv1alpha1.NonAdminPhaseCreated || nab.Status.VeleroBackup == nil {
		return nil, notReady, nil
	}
	b, err := c.backups.Backups(c.cfg.AdminNamespace).Get(nab.Status.VeleroBackup.Name)
	if err != nil || !ownedBackup(nab, b) {
		return nil, notReady + ": its Velero Backup is gone", nil
	}
	if !b.Status.Phase.Terminal() {
		return nil, fmt.Sprintf("%s: its backup is %s", notReady, phaseOr(string(b.Status.Phase), "New")), nil
	}
	if !b.Status.Phase.Restorable() {
		return nil, fmt.Sprintf("%s: its backup ended %s", notReady, b.Status.Phase), nil
	}
	oadpvalidation.EnforceRestore(spec.RestoreSpec, policy)
	internal := oadpvalidation.TenantRestoreSpec(nar.Namespace, spec.RestoreSpec, b.Name)
	var out velerov1.RestoreSpec
	if err := velerov1.Convert_velero_RestoreSpec_To_v1_RestoreSpec(internal, &out, nil); err != nil {
		return nil, "", err
	}
	return &out, "", nil
}

func phaseOr(p, otherwise string) string {
	if p == "" {
		return otherwise
	}
	return p
}

// withoutObjects drops the objects of a preview's items: every reader of
// a NonAdminRestore (a user bound to view in its namespace) reads its
// status, and a dry run's answer holds what only some of them may get (a
// Secret, a Role's rules). Its items' names, actions and reasons, counts,
// volumes, errors and warnings stay; the objects, each shown to those
// who may get it, are the nonadminrestores/preview subresource's.
func withoutObjects(st *velerov1.RestoreStatus) *velerov1.RestoreStatus {
	if p := st.Preview; p != nil {
		for i := range p.Items {
			p.Items[i].Object = nil
		}
	}
	return st
}

// recordedRestore is the Restore nar's status records: name and NACUUID.
func recordedRestore(nar *oadpv1alpha1.NonAdminRestore) (name, nacuuid string) {
	if vr := nar.Status.VeleroRestore; vr != nil {
		return vr.Name, vr.NACUUID
	}
	return "", ""
}

// created writes phase Created and mirrors the Restore's status.
func (c *RestoreController) created(ctx context.Context, nar *oadpv1alpha1.NonAdminRestore, r *velerov1.Restore) error {
	_, err := c.writeStatus(ctx, nar, func(st *oadpv1alpha1.NonAdminRestoreStatus) {
		st.Phase = oadpv1alpha1.NonAdminPhaseCreated
		setCondition(&st.Conditions, nar.Generation, oadpv1alpha1.NonAdminConditionAccepted, true, oadpv1alpha1.ReasonRestoreAccepted, oadpv1alpha1.MessageRestoreAccepted)
		setCondition(&st.Conditions, nar.Generation, oadpv1alpha1.NonAdminConditionQueued, true, oadpv1alpha1.ReasonRestoreScheduled, oadpv1alpha1.MessageRestoreScheduled)
		st.VeleroRestore.Status = withoutObjects(r.Status.DeepCopy())
		// The position is the registry's, filled in when read: never
		// stored (a copy read with it is written back without it).
		st.QueueInfo = &oadpv1alpha1.QueueInfo{}
	})
	return ignoreGone(err)
}

// delete: the Restore goes (its log and results with it), then the
// NonAdminRestore.
func (c *RestoreController) delete(ctx context.Context, nar *oadpv1alpha1.NonAdminRestore) error {
	r, err := c.made.of(ctx, nar)
	if err != nil {
		return err
	}
	if r == nil {
		return reconcile.RemoveFinalizer(ctx, c.cfg.Client.OadpV1alpha1().NonAdminRestores(nar.Namespace), nar, oadpv1alpha1.NonAdminRestoreFinalizer, c.status.Engine)
	}
	if _, err := c.writeStatus(ctx, nar, func(st *oadpv1alpha1.NonAdminRestoreStatus) {
		st.Phase = oadpv1alpha1.NonAdminPhaseDeleting
		setCondition(&st.Conditions, nar.Generation, oadpv1alpha1.NonAdminConditionDeleting, true, oadpv1alpha1.ReasonDeletionPending, oadpv1alpha1.MessageRestoreDeletionPending)
	}); err != nil {
		return ignoreGone(err)
	}
	if r.DeletionTimestamp == nil {
		return reconcile.DeleteIfUnchanged(ctx, c.cfg.Client.VeleroV1().Restores(c.cfg.AdminNamespace).Delete, r.Name, r.UID)
	}
	return nil
}

func (c *RestoreController) writeStatus(ctx context.Context, nar *oadpv1alpha1.NonAdminRestore, mutate func(*oadpv1alpha1.NonAdminRestoreStatus)) (*oadpv1alpha1.NonAdminRestore, error) {
	return c.status.NonAdminRestores(c.cfg.Client, nar.Namespace).Update(ctx, nar, func(cur *oadpv1alpha1.NonAdminRestore) { mutate(&cur.Status) })
}

// creatorProblem says why a NonAdminRestore cannot be restored for the
// user admission recorded as its creator: none recorded (made by the
// server itself, or stored before the record existed), or a record that
// names the server or system:masters; "" when it can.
func creatorProblem(nar *oadpv1alpha1.NonAdminRestore) string {
	as, ok, err := restoreas.Of(map[string]string{restoreas.Annotation: nar.Annotations[oadpv1alpha1.CreatedByAnnotation]})
	switch {
	case nar.Annotations[oadpv1alpha1.CreatedByAnnotation] == "" || !ok:
		return "NonAdminRestore has no record of the user who created it (" + oadpv1alpha1.CreatedByAnnotation + "): it restores nothing; create it again as the user it restores for"
	case err != nil:
		return err.Error()
	case as.Username == "":
		return "NonAdminRestore names no creator"
	}
	return ""
}
