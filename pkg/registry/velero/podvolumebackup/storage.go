package podvolumebackup

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewREST returns the storage of podvolumebackups and of their status subresource.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter) (*resource.REST, *resource.StatusREST, error) {
	strategy := NewStrategy(scheme)
	return resource.NewStore(optsGetter, resource.Definition{
		Resource:       velero.Resource("podvolumebackups"),
		Singular:       velero.Resource("podvolumebackup"),
		NewFunc:        func() runtime.Object { return &velero.PodVolumeBackup{} },
		NewListFunc:    func() runtime.Object { return &velero.PodVolumeBackupList{} },
		Strategy:       strategy,
		StatusStrategy: resource.NewStatusStrategy(strategy),
		Table:          Table,
		ShortNames:     []string{},
		Categories:     []string{"velero"},
	})
}
