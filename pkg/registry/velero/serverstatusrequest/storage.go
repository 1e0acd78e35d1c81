package serverstatusrequest

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewREST returns the storage of serverstatusrequests and of their status subresource.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter) (*resource.REST, *resource.StatusREST, error) {
	strategy := NewStrategy(scheme)
	return resource.NewStore(optsGetter, resource.Definition{
		Resource:       velero.Resource("serverstatusrequests"),
		Singular:       velero.Resource("serverstatusrequest"),
		NewFunc:        func() runtime.Object { return &velero.ServerStatusRequest{} },
		NewListFunc:    func() runtime.Object { return &velero.ServerStatusRequestList{} },
		Strategy:       strategy,
		StatusStrategy: resource.NewStatusStrategy(strategy),
		Table:          Table,
		ShortNames:     []string{"ssr"},
		Categories:     []string{"velero"},
	})
}
