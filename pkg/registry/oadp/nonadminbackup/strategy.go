// Package nonadminbackup is the registry of oadp.openshift.io
// NonAdminBackups: the tenant rules and kubectl columns (strategy.go), the
// REST storage with queue positions filled in, and the cancel and logs
// subresources, which act on the NonAdminBackup's Velero Backup without
// showing it (storage.go).
package nonadminbackup

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	oadpvalidation "github.com/backstop-io/backstop/pkg/apis/oadp/validation"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerovalidation "github.com/backstop-io/backstop/pkg/apis/velero/validation"
	"github.com/backstop-io/backstop/pkg/registry/oadp/creator"
	"github.com/backstop-io/backstop/pkg/registry/resource"
	"github.com/backstop-io/backstop/pkg/registry/tenantlimits"
)

// Strategy is the NonAdminBackup strategy.
type Strategy struct {
	resource.Strategy
	policy tenantlimits.PolicyFunc
	// locations reads the NonAdminBackupStorageLocations a backup may name.
	locations rest.Getter
	// total bounds a namespace's objects (tenantLimits).
	total *tenantlimits.Total
}

// NewStrategy returns the NonAdminBackup strategy; policy (nil: none)
// reads the admin's policy. New NonAdminBackups get the engine's
// finalizer, so that none is deleted before its owner has said what
// becomes of its backup.
func NewStrategy(typer runtime.ObjectTyper, policy tenantlimits.PolicyFunc, locations rest.Getter) Strategy {
	s := resource.NewStrategy(typer, oadpv1alpha1.SchemeGroupVersion.String())
	s.Finalizers = []string{oadpv1alpha1.NonAdminBackupFinalizer}
	return Strategy{Strategy: s, policy: policy, locations: locations, total: tenantlimits.NewTotal("NonAdminBackup", func(l oadpvalidation.Limits) int { return l.MaxBackupsPerNamespace })}
}

// PrepareForCreate records who creates the NonAdminBackup (package creator): the
// backups it makes carry the record, and an admin's restore of one runs
// with that user's rights.
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
// storage location that is a NonAdminBackupStorageLocation of the same
// namespace.
func (s Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	o := obj.(*oadp.NonAdminBackup)
	errs := append(s.Strategy.Validate(ctx, obj), oadpvalidation.ValidateNonAdminBackupSpec(o.Namespace, &o.Spec, field.NewPath("spec"))...)
	errs = append(errs, validateVerifyRequest(o)...)
	policy, perrs := s.policy.Policy(ctx)
	errs = append(errs, perrs...)
	errs = append(errs, oadpvalidation.ValidateBackupPolicy(o.Spec.BackupSpec, policy, field.NewPath("spec", "backupSpec"))...)
	if o.Spec.BackupSpec != nil && o.Spec.BackupSpec.StorageLocation != "" {
		errs = append(errs, ValidateLocation(ctx, s.locations, o.Namespace, o.Spec.BackupSpec.StorageLocation, field.NewPath("spec", "backupSpec", "storageLocation"))...)
	}
	return append(errs, s.total.Check(ctx, o.Namespace, policy)...)
}

// ValidateLocation: a backup's storage location (at p) must be a
// NonAdminBackupStorageLocation of its namespace that the administrator
// approved and the server made (phase Created). Whether its Velero
// location is Available is the engine's to wait for.
func ValidateLocation(ctx context.Context, locations rest.Getter, namespace, name string, p *field.Path) field.ErrorList {
	if locations == nil {
		return field.ErrorList{field.NotFound(p, fmt.Sprintf("NonAdminBackupStorageLocation %s of namespace %s", name, namespace))}
	}
	obj, err := locations.Get(genericrequest.WithNamespace(ctx, namespace), name, &metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return field.ErrorList{field.NotFound(p, fmt.Sprintf("NonAdminBackupStorageLocation %s of namespace %s", name, namespace))}
	case err != nil:
		return field.ErrorList{field.InternalError(p, err)}
	}
	if problem := oadpvalidation.LocationProblem(obj.(*oadp.NonAdminBackupStorageLocation)); problem != "" {
		return field.ErrorList{field.Invalid(p, name, problem)}
	}
	return nil
}

// ValidateUpdate checks the update. The backup spec cannot change once the
// NonAdminBackup exists (its Velero backup was made from it); only
// deleteBackup and forceDeleteBackup may be set.
func (s Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	o, oldO := obj.(*oadp.NonAdminBackup), old.(*oadp.NonAdminBackup)
	errs := s.Strategy.ValidateUpdate(ctx, obj, old)
	if !resource.DeepEqual(o.Spec.BackupSpec, oldO.Spec.BackupSpec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "backupSpec"), "is immutable after creation"))
	}
	return append(errs, validateVerifyRequest(o)...)
}

// validateVerifyRequest: a tenant asks for a verification of its backup
// as an admin does, with the backstop.io/verify annotation, which the
// tenant engine passes on to the Velero backup; it is bounded as there.
func validateVerifyRequest(o *oadp.NonAdminBackup) field.ErrorList {
	if v := o.Annotations[velerov1.VerifyAnnotation]; len(v) > velerovalidation.MaxVerifyRequest {
		return field.ErrorList{field.TooLong(field.NewPath("metadata", "annotations").Key(velerov1.VerifyAnnotation), "", velerovalidation.MaxVerifyRequest)}
	}
	return nil
}

// NewStatusStrategy returns the strategy of the status subresource: only
// the server's engines write it, along oadpv1alpha1.NonAdminBackupLifecycle.
func NewStatusStrategy(s resource.Strategy) resource.StatusStrategy {
	st := resource.NewLifecycleStatusStrategy(s, oadpv1alpha1.NonAdminBackupLifecycle, func(o runtime.Object) oadpv1alpha1.NonAdminPhase {
		return oadpv1alpha1.NonAdminPhase(o.(*oadp.NonAdminBackup).Status.Phase)
	}, field.NewPath("status", "phase"))
	st.NotStored = func(o runtime.Object) {
		nab := o.(*oadp.NonAdminBackup)
		if q := nab.Status.QueueInfo; q != nil {
			q.EstimatedQueuePosition = 0
		}
		if vb := nab.Status.VeleroBackup; vb != nil && vb.Status != nil {
			vb.Status.QueuePosition = 0
		}
	}
	return st
}

// Table renders NonAdminBackups like the OADP CRD's printer columns.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Request-Phase", Type: "string", Description: "Phase of the NonAdminBackup", Cell: func(o runtime.Object) any {
		return string(o.(*oadp.NonAdminBackup).Status.Phase)
	}},
	resource.Column{Name: "Velero-Phase", Type: "string", Description: "Phase of the Velero backup", Cell: func(o runtime.Object) any {
		if vb := o.(*oadp.NonAdminBackup).Status.VeleroBackup; vb != nil && vb.Status != nil {
			return string(vb.Status.Phase)
		}
		return ""
	}},
	resource.AgeColumn,
)
