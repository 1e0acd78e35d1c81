// Package restore is the registry of velero.io Restores: validation and kubectl columns (strategy.go) and the REST storage (storage.go).
package restore

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerovalidation "github.com/backstop-io/backstop/pkg/apis/velero/validation"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewStrategy returns the Restore strategy.
func NewStrategy(typer runtime.ObjectTyper) resource.Strategy {
	s := resource.NewStrategy(typer, velerov1.SchemeGroupVersion.String())
	s.ValidateObject = validate
	s.Finalizers = []string{velerov1.RestoreDataFinalizer}
	return s
}

// NewStatusStrategy returns the strategy of the status subresource: only
// the server's engines write it, along velerov1.RestoreLifecycle.
func NewStatusStrategy(s resource.Strategy) resource.StatusStrategy {
	return resource.NewLifecycleStatusStrategy(s, velerov1.RestoreLifecycle, func(o runtime.Object) velerov1.RestorePhase {
		return velerov1.RestorePhase(o.(*velero.Restore).Status.Phase)
	}, field.NewPath("status", "phase"))
}

func validate(obj runtime.Object) field.ErrorList {
	return velerovalidation.ValidateRestoreSpec(&obj.(*velero.Restore).Spec, field.NewPath("spec"))
}

// Table renders restores for kubectl get.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Backup", Type: "string", Description: "Backup restored from", Cell: func(o runtime.Object) any { return string(o.(*velero.Restore).Spec.BackupName) }},
	resource.Column{Name: "Status", Type: "string", Description: "Phase of the restore", Cell: func(o runtime.Object) any { return string(o.(*velero.Restore).Status.Phase) }},
	resource.Column{Name: "Started", Type: "string", Description: "Time since the restore started", Cell: func(o runtime.Object) any { return resource.SinceP(o.(*velero.Restore).Status.StartTimestamp) }},
	resource.Column{Name: "Completed", Type: "string", Description: "Time since the restore completed", Cell: func(o runtime.Object) any { return resource.SinceP(o.(*velero.Restore).Status.CompletionTimestamp) }},
	resource.Column{Name: "Errors", Type: "integer", Description: "Errors during the restore", Cell: func(o runtime.Object) any { return int64(o.(*velero.Restore).Status.Errors) }},
	resource.Column{Name: "Warnings", Type: "integer", Description: "Warnings during the restore", Cell: func(o runtime.Object) any { return int64(o.(*velero.Restore).Status.Warnings) }},
	resource.AgeColumn,
	resource.Column{Name: "Selector", Type: "string", Description: "Label selector of the restore", Cell: func(o runtime.Object) any { return resource.Selector(o.(*velero.Restore).Spec.LabelSelector) }},
)
