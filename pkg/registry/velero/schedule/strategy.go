// Package schedule is the registry of velero.io Schedules: cron validation,
// the server's skipImmediately default and kubectl columns (strategy.go),
// the REST storage (storage.go) and the pause, unpause and trigger
// subresources (subresources.go).
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
type Strategy struct {
	resource.Strategy
	// skipImmediately is the server's default for spec.skipImmediately
	// (--schedule-skip-immediately).
	skipImmediately bool
}

// NewStrategy returns the Schedule strategy; skipImmediately is the value
// new schedules that leave spec.skipImmediately unset get.
func NewStrategy(typer runtime.ObjectTyper, skipImmediately bool) Strategy {
	s := resource.NewStrategy(typer, velerov1.SchemeGroupVersion.String())
	s.ValidateObject = validate
	return Strategy{Strategy: s, skipImmediately: skipImmediately}
}

// PrepareForCreate clears the status and applies the server's
// skipImmediately default, as Velero's --schedule-skip-immediately does.
func (s Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	s.Strategy.PrepareForCreate(ctx, obj)
	sch := obj.(*velero.Schedule)
	if sch.Spec.SkipImmediately == nil {
		v := s.skipImmediately
		sch.Spec.SkipImmediately = &v
	}
}

// NewStatusStrategy returns the strategy of the status subresource: only
// the server's engines write it, along velerov1.ScheduleLifecycle.
func NewStatusStrategy(s Strategy) resource.StatusStrategy {
	return resource.NewLifecycleStatusStrategy(s.Strategy, velerov1.ScheduleLifecycle, func(o runtime.Object) velerov1.SchedulePhase {
		return velerov1.SchedulePhase(o.(*velero.Schedule).Status.Phase)
	}, field.NewPath("status", "phase"))
}

func validate(obj runtime.Object) field.ErrorList {
	sch := obj.(*velero.Schedule)
	errs := velerovalidation.ValidateScheduleSpec(&sch.Spec, field.NewPath("spec"))
	return append(errs, velerovalidation.ValidateScheduleAnnotations(sch.Annotations, field.NewPath("metadata", "annotations"))...)
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
