// Package nonadminschedule is the registry of oadp.openshift.io
// NonAdminSchedules: a tenant's schedule of backups of its own namespace.
// The spec follows the NonAdminBackup rules and the admin's policy at
// every write (unlike a NonAdminBackup's, it may change).
package nonadminschedule

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	oadpvalidation "github.com/backstop-io/backstop/pkg/apis/oadp/validation"
	"github.com/backstop-io/backstop/pkg/registry/oadp/creator"
	"github.com/backstop-io/backstop/pkg/registry/oadp/nonadminbackup"
	"github.com/backstop-io/backstop/pkg/registry/resource"
	"github.com/backstop-io/backstop/pkg/registry/tenantlimits"
)

// Strategy is the NonAdminSchedule strategy.
type Strategy struct {
	resource.Strategy
	policy    tenantlimits.PolicyFunc
	locations rest.Getter
	// total bounds a namespace's objects (tenantLimits).
	total *tenantlimits.Total
}

// NewStrategy returns the strategy; policy (nil: none) reads the admin's
// policy, locations the NonAdminBackupStorageLocations a template may
// name. New schedules get the engine's finalizer (their Velero Schedule
// goes with them).
func NewStrategy(typer runtime.ObjectTyper, policy tenantlimits.PolicyFunc, locations rest.Getter) Strategy {
	s := resource.NewStrategy(typer, oadpv1alpha1.SchemeGroupVersion.String())
	s.Finalizers = []string{oadpv1alpha1.NonAdminScheduleFinalizer}
	return Strategy{Strategy: s, policy: policy, locations: locations, total: tenantlimits.NewTotal("NonAdminSchedule", func(l oadpvalidation.Limits) int { return l.MaxSchedulesPerNamespace })}
}

// PrepareForCreate records who creates the NonAdminSchedule (package creator): the
// backups it makes carry the record, and an admin's restore of one runs
// with that user's rights (PrepareForUpdate: whoever last changed its
// spec).
func (s Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	s.Strategy.PrepareForCreate(ctx, obj)
	creator.Record(ctx, obj)
}

// PrepareForUpdate records who changes the spec, as the schedule's
// creator: the backups it makes from then on carry what that user wrote,
// and an admin's restore of one runs with that user's rights (not with
// the rights of whoever created it first). Other updates keep the record.
func (s Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	s.Strategy.PrepareForUpdate(ctx, obj, old)
	if !resource.FromEngine(ctx) && !resource.DeepEqual(obj.(*oadp.NonAdminSchedule).Spec, old.(*oadp.NonAdminSchedule).Spec) {
		creator.Record(ctx, obj)
		return
	}
	creator.Keep(obj, old)
}

// Validate checks a new schedule.
func (s Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	o := obj.(*oadp.NonAdminSchedule)
	errs := append(s.Strategy.Validate(ctx, obj), s.validateSpec(ctx, o)...)
	policy, _ := s.policy.Policy(ctx)
	return append(errs, s.total.Check(ctx, o.Namespace, policy)...)
}

// ValidateUpdate checks a changed schedule: its spec again when it
// changed.
func (s Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	errs := s.Strategy.ValidateUpdate(ctx, obj, old)
	o := obj.(*oadp.NonAdminSchedule)
	if !resource.DeepEqual(o.Spec, old.(*oadp.NonAdminSchedule).Spec) {
		errs = append(errs, s.validateSpec(ctx, o)...)
	}
	return errs
}

func (s Strategy) validateSpec(ctx context.Context, o *oadp.NonAdminSchedule) field.ErrorList {
	errs := oadpvalidation.ValidateNonAdminScheduleSpec(o.Namespace, &o.Spec, field.NewPath("spec"))
	policy, perrs := s.policy.Policy(ctx)
	errs = append(errs, perrs...)
	path := field.NewPath("spec", "template", "backupSpec")
	errs = append(errs, oadpvalidation.ValidateBackupPolicy(o.Spec.Template.BackupSpec, policy, path)...)
	dpa := ""
	if policy != nil {
		dpa = policy.DPA
	}
	errs = append(errs, oadpvalidation.ValidateScheduleInterval(o.Spec.Schedule, policy.Limits(), field.NewPath("spec", "schedule"), dpa)...)
	if b := o.Spec.Template.BackupSpec; b != nil && b.StorageLocation != "" {
		errs = append(errs, nonadminbackup.ValidateLocation(ctx, s.locations, o.Namespace, b.StorageLocation, path.Child("storageLocation"))...)
	}
	return errs
}

// NewStatusStrategy returns the strategy of the status subresource: only
// the server's engines write it, along
// oadpv1alpha1.NonAdminScheduleLifecycle.
func NewStatusStrategy(s resource.Strategy) resource.StatusStrategy {
	return resource.NewLifecycleStatusStrategy(s, oadpv1alpha1.NonAdminScheduleLifecycle, func(o runtime.Object) oadpv1alpha1.NonAdminPhase {
		return oadpv1alpha1.NonAdminPhase(o.(*oadp.NonAdminSchedule).Status.Phase)
	}, field.NewPath("status", "phase"))
}

// Table renders schedules like upstream's printer columns.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Request-Phase", Type: "string", Description: "Phase of the NonAdminSchedule", Cell: func(o runtime.Object) any {
		return string(o.(*oadp.NonAdminSchedule).Status.Phase)
	}},
	resource.Column{Name: "Velero-Phase", Type: "string", Description: "Phase of the Velero schedule", Cell: func(o runtime.Object) any {
		if v := o.(*oadp.NonAdminSchedule).Status.VeleroSchedule; v != nil && v.Status != nil {
			return string(v.Status.Phase)
		}
		return ""
	}},
	resource.Column{Name: "Next-Run", Type: "string", Description: "When the next backup is due", Cell: func(o runtime.Object) any {
		if n := o.(*oadp.NonAdminSchedule).Status.NextRun; n != nil {
			return n.UTC().Format("2006-01-02T15:04:05Z")
		}
		return ""
	}},
	resource.Column{Name: "Paused", Type: "boolean", Description: "Whether the schedule is paused", Cell: func(o runtime.Object) any {
		return o.(*oadp.NonAdminSchedule).Spec.Paused
	}},
	resource.AgeColumn,
)

// NewREST returns the storage of schedules and their status.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, policy tenantlimits.PolicyFunc, locations rest.Getter) (*resource.REST, *resource.StatusREST, error) {
	strategy := NewStrategy(scheme, policy, locations)
	main, status, err := resource.NewStore(optsGetter, resource.Definition{
		Resource:       oadp.Resource("nonadminschedules"),
		Singular:       oadp.Resource("nonadminschedule"),
		NewFunc:        func() runtime.Object { return &oadp.NonAdminSchedule{} },
		NewListFunc:    func() runtime.Object { return &oadp.NonAdminScheduleList{} },
		Strategy:       strategy,
		StatusStrategy: NewStatusStrategy(strategy.Strategy),
		Table:          Table,
		ShortNames:     []string{"nas"},
		Categories:     []string{"oadp"},
	})
	if err != nil {
		return nil, nil, err
	}
	strategy.total.Lister = main
	return main, status, nil
}
