package backup

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	"github.com/backstop-io/backstop/pkg/livelog"
	"github.com/backstop-io/backstop/pkg/objectstore"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// Storage is the REST storage of backups and their subresources.
type Storage struct {
	Backup *resource.DecoratedREST
	// Queue orders the queued backups.
	Queue  *QueueIndex
	Status *resource.StatusREST
	Cancel *CancelREST
	Logs   *resource.LogsREST
}

// NewREST returns the storage of backups and of their status, cancel and
// logs subresources.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, adminNamespace string, defaultLocation DefaultLocationFunc, locations objectstore.Locations, live *livelog.Registry) (*Storage, error) {
	strategy := NewStrategy(scheme, defaultLocation)
	index := NewQueueIndex(adminNamespace)
	fill := queueFill(index)
	main, status, err := resource.NewStore(optsGetter, resource.Definition{
		Resource:       velero.Resource("backups"),
		Singular:       velero.Resource("backup"),
		NewFunc:        func() runtime.Object { return &velero.Backup{} },
		NewListFunc:    func() runtime.Object { return &velero.BackupList{} },
		Strategy:       strategy,
		StatusStrategy: NewStatusStrategy(strategy, index),
		BeginUpdate:    refuseCancelOfFinished,
		Decorate:       fill,
		Filled:         queueFilled,
		Table:          Table,
		AdminNamespace: adminNamespace,
		Categories:     []string{"velero"},
	})
	if err != nil {
		return nil, err
	}
	return &Storage{
		Backup: &resource.DecoratedREST{REST: main, Fill: fill},
		Queue:  index,
		Status: status,
		Cancel: &CancelREST{store: main.Store},
		Logs:   resource.NewLogsREST(velero.Resource("backups"), main.New, logTarget(main), locations, live),
	}, nil
}
