package dataprotectionapplication

import (
	"context"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	oadpvalidation "github.com/backstop-io/backstop/pkg/apis/oadp/validation"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewREST returns the storage of DataProtectionApplications, which live
// in the admin namespace only, and their status.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, adminNamespace string) (*resource.REST, *resource.StatusREST, error) {
	strategy := NewStrategy(scheme)
	return resource.NewStore(optsGetter, resource.Definition{
		Resource:       oadp.Resource("dataprotectionapplications"),
		Singular:       oadp.Resource("dataprotectionapplication"),
		NewFunc:        func() runtime.Object { return &oadp.DataProtectionApplication{} },
		NewListFunc:    func() runtime.Object { return &oadp.DataProtectionApplicationList{} },
		Strategy:       strategy,
		StatusStrategy: NewStatusStrategy(strategy),
		Table:          Table,
		AdminNamespace: adminNamespace,
		ShortNames:     []string{"dpa"},
		Categories:     []string{"oadp"},
	})
}

// PolicySource reads the policy in effect from the DataProtectionApplications
// of the admin namespace, as stored (each admission reads it: a policy
// written is in effect for the next request, on every replica).
type PolicySource struct {
	Namespace string
	Store     *resource.REST
}

// Policy is the spec.nonAdmin of the oldest DataProtectionApplication of
// the admin namespace that has one (ties: by name); nil when none has.
func (p PolicySource) Policy(ctx context.Context) (*oadpvalidation.Policy, error) {
	obj, err := p.Store.List(genericrequest.WithNamespace(ctx, p.Namespace), &metainternalversion.ListOptions{})
	if err != nil {
		return nil, err
	}
	return oadpvalidation.InEffect(obj.(*oadp.DataProtectionApplicationList).Items), nil
}
