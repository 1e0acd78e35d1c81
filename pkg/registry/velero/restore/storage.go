package restore

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// Storage is the REST storage of restores and their status, with the
// queue of those waiting to run.
type Storage struct {
	Restore *resource.REST
	// Previewing is Restore, its objects' queue positions filled in and
	// its dry-run creates answered with previews: what the API serves.
	Previewing *PreviewREST
	Status     *resource.StatusREST
	Queue      *QueueIndex
}

// NewREST returns the storage of restores and of their status subresource.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, adminNamespace string) (*Storage, error) {
	queue := NewQueueIndex(adminNamespace)
	strategy := NewStrategy(scheme, queue)
	fill := queueFill(queue)
	main, status, err := resource.NewStore(optsGetter, resource.Definition{
		Resource:       velero.Resource("restores"),
		Singular:       velero.Resource("restore"),
		NewFunc:        func() runtime.Object { return &velero.Restore{} },
		NewListFunc:    func() runtime.Object { return &velero.RestoreList{} },
		Strategy:       strategy,
		StatusStrategy: NewStatusStrategy(strategy),
		Decorate:       fill,
		Filled:         queueFilled,
		Table:          Table,
		AdminNamespace: adminNamespace,
		ShortNames:     []string{},
		Categories:     []string{"velero"},
	})
	if err != nil {
		return nil, err
	}
	return &Storage{Restore: main, Previewing: &PreviewREST{DecoratedREST: &resource.DecoratedREST{REST: main, Fill: fill}}, Status: status, Queue: queue}, nil
}
