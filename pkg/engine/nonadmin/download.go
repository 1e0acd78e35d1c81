package nonadmin

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	oadpinformers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/oadp/v1alpha1"
	veleroinformers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v1"
	oadplisters "github.com/backstop-io/backstop/pkg/generated/listers/oadp/v1alpha1"
	velerolisters "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// DownloadConfig is what the NonAdminDownloadRequest engine needs.
type DownloadConfig struct {
	Client         versioned.Interface
	AdminNamespace string
	// Requests, NonAdminBackups and NonAdminRestores of every namespace.
	Requests         oadpinformers.NonAdminDownloadRequestInformer
	NonAdminBackups  oadpinformers.NonAdminBackupInformer
	NonAdminRestores oadpinformers.NonAdminRestoreInformer
	// DownloadRequests, Backups and Restores of the admin namespace.
	DownloadRequests veleroinformers.DownloadRequestInformer
	Backups          veleroinformers.BackupInformer
	Restores         veleroinformers.RestoreInformer
	Clock            clock.Clock
	Observers        []status.Observer
}

// DownloadController is the NonAdminDownloadRequest engine: a tenant's
// request for a file of its own backup or restore becomes a Velero
// DownloadRequest of the Velero object the tenant object's status names,
// in the admin namespace, named nadr-<uid>; its link is copied back, and
// the request goes when the link expires. Backups on the default location
// have links too (upstream gives them none).
type DownloadController struct {
	*reconcile.Loop
	cfg      DownloadConfig
	requests oadplisters.NonAdminDownloadRequestLister
	nabs     oadplisters.NonAdminBackupLister
	nars     oadplisters.NonAdminRestoreLister
	drs      velerolisters.DownloadRequestLister
	backups  velerolisters.BackupLister
	restores velerolisters.RestoreLister
	status   status.Writer
	// made links each request to the Velero DownloadRequest made for it.
	made    *mirror[*oadpv1alpha1.NonAdminDownloadRequest, *velerov1.DownloadRequest]
	orphans *orphans
}

// NewDownloadController returns the engine.
func NewDownloadController(cfg DownloadConfig) (*DownloadController, error) {
	c := &DownloadController{cfg: cfg, requests: cfg.Requests.Lister(), nabs: cfg.NonAdminBackups.Lister(), nars: cfg.NonAdminRestores.Lister(),
		drs: cfg.DownloadRequests.Lister(), backups: cfg.Backups.Lister(), restores: cfg.Restores.Lister(),
		status: status.Writer{Engine: oadpv1alpha1.EngineNonAdminDownload, Observers: cfg.Observers}}
	// Named after the request's UID, which is its NACUUID.
	recorded := func(r *oadpv1alpha1.NonAdminDownloadRequest) (string, string) {
		return veleroRequestName(r.UID), string(r.UID)
	}
	c.made = newMirror[*oadpv1alpha1.NonAdminDownloadRequest, *velerov1.DownloadRequest](downloadLink, cfg.AdminNamespace, c.status.Engine, "NonAdminDownloadRequest", "DownloadRequest",
		c.requests.NonAdminDownloadRequests, cfg.Client.OadpV1alpha1().NonAdminDownloadRequests, c.drs.DownloadRequests(cfg.AdminNamespace), cfg.Client.VeleroV1().DownloadRequests(cfg.AdminNamespace), recorded)
	c.Loop = reconcile.NewLoop(oadpv1alpha1.EngineNonAdminDownload, c.sync)
	if err := c.Watch(cfg.Requests.Informer()); err != nil {
		return nil, err
	}
	if err := c.WatchMapped(cfg.DownloadRequests.Informer(), downloadLink.route); err != nil {
		return nil, err
	}
	c.WaitFor(cfg.NonAdminBackups.Informer(), cfg.NonAdminRestores.Informer(), cfg.Backups.Informer(), cfg.Restores.Informer())
	var err error
	if c.orphans, err = orphanLoop(oadpv1alpha1.EngineNonAdminDownload, c.made, cfg.Requests.Informer(), cfg.DownloadRequests.Informer()); err != nil {
		return nil, err
	}
	return c, nil
}

