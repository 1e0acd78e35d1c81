// Package nonadminrestore is the registry of oadp.openshift.io
// NonAdminRestores: validation and kubectl columns (strategy.go) and the REST
// storage (storage.go).
package nonadminrestore

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	oadpvalidation "github.com/backstop-io/backstop/pkg/apis/oadp/validation"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// Strategy is the NonAdminRestore strategy.
type Strategy struct{ resource.Strategy }

// NewStrategy returns the NonAdminRestore strategy.
func NewStrategy(typer runtime.ObjectTyper) Strategy {
	return Strategy{resource.NewStrategy(typer, oadpv1alpha1.SchemeGroupVersion.String())}
}

// Validate checks the metadata and the spec.
func (s Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	o := obj.(*oadp.NonAdminRestore)
	return append(s.Strategy.Validate(ctx, obj), oadpvalidation.ValidateNonAdminRestoreSpec(&o.Spec, field.NewPath("spec"))...)
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
	return resource.NewLifecycleStatusStrategy(s, oadpv1alpha1.NonAdminRestoreLifecycle, func(o runtime.Object) oadpv1alpha1.NonAdminPhase {
		return oadpv1alpha1.NonAdminPhase(o.(*oadp.NonAdminRestore).Status.Phase)
	}, field.NewPath("status", "phase"))
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
