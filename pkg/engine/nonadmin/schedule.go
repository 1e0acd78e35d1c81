package nonadmin

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	oadpvalidation "github.com/backstop-io/backstop/pkg/apis/oadp/validation"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	veleroschedule "github.com/backstop-io/backstop/pkg/engine/schedule"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/failpoint"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	oadpinformers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/oadp/v1alpha1"
	veleroinformers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v1"
	oadplisters "github.com/backstop-io/backstop/pkg/generated/listers/oadp/v1alpha1"
	velerolisters "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
)

// ScheduleConfig is what the NonAdminSchedule engine needs.
type ScheduleConfig struct {
	Client         versioned.Interface
	AdminNamespace string
	// Schedules and NonAdminBackups of every namespace.
	Schedules       oadpinformers.NonAdminScheduleInformer
	NonAdminBackups oadpinformers.NonAdminBackupInformer
	// VeleroSchedules and Backups of the admin namespace.
	VeleroSchedules veleroinformers.ScheduleInformer
	Backups         veleroinformers.BackupInformer
	DPAs            oadpinformers.DataProtectionApplicationInformer
	TenantLocations oadpinformers.NonAdminBackupStorageLocationInformer
	VeleroLocations veleroinformers.BackupStorageLocationInformer
	Clock           clock.Clock
	Observers       []status.Observer
	// Crash kills the server at a named point (crash-point tests).
	Crash failpoint.Set
}

// ScheduleController is the NonAdminSchedule engine: a tenant's schedule
// becomes a Velero Schedule in the admin namespace (named by its NACUUID,
// its template held to the tenant rules and the policy), and each backup
// that Schedule runs gets a NonAdminBackup in the tenant's namespace,
// named <schedule>-<timestamp> and labelled as made by sync, which the
// NonAdminBackup engine adopts (it makes no backup of its own for it).
// A spec the policy refuses later pauses the Velero Schedule.
type ScheduleController struct {
	*reconcile.Loop
	cfg       ScheduleConfig
	schedules oadplisters.NonAdminScheduleLister
	nabs      oadplisters.NonAdminBackupLister
	velero    velerolisters.ScheduleLister
	backups   velerolisters.BackupLister
	dpas      oadplisters.DataProtectionApplicationLister
	locations locations
	status    status.Writer
	// made links each NonAdminSchedule to the Velero Schedule made for it.
	made    *mirror[*oadpv1alpha1.NonAdminSchedule, *velerov1.Schedule]
	orphans *orphans
}

// NewScheduleController returns the engine.
func NewScheduleController(cfg ScheduleConfig) (*ScheduleController, error) {
	c := &ScheduleController{cfg: cfg, schedules: cfg.Schedules.Lister(), nabs: cfg.NonAdminBackups.Lister(), velero: cfg.VeleroSchedules.Lister(),
		backups: cfg.Backups.Lister(), dpas: cfg.DPAs.Lister(),
		locations: locations{adminNamespace: cfg.AdminNamespace, tenant: cfg.TenantLocations.Lister(), velero: cfg.VeleroLocations.Lister()},
		status:    status.Writer{Engine: oadpv1alpha1.EngineNonAdminSchedule, Observers: cfg.Observers}}
	c.made = newMirror[*oadpv1alpha1.NonAdminSchedule, *velerov1.Schedule](scheduleLink, cfg.AdminNamespace, c.status.Engine, "NonAdminSchedule", "Schedule",
		c.schedules.NonAdminSchedules, cfg.Client.OadpV1alpha1().NonAdminSchedules, c.velero.Schedules(cfg.AdminNamespace), cfg.Client.VeleroV1().Schedules(cfg.AdminNamespace), recordedSchedule)
	c.Loop = reconcile.NewLoop(oadpv1alpha1.EngineNonAdminSchedule, c.sync)
	if err := c.Watch(cfg.Schedules.Informer()); err != nil {
		return nil, err
	}
	// The Velero Schedule and its backups carry the schedule's origin
	// annotations (a Schedule's annotations go to the backups it runs).
	for _, inf := range []cache.SharedIndexInformer{cfg.VeleroSchedules.Informer(), cfg.Backups.Informer()} {
		if err := c.WatchMapped(inf, scheduleLink.route); err != nil {
			return nil, err
		}
	}
	if err := c.WatchMapped(cfg.DPAs.Informer(), func(any) []cache.ObjectName {
		all, err := c.schedules.List(labels.Everything())
		if err != nil {
			return nil
		}
		keys := make([]cache.ObjectName, 0, len(all))
		for _, s := range all {
			keys = append(keys, cache.MetaObjectToName(s))
		}
		return keys
	}); err != nil {
		return nil, err
	}
	c.WaitFor(cfg.NonAdminBackups.Informer(), cfg.TenantLocations.Informer(), cfg.VeleroLocations.Informer())
	var err error
	if c.orphans, err = orphanLoop(oadpv1alpha1.EngineNonAdminSchedule, c.made, cfg.Schedules.Informer(), cfg.VeleroSchedules.Informer()); err != nil {
		return nil, err
	}
	return c, nil
}

