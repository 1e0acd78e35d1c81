package nonadminbackupstoragelocation

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	"github.com/backstop-io/backstop/pkg/registry/resource"
	"github.com/backstop-io/backstop/pkg/registry/tenantlimits"
)

// NewREST returns the storage of NonAdminBackupStorageLocations and their
// status.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, policy tenantlimits.PolicyFunc) (*resource.REST, *resource.StatusREST, error) {
	strategy := NewStrategy(scheme, policy)
	main, status, err := resource.NewStore(optsGetter, resource.Definition{
		Resource:       oadp.Resource("nonadminbackupstoragelocations"),
		Singular:       oadp.Resource("nonadminbackupstoragelocation"),
		NewFunc:        func() runtime.Object { return &oadp.NonAdminBackupStorageLocation{} },
		NewListFunc:    func() runtime.Object { return &oadp.NonAdminBackupStorageLocationList{} },
		Strategy:       strategy,
		StatusStrategy: NewStatusStrategy(strategy.Strategy),
		Table:          Table,
		ShortNames:     []string{"nabsl"},
		Categories:     []string{"oadp"},
	})
	if err != nil {
		return nil, nil, err
	}
	strategy.total.Lister = main
	return main, status, nil
}
