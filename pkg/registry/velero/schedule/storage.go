package schedule

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/utils/clock"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// Storage is the REST storage of schedules and their subresources.
type Storage struct {
	Schedule *resource.REST
	Status   *resource.StatusREST
	Pause    *PauseREST
	Unpause  *UnpauseREST
	Trigger  *TriggerREST
}

// NewREST returns the storage of schedules and of their status, pause,
// unpause and trigger subresources; backups is where triggered backups
// are created; skipImmediately is the server's default for new schedules.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, adminNamespace string, backups BackupStore, skipImmediately bool) (*Storage, error) {
	strategy := NewStrategy(scheme, skipImmediately)
	main, status, err := resource.NewStore(optsGetter, resource.Definition{
		Resource:       velero.Resource("schedules"),
		Singular:       velero.Resource("schedule"),
		NewFunc:        func() runtime.Object { return &velero.Schedule{} },
		NewListFunc:    func() runtime.Object { return &velero.ScheduleList{} },
		Strategy:       strategy,
		StatusStrategy: NewStatusStrategy(strategy),
		Table:          Table,
		AdminNamespace: adminNamespace,
		ShortNames:     []string{},
		Categories:     []string{"velero"},
	})
	if err != nil {
		return nil, err
	}
	return &Storage{
		Schedule: main, Status: status,
		Pause:   &PauseREST{store: main.Store},
		Unpause: &UnpauseREST{store: main.Store},
		Trigger: &TriggerREST{store: main.Store, backups: backups, clock: clock.RealClock{}},
	}, nil
}
