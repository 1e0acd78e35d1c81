// Package restore is the registry of velero.io Restores: validation and kubectl columns (strategy.go) and the REST storage (storage.go).
package restore

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerovalidation "github.com/backstop-io/backstop/pkg/apis/velero/validation"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// Strategy is the Restore strategy.
type Strategy struct{ resource.Strategy }

// NewStrategy returns the Restore strategy.
func NewStrategy(typer runtime.ObjectTyper) Strategy {
	return Strategy{resource.NewStrategy(typer, velerov1.SchemeGroupVersion.String())}
}

// Validate checks the metadata and the spec.
func (s Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	o := obj.(*velero.Restore)
	return append(s.Strategy.Validate(ctx, obj), validateSpec(o)...)
}

// ValidateUpdate checks the metadata update and the new spec.
func (s Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	o := obj.(*velero.Restore)
	return append(s.Strategy.ValidateUpdate(ctx, obj, old), validateSpec(o)...)
}

func validateSpec(o *velero.Restore) field.ErrorList {
	return velerovalidation.ValidateRestoreSpec(&o.Spec, field.NewPath("spec"))
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
