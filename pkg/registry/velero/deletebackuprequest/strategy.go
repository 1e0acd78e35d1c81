// Package deletebackuprequest is the registry of velero.io DeleteBackupRequests: validation and kubectl columns (strategy.go) and the REST storage (storage.go).
package deletebackuprequest

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerovalidation "github.com/backstop-io/backstop/pkg/apis/velero/validation"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewStrategy returns the DeleteBackupRequest strategy.
func NewStrategy(typer runtime.ObjectTyper) resource.Strategy {
	s := resource.NewStrategy(typer, velerov1.SchemeGroupVersion.String())
	s.ValidateObject = validate
	return s
}

// NewStatusStrategy returns the strategy of the status subresource: only
// the server's engines write it, along
// velerov1.DeleteBackupRequestLifecycle.
func NewStatusStrategy(s resource.Strategy) resource.StatusStrategy {
	return resource.NewLifecycleStatusStrategy(s, velerov1.DeleteBackupRequestLifecycle, func(o runtime.Object) velerov1.DeleteBackupRequestPhase {
		return velerov1.DeleteBackupRequestPhase(o.(*velero.DeleteBackupRequest).Status.Phase)
	}, field.NewPath("status", "phase"))
}

func validate(obj runtime.Object) field.ErrorList {
	return velerovalidation.ValidateDeleteBackupRequestSpec(&obj.(*velero.DeleteBackupRequest).Spec, field.NewPath("spec"))
}

// Table renders deletebackuprequests for kubectl get.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "BackupName", Type: "string", Description: "The backup to delete", Cell: func(o runtime.Object) any { return string(o.(*velero.DeleteBackupRequest).Spec.BackupName) }},
	resource.Column{Name: "Status", Type: "string", Description: "Phase of the request", Cell: func(o runtime.Object) any { return string(o.(*velero.DeleteBackupRequest).Status.Phase) }},
	resource.AgeColumn,
)