// Orphans is the engine's orphan loop, for the garbage collection.
func (c *DownloadController) Orphans() Resyncer { return c.orphans }

// Run processes requests and orphans until ctx is done.
func (c *DownloadController) Run(ctx context.Context, workers int) {
	go c.orphans.Run(ctx, 1)
	c.Loop.Run(ctx, workers)
}

// veleroRequestName is the Velero DownloadRequest made for the request of
// uid (upstream's name: a restart makes the same one).
func veleroRequestName(uid types.UID) string {
	return oadpv1alpha1.VeleroDownloadRequestPrefix + string(uid)
}

func (c *DownloadController) sync(ctx context.Context, key cache.ObjectName) error {
	r, err := c.requests.NonAdminDownloadRequests(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) || (err == nil && r.DeletionTimestamp != nil) {
		return nil
	}
	if err != nil {
		return err
	}
	name := veleroRequestName(r.UID)
	dr, err := c.drs.DownloadRequests(c.cfg.AdminNamespace).Get(name)
	if apierrors.IsNotFound(err) {
		dr = nil
	} else if err != nil {
		return err
	}
	if r.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated {
		if dr == nil {
			// The lister may lag: decide on the request as stored.
			if dr, err = c.cfg.Client.VeleroV1().DownloadRequests(c.cfg.AdminNamespace).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				dr, err = nil, nil
			} else if err != nil {
				return err
			}
		}
		if dr == nil || c.expired(dr) {
			// Its link expired (the Velero request is gone after it).
			klog.FromContext(ctx).V(2).Info("NonAdminDownloadRequest expired", "nonadmindownloadrequest", klog.KObj(r))
			return reconcile.DeleteIfUnchanged(ctx, c.cfg.Client.OadpV1alpha1().NonAdminDownloadRequests(r.Namespace).Delete, r.Name, r.UID)
		}
		c.AddAfter(key, dr.Status.Expiration.Sub(c.cfg.Clock.Now()))
		return nil
	}
	if dr == nil {
		target, condition, problem := c.target(r)
		if problem != "" {
			_, err := c.writeStatus(ctx, r, func(st *oadpv1alpha1.NonAdminDownloadRequestStatus) {
				st.Phase = oadpv1alpha1.NonAdminPhaseBackingOff
				onlyCondition(&st.Conditions, r.Generation, condition, true, oadpv1alpha1.ReasonDownloadError, problem)
			})
			c.AddAfter(key, RecheckInterval)
			return ignoreGone(err)
		}
		dr = &velerov1.DownloadRequest{ObjectMeta: downloadLink.objectMeta(c.cfg.AdminNamespace, name, string(r.UID), r),
			Spec: velerov1.DownloadRequestSpec{Target: target}}
		// One made before a restart is taken when it was made for r.
		if dr, err = c.made.create(ctx, r, dr); err != nil {
			return err
		}
	}
	if !c.made.owns(r, dr) {
		return fmt.Errorf("download request %s exists and was not made for NonAdminDownloadRequest %s/%s", name, r.Namespace, r.Name)
	}
	if dr.Status.Phase != velerov1.DownloadRequestPhaseProcessed {
		_, err := c.writeStatus(ctx, r, func(st *oadpv1alpha1.NonAdminDownloadRequestStatus) {
			if st.Phase == "" {
				st.Phase = oadpv1alpha1.NonAdminPhaseNew
			}
		})
		return ignoreGone(err)
	}
	_, err = c.writeStatus(ctx, r, func(st *oadpv1alpha1.NonAdminDownloadRequestStatus) {
		st.Phase = oadpv1alpha1.NonAdminPhaseCreated
		onlyCondition(&st.Conditions, r.Generation, oadpv1alpha1.NonAdminDownloadConditionProcessed, true, oadpv1alpha1.ReasonDownloadSuccess, "")
		st.VeleroDownloadRequest.Status = dr.Status.DeepCopy()
	})
	return ignoreGone(err)
}

