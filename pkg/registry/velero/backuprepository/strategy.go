// Package backuprepository is the registry of velero.io BackupRepositorys:
// the rules of the spec and kubectl columns (strategy.go) and the REST
// storage (storage.go).
package backuprepository

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerovalidation "github.com/backstop-io/backstop/pkg/apis/velero/validation"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewStrategy returns the BackupRepository strategy: a maintenance
// frequency that is not negative, and the maintenance keys of
// spec.repositoryConfig that its maintenance reads.
func NewStrategy(typer runtime.ObjectTyper) resource.Strategy {
	s := resource.NewStrategy(typer, velerov1.SchemeGroupVersion.String())
	s.ValidateObject = validate
	return s
}

func validate(obj runtime.Object) field.ErrorList {
	spec := obj.(*velero.BackupRepository).Spec
	fld := field.NewPath("spec")
	var errs field.ErrorList
	if spec.MaintenanceFrequency.Duration < 0 {
		errs = append(errs, field.Invalid(fld.Child("maintenanceFrequency"), spec.MaintenanceFrequency.Duration.String(), "must not be negative"))
	}
	_, bad := velerovalidation.ParseRepositoryMaintenance(spec.RepositoryConfig, fld.Child("repositoryConfig"))
	return append(errs, bad...)
}

// Table renders backuprepositories for kubectl get.
var Table = resource.NewTableConvertor(
	resource.AgeColumn,
	resource.Column{Name: "Repository Type", Type: "string", Description: "Repository type", Cell: func(o runtime.Object) any { return string(o.(*velero.BackupRepository).Spec.RepositoryType) }},
)
