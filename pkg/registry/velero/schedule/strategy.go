// Package schedule is the registry of velero.io Schedules: cron validation and kubectl columns (strategy.go) and the REST storage (storage.go).
package schedule

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerovalidation "github.com/backstop-io/backstop/pkg/apis/velero/validation"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// Strategy is the Schedule strategy.
type Strategy struct{ resource.Strategy }

// NewStrategy returns the Schedule strategy.
func NewStrategy(typer runtime.ObjectTyper) Strategy {
	return Strategy{resource.NewStrategy(typer, velerov1.SchemeGroupVersion.String())}
}

// Validate checks the metadata and the spec.
func (s Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	o := obj.(*velero.Schedule)
	return append(s.Strategy.Validate(ctx, obj), validateSpec(o)...)
}

// ValidateUpdate checks the metadata update and the new spec.
func (s Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	o := obj.(*velero.Schedule)
	return append(s.Strategy.ValidateUpdate(ctx, obj, old), validateSpec(o)...)
}

func validateSpec(o *velero.Schedule) field.ErrorList {
	return velerovalidation.ValidateScheduleSpec(&o.Spec, field.NewPath("spec"))
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
