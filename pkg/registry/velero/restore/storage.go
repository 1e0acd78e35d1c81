package restore

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewREST returns the storage of restores and of their status subresource.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, adminNamespace string) (*resource.REST, *resource.StatusREST, error) {
	strategy := NewStrategy(scheme)
	return resource.NewStore(optsGetter, resource.Definition{
		Resource:       velero.Resource("restores"),
		Singular:       velero.Resource("restore"),
		NewFunc:        func() runtime.Object { return &velero.Restore{} },
		NewListFunc:    func() runtime.Object { return &velero.RestoreList{} },
		Strategy:       strategy,
		StatusStrategy: NewStatusStrategy(strategy),
		Table:          Table,
		AdminNamespace: adminNamespace,
		ShortNames:     []string{},
		Categories:     []string{"velero"},
	})
}
