package backup

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewREST returns the storage of backups and of their status subresource.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, adminNamespace string, defaultLocation DefaultLocationFunc) (*resource.REST, *resource.StatusREST, error) {
	strategy := NewStrategy(scheme, defaultLocation)
	return resource.NewStore(optsGetter, resource.Definition{
		Resource:       velero.Resource("backups"),
		Singular:       velero.Resource("backup"),
		NewFunc:        func() runtime.Object { return &velero.Backup{} },
		NewListFunc:    func() runtime.Object { return &velero.BackupList{} },
		Strategy:       strategy,
		StatusStrategy: resource.NewStatusStrategy(strategy.Strategy),
		Table:          Table,
		AdminNamespace: adminNamespace,
		Categories:     []string{"velero"},
	})
}
