package backupstoragelocation

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewREST returns the storage of backupstoragelocations and of their status subresource.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, adminNamespace string, servingCA []byte) (*resource.REST, *resource.StatusREST, error) {
	strategy := NewStrategy(scheme, servingCA)
	return resource.NewStore(optsGetter, resource.Definition{
		Resource:       velero.Resource("backupstoragelocations"),
		Singular:       velero.Resource("backupstoragelocation"),
		NewFunc:        func() runtime.Object { return &velero.BackupStorageLocation{} },
		NewListFunc:    func() runtime.Object { return &velero.BackupStorageLocationList{} },
		Strategy:       strategy,
		StatusStrategy: resource.NewStatusStrategy(strategy.Strategy),
		Table:          Table,
		AdminNamespace: adminNamespace,
		ShortNames:     []string{"bsl"},
		Categories:     []string{"velero"},
	})
}