// onlyCondition sets one condition and removes the others: a download
// request has exactly one (upstream).
func onlyCondition(conds *[]metav1.Condition, generation int64, t oadpv1alpha1.NonAdminCondition, ok bool, reason, message string) {
	kept := (*conds)[:0]
	for _, c := range *conds {
		if c.Type == string(t) {
			kept = append(kept, c)
		}
	}
	*conds = kept
	setCondition(conds, generation, t, ok, reason, message)
}

func (c *DownloadController) expired(dr *velerov1.DownloadRequest) bool {
	return dr.Status.Expiration == nil || !c.cfg.Clock.Now().Before(dr.Status.Expiration.Time)
}

// target is the Velero target of a request: the Velero object the tenant
// object's status names (ownership checked as everywhere), or the
// condition and why not yet.
func (c *DownloadController) target(r *oadpv1alpha1.NonAdminDownloadRequest) (velerov1.DownloadTarget, oadpv1alpha1.NonAdminCondition, string) {
	name := r.Spec.Target.Name
	if objectstore.IsRestoreTarget(r.Spec.Target.Kind) {
		missing := fmt.Sprintf("NonAdminRestore %s of namespace %s has no Velero restore (yet)", name, r.Namespace)
		nar, err := c.nars.NonAdminRestores(r.Namespace).Get(name)
		if err != nil || nar.Status.VeleroRestore == nil || nar.Status.VeleroRestore.Name == "" {
			return velerov1.DownloadTarget{}, oadpv1alpha1.NonAdminDownloadConditionRestoreNotAvailable, missing
		}
		vr, err := c.restores.Restores(c.cfg.AdminNamespace).Get(nar.Status.VeleroRestore.Name)
		if err != nil || !owns(restoreLink, recordedRestore, nar, vr) {
			return velerov1.DownloadTarget{}, oadpv1alpha1.NonAdminDownloadConditionRestoreNotAvailable, missing
		}
		if !vr.Status.Phase.Terminal() {
			return velerov1.DownloadTarget{}, oadpv1alpha1.NonAdminDownloadConditionRestoreNotAvailable,
				fmt.Sprintf("NonAdminRestore %s has not finished (phase %q)", name, vr.Status.Phase)
		}
		return velerov1.DownloadTarget{Kind: r.Spec.Target.Kind, Name: vr.Name}, "", ""
	}
	missing := fmt.Sprintf("NonAdminBackup %s of namespace %s has no Velero backup (yet)", name, r.Namespace)
	nab, err := c.nabs.NonAdminBackups(r.Namespace).Get(name)
	if err != nil || nab.Status.VeleroBackup == nil || nab.Status.VeleroBackup.Name == "" {
		return velerov1.DownloadTarget{}, oadpv1alpha1.NonAdminDownloadConditionBackupNotAvailable, missing
	}
	b, err := c.backups.Backups(c.cfg.AdminNamespace).Get(nab.Status.VeleroBackup.Name)
	if err != nil || !ownedBackup(nab, b) {
		return velerov1.DownloadTarget{}, oadpv1alpha1.NonAdminDownloadConditionBackupNotAvailable, missing
	}
	if !b.Status.Phase.Terminal() {
		return velerov1.DownloadTarget{}, oadpv1alpha1.NonAdminDownloadConditionBackupNotAvailable,
			fmt.Sprintf("NonAdminBackup %s has not finished (phase %q)", name, b.Status.Phase)
	}
	return velerov1.DownloadTarget{Kind: r.Spec.Target.Kind, Name: b.Name}, "", ""
}

func (c *DownloadController) writeStatus(ctx context.Context, r *oadpv1alpha1.NonAdminDownloadRequest, mutate func(*oadpv1alpha1.NonAdminDownloadRequestStatus)) (*oadpv1alpha1.NonAdminDownloadRequest, error) {
	return c.status.NonAdminDownloadRequests(c.cfg.Client, r.Namespace).Update(ctx, r, func(cur *oadpv1alpha1.NonAdminDownloadRequest) { mutate(&cur.Status) })
}
