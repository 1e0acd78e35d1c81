// Package nonadmindownloadrequest is the registry of oadp.openshift.io
// NonAdminDownloadRequests: a tenant's request for a download link to a
// file of its own backup or restore (logs, contents, results). The target
// is checked at admission to be a NonAdminBackup (or, for restore kinds, a
// NonAdminRestore) of the same namespace.
package nonadmindownloadrequest

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	oadpvalidation "github.com/backstop-io/backstop/pkg/apis/oadp/validation"
	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerovalidation "github.com/backstop-io/backstop/pkg/apis/velero/validation"
	"github.com/backstop-io/backstop/pkg/objectstore"
	"github.com/backstop-io/backstop/pkg/registry/resource"
	"github.com/backstop-io/backstop/pkg/registry/tenantlimits"
)

// Strategy is the NonAdminDownloadRequest strategy.
type Strategy struct {
	resource.Strategy
	// nabs and nars read the tenant objects a request may name.
	nabs, nars rest.Getter
	policy     tenantlimits.PolicyFunc
	// total bounds a namespace's objects (tenantLimits).
	total *tenantlimits.Total
}

// NewStrategy returns the strategy; policy (nil: none) reads the admin's
// policy.
func NewStrategy(typer runtime.ObjectTyper, nabs, nars rest.Getter, policy tenantlimits.PolicyFunc) Strategy {
	return Strategy{Strategy: resource.NewStrategy(typer, oadpv1alpha1.SchemeGroupVersion.String()), nabs: nabs, nars: nars,
		policy: policy, total: tenantlimits.NewTotal("NonAdminDownloadRequest", func(l oadpvalidation.Limits) int { return l.MaxDownloadRequestsPerNamespace })}
}

// Validate checks a new request: a known kind, and a target of the
// request's own namespace.
func (s Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	o := obj.(*oadp.NonAdminDownloadRequest)
	p := field.NewPath("spec")
	errs := append(s.Strategy.Validate(ctx, obj), velerovalidation.ValidateDownloadRequestSpec(&velero.DownloadRequestSpec{Target: o.Spec.Target}, p)...)
	if len(errs) > 0 {
		return errs
	}
	kind, getter := "NonAdminBackup", s.nabs
	if objectstore.IsRestoreTarget(velerov1.DownloadTargetKind(o.Spec.Target.Kind)) {
		kind, getter = "NonAdminRestore", s.nars
	}
	name := p.Child("target", "name")
	if getter == nil {
		return append(errs, field.NotFound(name, fmt.Sprintf("%s %s of namespace %s", kind, o.Spec.Target.Name, o.Namespace)))
	}
	_, err := getter.Get(genericrequest.WithNamespace(ctx, o.Namespace), o.Spec.Target.Name, &metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		errs = append(errs, field.NotFound(name, fmt.Sprintf("%s %s of namespace %s", kind, o.Spec.Target.Name, o.Namespace)))
	case err != nil:
		errs = append(errs, field.InternalError(name, err))
	}
	policy, _ := s.policy.Policy(ctx)
	return append(errs, s.total.Check(ctx, o.Namespace, policy)...)
}

// ValidateUpdate checks the update: the target is immutable.
func (s Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	errs := s.Strategy.ValidateUpdate(ctx, obj, old)
	if !resource.DeepEqual(obj.(*oadp.NonAdminDownloadRequest).Spec, old.(*oadp.NonAdminDownloadRequest).Spec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), "is immutable after creation"))
	}
	return errs
}

// NewStatusStrategy returns the strategy of the status subresource: only
// the server's engines write it, along
// oadpv1alpha1.NonAdminDownloadRequestLifecycle.
func NewStatusStrategy(s resource.Strategy) resource.StatusStrategy {
	return resource.NewLifecycleStatusStrategy(s, oadpv1alpha1.NonAdminDownloadRequestLifecycle, func(o runtime.Object) oadpv1alpha1.NonAdminPhase {
		return oadpv1alpha1.NonAdminPhase(o.(*oadp.NonAdminDownloadRequest).Status.Phase)
	}, field.NewPath("status", "phase"))
}

// Table renders requests like the OADP CRD's printer columns.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Request-Phase", Type: "string", Description: "Phase of the request", Cell: func(o runtime.Object) any {
		return string(o.(*oadp.NonAdminDownloadRequest).Status.Phase)
	}},
	resource.AgeColumn,
)

// NewREST returns the storage of requests and their status.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, nabs, nars rest.Getter, policy tenantlimits.PolicyFunc) (*resource.REST, *resource.StatusREST, error) {
	strategy := NewStrategy(scheme, nabs, nars, policy)
	main, status, err := resource.NewStore(optsGetter, resource.Definition{
		Resource:       oadp.Resource("nonadmindownloadrequests"),
		Singular:       oadp.Resource("nonadmindownloadrequest"),
		NewFunc:        func() runtime.Object { return &oadp.NonAdminDownloadRequest{} },
		NewListFunc:    func() runtime.Object { return &oadp.NonAdminDownloadRequestList{} },
		Strategy:       strategy,
		StatusStrategy: NewStatusStrategy(strategy.Strategy),
		Table:          Table,
		ShortNames:     []string{"nadr"},
		Categories:     []string{"oadp"},
	})
	if err != nil {
		return nil, nil, err
	}
	strategy.total.Lister = main
	return main, status, nil
}
