package dataupload

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewREST returns the storage of datauploads and of their status
// subresource. DataUploads are made and processed in the admin namespace
// only, as Velero's are in its own.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, adminNamespace string) (*resource.REST, *resource.StatusREST, error) {
	strategy := NewStrategy(scheme)
	return resource.NewStore(optsGetter, resource.Definition{
		Resource:       velero.Resource("datauploads"),
		Singular:       velero.Resource("dataupload"),
		NewFunc:        func() runtime.Object { return &velero.DataUpload{} },
		NewListFunc:    func() runtime.Object { return &velero.DataUploadList{} },
		Strategy:       strategy,
		StatusStrategy: NewStatusStrategy(strategy),
		Table:          Table,
		AdminNamespace: adminNamespace,
		ShortNames:     []string{},
		Categories:     []string{"velero"},
	})
}
