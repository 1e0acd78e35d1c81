package backup

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	"github.com/backstop-io/backstop/pkg/objectstore"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// Storage is the REST storage of backups and their subresources.
type Storage struct {
	Backup *resource.REST
	Status *resource.StatusREST
	Cancel *CancelREST
	Logs   *resource.LogsREST
}

// NewREST returns the storage of backups and of their status, cancel and
// logs subresources.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, adminNamespace string, defaultLocation DefaultLocationFunc, locations objectstore.LocationGetter) (*Storage, error) {
	strategy := NewStrategy(scheme, defaultLocation)
	main, status, err := resource.NewStore(optsGetter, resource.Definition{
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
	if err != nil {
		return nil, err
	}
	main.BeginUpdate = refuseCancelOfFinished
	return &Storage{
		Backup: main,
		Status: status,
		Cancel: &CancelREST{store: main.Store},
		Logs:   resource.NewLogsREST(velero.Resource("backups"), main.New, logTarget(main), locations),
	}, nil
}
