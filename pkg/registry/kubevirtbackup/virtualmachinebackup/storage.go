package virtualmachinebackup

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/backstop-io/backstop/pkg/apis/kubevirtbackup"
	"github.com/backstop-io/backstop/pkg/registry/resource"
	"github.com/backstop-io/backstop/pkg/registry/tenantlimits"
)

// Storage is the REST storage of VirtualMachineBackups and their
// subresources.
type Storage struct {
	Backup *resource.REST
	Status *resource.StatusREST
	Cancel *CancelREST
}

// NewREST returns the storage of VirtualMachineBackups and of their status
// and cancel subresources.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, policy tenantlimits.PolicyFunc) (*Storage, error) {
	strategy := NewStrategy(scheme, policy)
	main, status, err := resource.NewStore(optsGetter, resource.Definition{
		Resource:       kubevirtbackup.Resource("virtualmachinebackups"),
		Singular:       kubevirtbackup.Resource("virtualmachinebackup"),
		NewFunc:        func() runtime.Object { return &kubevirtbackup.VirtualMachineBackup{} },
		NewListFunc:    func() runtime.Object { return &kubevirtbackup.VirtualMachineBackupList{} },
		Strategy:       strategy,
		StatusStrategy: NewStatusStrategy(strategy),
		BeginUpdate:    refuseCancelOfFinished,
		Table:          Table,
		ShortNames:     []string{"vmbackup", "vmbackups"},
		Categories:     []string{"kubevirt"},
	})
	if err != nil {
		return nil, err
	}
	strategy.total.Lister = main
	return &Storage{Backup: main, Status: status, Cancel: &CancelREST{store: main.Store}}, nil
}