// Orphans is the engine's orphan loop, for the garbage collection.
func (c *ScheduleController) Orphans() Resyncer { return c.orphans }

// Run processes schedules and orphans until ctx is done.
func (c *ScheduleController) Run(ctx context.Context, workers int) {
	go c.orphans.Run(ctx, 1)
	c.Loop.Run(ctx, workers)
}

func (c *ScheduleController) sync(ctx context.Context, key cache.ObjectName) error {
	s, err := c.schedules.NonAdminSchedules(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.DeletionTimestamp != nil {
		return c.delete(ctx, s)
	}
	logger := klog.FromContext(ctx).WithValues("nonadminschedule", klog.KObj(s))
	template, problem, err := c.check(s)
	if err != nil {
		return err
	}
	if problem != "" {
		// Refused (a policy or location changed since admission): its
		// Velero Schedule, if any, runs no more until the cause goes.
		if vs, err := c.scheduleOf(ctx, s); err != nil {
			return err
		} else if vs != nil && !vs.Spec.Paused {
			cur := vs.DeepCopy()
			cur.Spec.Paused = true
			if _, err := c.cfg.Client.VeleroV1().Schedules(c.cfg.AdminNamespace).Update(ctx, cur, metav1.UpdateOptions{FieldManager: c.status.Engine}); err != nil {
				return fmt.Errorf("pausing schedule %s: %w", vs.Name, err)
			}
		}
		_, err := c.writeStatus(ctx, s, func(st *oadpv1alpha1.NonAdminScheduleStatus) {
			if st.Phase != oadpv1alpha1.NonAdminPhaseCreated {
				st.Phase = oadpv1alpha1.NonAdminPhaseBackingOff
			}
			setCondition(&st.Conditions, s.Generation, oadpv1alpha1.NonAdminConditionAccepted, false, oadpv1alpha1.ReasonInvalidScheduleSpec, problem)
		})
		logger.V(2).Info("NonAdminSchedule refused; checking again later", "problem", problem)
		c.AddAfter(cache.MetaObjectToName(s), RecheckInterval)
		return ignoreGone(err)
	}
	// The NACUUID is recorded before the Velero Schedule exists.
	s, err = c.writeStatus(ctx, s, func(st *oadpv1alpha1.NonAdminScheduleStatus) {
		if st.Phase == "" {
			st.Phase = oadpv1alpha1.NonAdminPhaseNew
		}
		setCondition(&st.Conditions, s.Generation, oadpv1alpha1.NonAdminConditionAccepted, true, oadpv1alpha1.ReasonScheduleAccepted, oadpv1alpha1.MessageScheduleAccepted)
		if st.VeleroSchedule == nil || st.VeleroSchedule.NACUUID == "" {
			id := oadpv1alpha1.NewNACUUID(s.Namespace, s.Name)
			st.VeleroSchedule = &oadpv1alpha1.VeleroSchedule{NACUUID: id, Name: id, Namespace: c.cfg.AdminNamespace}
		}
	})
	if err != nil {
		return ignoreGone(err)
	}
	vs, err := c.ensureSchedule(ctx, s, template)
	if err != nil {
		return err
	}
	backups, err := c.backups.Backups(c.cfg.AdminNamespace).List(labels.SelectorFromSet(labels.Set{velerov1.ScheduleNameLabel: velerov1.LabelValue(vs.Name)}))
	if err != nil {
		return err
	}
	// Newest first.
	sort.Slice(backups, func(i, j int) bool {
		a, b := backups[i], backups[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return b.CreationTimestamp.Before(&a.CreationTimestamp)
		}
		return a.Name > b.Name
	})
	var recent []oadpv1alpha1.NonAdminScheduledBackup
	for _, b := range backups {
		if b.DeletionTimestamp != nil {
			continue
		}
		child, err := c.adopt(ctx, s, vs, b)
		if err != nil {
			return err
		}
		if len(recent) < oadpv1alpha1.RecentScheduledBackups {
			recent = append(recent, oadpv1alpha1.NonAdminScheduledBackup{Name: child, VeleroBackupName: b.Name, Phase: b.Status.Phase,
				StartTimestamp: b.Status.StartTimestamp, CompletionTimestamp: b.Status.CompletionTimestamp, Expiration: b.Status.Expiration})
		}
	}
	var next *metav1.Time
	if sched, err := cron.ParseStandard(vs.Spec.Schedule); err == nil && !vs.Spec.Paused {
		_, at := veleroschedule.NextRunTime(vs, sched, c.cfg.Clock.Now())
		next = &metav1.Time{Time: at}
	}
	_, err = c.writeStatus(ctx, s, func(st *oadpv1alpha1.NonAdminScheduleStatus) {
		st.Phase = oadpv1alpha1.NonAdminPhaseCreated
		st.VeleroSchedule.Status = vs.Status.DeepCopy()
		st.NextRun = next
		st.RecentBackups = recent
		st.LastBackup = nil
		if len(recent) > 0 {
			st.LastBackup = recent[0].DeepCopy()
		}
	})
	return ignoreGone(err)
}

// check applies the tenant rules and the policy to the schedule's spec
// and returns the Velero backup template, or why not.
func (c *ScheduleController) check(s *oadpv1alpha1.NonAdminSchedule) (*velerov1.BackupSpec, string, error) {
	var spec oadp.NonAdminScheduleSpec
	if err := oadpv1alpha1.Convert_v1alpha1_NonAdminScheduleSpec_To_oadp_NonAdminScheduleSpec(&s.Spec, &spec, nil); err != nil {
		return nil, "", err
	}
	policy, err := policyOf(c.dpas, c.cfg.AdminNamespace)
	if err != nil {
		return nil, "", err
	}
	errs := oadpvalidation.ValidateNonAdminScheduleSpec(s.Namespace, &spec, field.NewPath("spec"))
	errs = append(errs, oadpvalidation.ValidateBackupPolicy(spec.Template.BackupSpec, policy, field.NewPath("spec", "template", "backupSpec"))...)
	if len(errs) > 0 {
		return nil, errs.ToAggregate().Error(), nil
	}
	return c.locations.veleroBackupSpec(s.Namespace, spec.Template.BackupSpec, policy)
}

// scheduleOf returns the schedule's Velero Schedule, nil when there is
// none (read from the lister, then the API before "none" is believed).
func (c *ScheduleController) scheduleOf(ctx context.Context, s *oadpv1alpha1.NonAdminSchedule) (*velerov1.Schedule, error) {
	v := s.Status.VeleroSchedule
	if v == nil || v.Name == "" {
		return nil, nil
	}
	vs, err := c.made.admin(v.Name)
	if apierrors.IsNotFound(err) {
		vs, err = c.made.adminAPI(ctx, v.Name)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading schedule %s: %w", v.Name, err)
	}
	if !scheduleLink.madeFor(vs, v.NACUUID, s.Namespace) {
		return nil, fmt.Errorf("schedule %s exists and was not made for NonAdminSchedule %s/%s", v.Name, s.Namespace, s.Name)
	}
	return vs, nil
}

// ensureSchedule makes the Velero Schedule, or brings its spec to the
// tenant's.
func (c *ScheduleController) ensureSchedule(ctx context.Context, s *oadpv1alpha1.NonAdminSchedule, template *velerov1.BackupSpec) (*velerov1.Schedule, error) {
	want := velerov1.ScheduleSpec{Schedule: s.Spec.Schedule, Paused: s.Spec.Paused, SkipImmediately: ptr.To(s.Spec.SkipImmediately), Template: *template}
	client := c.cfg.Client.VeleroV1().Schedules(c.cfg.AdminNamespace)
	vs, err := c.scheduleOf(ctx, s)
	if err != nil {
		return nil, err
	}
	id := s.Status.VeleroSchedule.NACUUID
	if vs == nil {
		vs := &velerov1.Schedule{ObjectMeta: scheduleLink.objectMeta(c.cfg.AdminNamespace, id, id, s), Spec: want}
		// Who made it: the schedule's backups carry its annotations.
		if who := s.Annotations[oadpv1alpha1.CreatedByAnnotation]; who != "" {
			vs.Annotations[oadpv1alpha1.CreatedByAnnotation] = who
		}
		made, err := c.made.createAdmin(ctx, vs)
		if err != nil {
			return nil, fmt.Errorf("creating schedule %s for NonAdminSchedule %s/%s: %w", id, s.Namespace, s.Name, err)
		}
		return made, nil
	}
	// skipImmediately is for the run due at creation or unpause: the
	// schedule engine consumes it (resets it); it is passed on again only
	// when this update unpauses.
	if !(vs.Spec.Paused && !want.Paused) {
		want.SkipImmediately = vs.Spec.SkipImmediately
	}
	// Who last changed the tenant's spec: the backups of the spec it
	// wrote carry that user (a restore of one by the admin runs with
	// that user's rights).
	who := s.Annotations[oadpv1alpha1.CreatedByAnnotation]
	if equality.Semantic.DeepEqual(vs.Spec, want) && vs.Annotations[oadpv1alpha1.CreatedByAnnotation] == who {
		return vs, nil
	}
	cur := vs.DeepCopy()
	cur.Spec = want
	if who == "" {
		delete(cur.Annotations, oadpv1alpha1.CreatedByAnnotation)
	} else {
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[oadpv1alpha1.CreatedByAnnotation] = who
	}
	out, err := client.Update(ctx, cur, metav1.UpdateOptions{FieldManager: c.status.Engine})
	if err != nil {
		return nil, fmt.Errorf("updating schedule %s: %w", id, err)
	}
	return out, nil
}

// adopt gives a backup the schedule ran its NonAdminBackup
// (<schedule>-<timestamp>) and returns its name.
func (c *ScheduleController) adopt(ctx context.Context, s *oadpv1alpha1.NonAdminSchedule, vs *velerov1.Schedule, b *velerov1.Backup) (string, error) {
	name := s.Name + "-" + strings.TrimPrefix(b.Name, vs.Name+"-")
	if b.Labels[oadpv1alpha1.NabOriginNACUUIDLabel] != "" {
		return name, nil // adopted before
	}
	a := adopter{client: c.cfg.Client, adminNamespace: c.cfg.AdminNamespace, nabs: c.nabs, status: c.status}
	if _, err := a.adopt(ctx, s.Namespace, name, s.Spec.Template.BackupSpec, b, func() { c.cfg.Crash.Hit(failpoint.NonAdminScheduleRunAdopting) }); err != nil {
		return "", ignoreGone(err)
	}
	return name, nil
}

// delete: the Velero Schedule goes, then the finalizer. The backups it ran
// and their NonAdminBackups stay, as a Velero Schedule's do.
func (c *ScheduleController) delete(ctx context.Context, s *oadpv1alpha1.NonAdminSchedule) error {
	s, err := c.writeStatus(ctx, s, func(st *oadpv1alpha1.NonAdminScheduleStatus) {
		st.Phase = oadpv1alpha1.NonAdminPhaseDeleting
		st.NextRun = nil
		setCondition(&st.Conditions, s.Generation, oadpv1alpha1.NonAdminConditionDeleting, true, oadpv1alpha1.ReasonDeletionPending, oadpv1alpha1.MessageScheduleDeletionPending)
	})
	if err != nil {
		return ignoreGone(err)
	}
	vs, err := c.scheduleOf(ctx, s)
	if err != nil {
		return err
	}
	if vs != nil {
		if err := reconcile.DeleteIfUnchanged(ctx, c.cfg.Client.VeleroV1().Schedules(c.cfg.AdminNamespace).Delete, vs.Name, vs.UID); err != nil {
			return fmt.Errorf("deleting schedule %s: %w", vs.Name, err)
		}
	}
	return reconcile.RemoveFinalizer(ctx, c.cfg.Client.OadpV1alpha1().NonAdminSchedules(s.Namespace), s, oadpv1alpha1.NonAdminScheduleFinalizer, c.status.Engine)
}

// recordedSchedule is the Velero Schedule s's status records: name and
// NACUUID.
func recordedSchedule(s *oadpv1alpha1.NonAdminSchedule) (name, nacuuid string) {
	if v := s.Status.VeleroSchedule; v != nil {
		return v.Name, v.NACUUID
	}
	return "", ""
}

func (c *ScheduleController) writeStatus(ctx context.Context, s *oadpv1alpha1.NonAdminSchedule, mutate func(*oadpv1alpha1.NonAdminScheduleStatus)) (*oadpv1alpha1.NonAdminSchedule, error) {
	return c.status.NonAdminSchedules(c.cfg.Client, s.Namespace).Update(ctx, s, func(cur *oadpv1alpha1.NonAdminSchedule) { mutate(&cur.Status) })
}
