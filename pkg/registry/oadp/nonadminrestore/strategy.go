// Package nonadminrestore is the registry of oadp.openshift.io
// NonAdminRestores: validation and kubectl columns (strategy.go) and the REST
// storage (storage.go).
package nonadminrestore

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	oadpvalidation "github.com/backstop-io/backstop/pkg/apis/oadp/validation"
	"github.com/backstop-io/backstop/pkg/registry/oadp/creator"
	"github.com/backstop-io/backstop/pkg/registry/resource"
	"github.com/backstop-io/backstop/pkg/registry/tenantlimits"
)

// Strategy is the NonAdminRestore strategy.
type Strategy struct {
	resource.Strategy
	// nabs reads the NonAdminBackups a restore may name.
	nabs   rest.Getter
	policy tenantlimits.PolicyFunc
	// total bounds a namespace's objects (tenantLimits).
	total *tenantlimits.Total
}

// NewStrategy returns the NonAdminRestore strategy; nabs reads
// NonAdminBackups, policy (nil: none) the admin's policy. New
// NonAdminRestores get the engine's finalizer.
func NewStrategy(typer runtime.ObjectTyper, nabs rest.Getter, policy tenantlimits.PolicyFunc) Strategy {
	s := resource.NewStrategy(typer, oadpv1alpha1.SchemeGroupVersion.String())
	s.Finalizers = []string{oadpv1alpha1.NonAdminRestoreFinalizer}
	return Strategy{Strategy: s, nabs: nabs, policy: policy, total: tenantlimits.NewTotal("NonAdminRestore", func(l oadpvalidation.Limits) int { return l.MaxRestoresPerNamespace })}
}

// PrepareForCreate records who creates the NonAdminRestore (package
// creator): its restore writes with that user's rights, and one made by
// the server itself records no one and restores nothing (the tenants'
// engine fails it closed).
func (s Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	s.Strategy.PrepareForCreate(ctx, obj)
	creator.Record(ctx, obj)
}

// PrepareForUpdate keeps the record of who created it.
func (s Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	s.Strategy.PrepareForUpdate(ctx, obj, old)
	creator.Keep(obj, old)
}

// Validate checks the metadata and the spec: the tenant rules, and a
// backupName that is a NonAdminBackup of the same namespace.
func (s Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	o := obj.(*oadp.NonAdminRestore)
	errs := append(s.Strategy.Validate(ctx, obj), oadpvalidation.ValidateNonAdminRestoreSpec(o.Namespace, &o.Spec, field.NewPath("spec"))...)
	policy, perrs := s.policy.Policy(ctx)
	errs = append(errs, perrs...)
	errs = append(errs, oadpvalidation.ValidateRestorePolicy(o.Spec.RestoreSpec, policy, field.NewPath("spec", "restoreSpec"))...)
	errs = append(errs, s.total.Check(ctx, o.Namespace, policy)...)
	if o.Spec.RestoreSpec == nil || o.Spec.RestoreSpec.BackupName == "" {
		return errs
	}
	p := field.NewPath("spec", "restoreSpec", "backupName")
	_, err := s.nabs.Get(genericrequest.WithNamespace(ctx, o.Namespace), o.Spec.RestoreSpec.BackupName, &metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		errs = append(errs, field.NotFound(p, fmt.Sprintf("NonAdminBackup %s of namespace %s", o.Spec.RestoreSpec.BackupName, o.Namespace)))
	case err != nil:
		errs = append(errs, field.InternalError(p, err))
	}
	return errs
}

// ValidateUpdate checks the update: the restore spec is immutable.
func (s Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	o, oldO := obj.(*oadp.NonAdminRestore), old.(*oadp.NonAdminRestore)
	errs := s.Strategy.ValidateUpdate(ctx, obj, old)
	if !resource.DeepEqual(o.Spec, oldO.Spec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), "is immutable after creation"))
	}
	return errs
}

// NewStatusStrategy returns the strategy of the status subresource: only
// the server's engines write it, along oadpv1alpha1.NonAdminRestoreLifecycle.
func NewStatusStrategy(s resource.Strategy) resource.StatusStrategy {
	st := resource.NewLifecycleStatusStrategy(s, oadpv1alpha1.NonAdminRestoreLifecycle, func(o runtime.Object) oadpv1alpha1.NonAdminPhase {
		return oadpv1alpha1.NonAdminPhase(o.(*oadp.NonAdminRestore).Status.Phase)
	}, field.NewPath("status", "phase"))
	st.NotStored = func(o runtime.Object) {
		if q := o.(*oadp.NonAdminRestore).Status.QueueInfo; q != nil {
			q.EstimatedQueuePosition = 0
		}
	}
	return st
}

// Table renders NonAdminRestores like the OADP CRD's printer columns.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Request-Phase", Type: "string", Description: "Phase of the NonAdminRestore", Cell: func(o runtime.Object) any {
		return string(o.(*oadp.NonAdminRestore).Status.Phase)
	}},
	resource.Column{Name: "Velero-Phase", Type: "string", Description: "Phase of the Velero restore", Cell: func(o runtime.Object) any {
		if vr := o.(*oadp.NonAdminRestore).Status.VeleroRestore; vr != nil && vr.Status != nil {
			return string(vr.Status.Phase)
		}
		return ""
	}},
	resource.AgeColumn,
)
