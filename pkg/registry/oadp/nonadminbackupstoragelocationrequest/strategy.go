// Package nonadminbackupstoragelocationrequest is the registry of
// oadp.openshift.io NonAdminBackupStorageLocationRequests: the admin's
// decision on a tenant's storage location. The server makes one per
// location, in the admin namespace; the admin sets spec.approvalDecision;
// the engine writes the status.
package nonadminbackupstoragelocationrequest

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// Decisions are the values of spec.approvalDecision.
var Decisions = []string{string(oadpv1alpha1.NonAdminBSLRequestApproved), string(oadpv1alpha1.NonAdminBSLRequestRejected), string(oadpv1alpha1.NonAdminBSLRequestPending)}

// Strategy is the NonAdminBackupStorageLocationRequest strategy.
type Strategy struct{ resource.Strategy }

// NewStrategy returns the strategy.
func NewStrategy(typer runtime.ObjectTyper) Strategy {
	return Strategy{resource.NewStrategy(typer, oadpv1alpha1.SchemeGroupVersion.String())}
}

// Validate checks a new request: only the server makes them (one per
// tenant location, named by its NACUUID).
func (s Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	errs := append(s.Strategy.Validate(ctx, obj), validateDecision(obj.(*oadp.NonAdminBackupStorageLocationRequest))...)
	if !resource.FromEngine(ctx) {
		errs = append(errs, field.Forbidden(field.NewPath("metadata"),
			"NonAdminBackupStorageLocationRequests are made by the server for each NonAdminBackupStorageLocation; set spec.approvalDecision on the one made"))
	}
	return errs
}

// ValidateUpdate checks the decision.
func (s Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return append(s.Strategy.ValidateUpdate(ctx, obj, old), validateDecision(obj.(*oadp.NonAdminBackupStorageLocationRequest))...)
}

func validateDecision(r *oadp.NonAdminBackupStorageLocationRequest) field.ErrorList {
	d := string(r.Spec.ApprovalDecision)
	if d == "" {
		return nil
	}
	for _, ok := range Decisions {
		if d == ok {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(field.NewPath("spec", "approvalDecision"), d, Decisions)}
}

// NewStatusStrategy returns the strategy of the status subresource: only
// the server's engines write it, along
// oadpv1alpha1.NonAdminBackupStorageLocationRequestLifecycle.
func NewStatusStrategy(s resource.Strategy) resource.StatusStrategy {
	return resource.NewLifecycleStatusStrategy(s, oadpv1alpha1.NonAdminBackupStorageLocationRequestLifecycle, func(o runtime.Object) oadpv1alpha1.NonAdminBSLRequestPhase {
		return oadpv1alpha1.NonAdminBSLRequestPhase(o.(*oadp.NonAdminBackupStorageLocationRequest).Status.Phase)
	}, field.NewPath("status", "phase"))
}

// Table renders requests like the OADP CRD's printer columns.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "NABSL-Namespace", Type: "string", Description: "Namespace of the NonAdminBackupStorageLocation", Cell: func(o runtime.Object) any {
		if s := o.(*oadp.NonAdminBackupStorageLocationRequest).Status.SourceNonAdminBSL; s != nil {
			return s.Namespace
		}
		return ""
	}},
	resource.Column{Name: "NABSL-Name", Type: "string", Description: "Name of the NonAdminBackupStorageLocation", Cell: func(o runtime.Object) any {
		if s := o.(*oadp.NonAdminBackupStorageLocationRequest).Status.SourceNonAdminBSL; s != nil {
			return s.Name
		}
		return ""
	}},
	resource.Column{Name: "Status", Type: "string", Description: "Phase of the request", Cell: func(o runtime.Object) any {
		return string(o.(*oadp.NonAdminBackupStorageLocationRequest).Status.Phase)
	}},
	resource.AgeColumn,
)

// NewREST returns the storage of requests (admin namespace only) and their
// status.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, adminNamespace string) (*resource.REST, *resource.StatusREST, error) {
	strategy := NewStrategy(scheme)
	return resource.NewStore(optsGetter, resource.Definition{
		Resource:       oadp.Resource("nonadminbackupstoragelocationrequests"),
		Singular:       oadp.Resource("nonadminbackupstoragelocationrequest"),
		NewFunc:        func() runtime.Object { return &oadp.NonAdminBackupStorageLocationRequest{} },
		NewListFunc:    func() runtime.Object { return &oadp.NonAdminBackupStorageLocationRequestList{} },
		Strategy:       strategy,
		StatusStrategy: NewStatusStrategy(strategy.Strategy),
		Table:          Table,
		AdminNamespace: adminNamespace,
		ShortNames:     []string{"nabslrequest"},
		Categories:     []string{"oadp"},
	})
}
