// Package schedule is the registry of velero.io Schedules: cron validation and kubectl columns (strategy.go) and the REST storage (storage.go).
package schedule

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerovalidation "github.com/backstop-io/backstop/pkg/apis/velero/validation"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewStrategy returns the Schedule strategy.
func NewStrategy(typer runtime.ObjectTyper) resource.Strategy {
	s := resource.NewStrategy(typer, velerov1.SchemeGroupVersion.String())
	s.ValidateObject = validate
	return s
}

func validate(obj runtime.Object) field.ErrorList {
	return velerovalidation.ValidateScheduleSpec(&obj.(*velero.Schedule).Spec, field.NewPath("spec"))
}

// Table renders schedules for kubectl get.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Status", Type: "string", Description: "Phase of the schedule", Cell: func(o runtime.Object) any { return string(o.(*velero.Schedule).Status.Phase) }},
	resource.Column{Name: "Schedule", Type: "string", Description: "Cron expression", Cell: func(o runtime.Object) any { return string(o.(*velero.Schedule).Spec.Schedule) }},
	resource.Column{Name: "Last Backup", Type: "string", Description: "Time since the last backup", Cell: func(o runtime.Object) any { return resource.SinceP(o.(*velero.Schedule).Status.LastBackup) }},
	resource.AgeColumn,
	resource.Column{Name: "Paused", Type: "boolean", Description: "Whether the schedule is paused", Cell: func(o runtime.Object) any { return o.(*velero.Schedule).Spec.Paused }},
	resource.Column{Name: "Last Skipped", Type: "string", Priority: 1, Description: "Time since a due run was last skipped", Cell: func(o runtime.Object) any { return resource.SinceP(o.(*velero.Schedule).Status.LastSkipped) }},
)
