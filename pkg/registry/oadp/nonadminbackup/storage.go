package nonadminbackup

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewREST returns the storage of NonAdminBackups and their status.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter) (*resource.REST, *resource.StatusREST, error) {
	strategy := NewStrategy(scheme)
	return resource.NewStore(optsGetter, resource.Definition{
		Resource:       oadp.Resource("nonadminbackups"),
		Singular:       oadp.Resource("nonadminbackup"),
		NewFunc:        func() runtime.Object { return &oadp.NonAdminBackup{} },
		NewListFunc:    func() runtime.Object { return &oadp.NonAdminBackupList{} },
		Strategy:       strategy,
		StatusStrategy: NewStatusStrategy(strategy.Strategy),
		Table:          Table,
		ShortNames:     []string{"nab"},
		Categories:     []string{"oadp"},
	})
}
