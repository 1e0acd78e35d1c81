package volumesnapshotlocation

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewREST returns the storage of volumesnapshotlocations and of their status subresource.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter) (*resource.REST, *resource.StatusREST, error) {
	strategy := NewStrategy(scheme)
	return resource.NewStore(optsGetter, resource.Definition{
		Resource:       velero.Resource("volumesnapshotlocations"),
		Singular:       velero.Resource("volumesnapshotlocation"),
		NewFunc:        func() runtime.Object { return &velero.VolumeSnapshotLocation{} },
		NewListFunc:    func() runtime.Object { return &velero.VolumeSnapshotLocationList{} },
		Strategy:       strategy,
		StatusStrategy: resource.NewStatusStrategy(strategy),
		Table:          Table,
		ShortNames:     []string{"vsl"},
		Categories:     []string{"velero"},
	})
}
