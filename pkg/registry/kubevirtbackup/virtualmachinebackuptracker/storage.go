package virtualmachinebackuptracker

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/backstop-io/backstop/pkg/apis/kubevirtbackup"
	"github.com/backstop-io/backstop/pkg/registry/resource"
	"github.com/backstop-io/backstop/pkg/registry/tenantlimits"
)

// NewREST returns the storage of VirtualMachineBackupTrackers and their status.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, policy tenantlimits.PolicyFunc) (*resource.REST, *resource.StatusREST, error) {
	strategy := NewStrategy(scheme, policy)
	main, status, err := resource.NewStore(optsGetter, resource.Definition{
		Resource:       kubevirtbackup.Resource("virtualmachinebackuptrackers"),
		Singular:       kubevirtbackup.Resource("virtualmachinebackuptracker"),
		NewFunc:        func() runtime.Object { return &kubevirtbackup.VirtualMachineBackupTracker{} },
		NewListFunc:    func() runtime.Object { return &kubevirtbackup.VirtualMachineBackupTrackerList{} },
		Strategy:       strategy,
		StatusStrategy: NewStatusStrategy(strategy),
		Table:          Table,
		ShortNames:     []string{"vmbackuptracker"},
		Categories:     []string{"kubevirt"},
	})
	if err != nil {
		return nil, nil, err
	}
	strategy.total.Lister = main
	return main, status, nil
}
