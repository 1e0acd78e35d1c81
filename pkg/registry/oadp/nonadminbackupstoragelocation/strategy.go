// Package nonadminbackupstoragelocation is the registry of
// oadp.openshift.io NonAdminBackupStorageLocations, a tenant's own object
// storage: the tenant rules and the admin's enforced values (strategy.go),
// and the REST storage (storage.go).
package nonadminbackupstoragelocation

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	oadpvalidation "github.com/backstop-io/backstop/pkg/apis/oadp/validation"
	"github.com/backstop-io/backstop/pkg/encryption"
	"github.com/backstop-io/backstop/pkg/registry/resource"
	"github.com/backstop-io/backstop/pkg/registry/tenantlimits"
)

// Strategy is the NonAdminBackupStorageLocation strategy.
type Strategy struct {
	resource.Strategy
	policy tenantlimits.PolicyFunc
	// total bounds a namespace's objects (tenantLimits).
	total *tenantlimits.Total
}

// NewStrategy returns the strategy; policy (nil: none) reads the admin's
// policy. New locations get the engine's finalizer, so that their admin
// side (request, Secret copy, Velero location) is removed with them.
func NewStrategy(typer runtime.ObjectTyper, policy tenantlimits.PolicyFunc) Strategy {
	s := resource.NewStrategy(typer, oadpv1alpha1.SchemeGroupVersion.String())
	s.Finalizers = []string{oadpv1alpha1.NonAdminBackupStorageLocationFinalizer}
	return Strategy{Strategy: s, policy: policy, total: tenantlimits.NewTotal("NonAdminBackupStorageLocation", func(l oadpvalidation.Limits) int { return l.MaxLocationsPerNamespace })}
}

// Validate checks the metadata and the spec: what the admin enforces, then
// the tenant rules on the spec with the enforced values filled in, and
// its encryption keys (a Secret of the tenant's namespace, never a file of
// the server).
func (s Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	o := obj.(*oadp.NonAdminBackupStorageLocation)
	policy, errs := s.policy.Policy(ctx)
	errs = append(s.Strategy.Validate(ctx, obj), errs...)
	errs = append(errs, oadpvalidation.CheckNonAdminBSL(&o.Spec, policy)...)
	if spec := o.Spec.BackupStorageLocationSpec; spec != nil {
		errs = append(errs, encryption.ValidateConfig(spec.Config, true, field.NewPath("spec", "backupStorageLocationSpec", "config"))...)
	}
	return append(errs, s.total.Check(ctx, o.Namespace, policy)...)
}

// ValidateUpdate checks the update: the spec is immutable (what the admin
// approved is what is used); a new spec is a new location.
func (s Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	o, oldO := obj.(*oadp.NonAdminBackupStorageLocation), old.(*oadp.NonAdminBackupStorageLocation)
	errs := s.Strategy.ValidateUpdate(ctx, obj, old)
	if !resource.DeepEqual(o.Spec, oldO.Spec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), "is immutable after creation (what the administrator approves is what is used): delete the NonAdminBackupStorageLocation and create a new one"))
	}
	return errs
}

// NewStatusStrategy returns the strategy of the status subresource: only
// the server's engines write it, along
// oadpv1alpha1.NonAdminBackupStorageLocationLifecycle.
func NewStatusStrategy(s resource.Strategy) resource.StatusStrategy {
	return resource.NewLifecycleStatusStrategy(s, oadpv1alpha1.NonAdminBackupStorageLocationLifecycle, func(o runtime.Object) oadpv1alpha1.NonAdminPhase {
		return oadpv1alpha1.NonAdminPhase(o.(*oadp.NonAdminBackupStorageLocation).Status.Phase)
	}, field.NewPath("status", "phase"))
}

// Table renders NonAdminBackupStorageLocations like the OADP CRD's printer
// columns.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Request-Approved", Type: "string", Description: "Whether the administrator approved the location", Cell: func(o runtime.Object) any {
		if c := meta.FindStatusCondition(o.(*oadp.NonAdminBackupStorageLocation).Status.Conditions, string(oadpv1alpha1.NonAdminBSLConditionApproved)); c != nil {
			return string(c.Status)
		}
		return ""
	}},
	resource.Column{Name: "Request-Phase", Type: "string", Description: "Phase of the NonAdminBackupStorageLocation", Cell: func(o runtime.Object) any {
		return string(o.(*oadp.NonAdminBackupStorageLocation).Status.Phase)
	}},
	resource.Column{Name: "Velero-Phase", Type: "string", Description: "Phase of the Velero backup storage location", Cell: func(o runtime.Object) any {
		if v := o.(*oadp.NonAdminBackupStorageLocation).Status.VeleroBackupStorageLocation; v != nil && v.Status != nil {
			return string(v.Status.Phase)
		}
		return ""
	}},
	resource.AgeColumn,
)
