// Package podvolumerestore is the registry of velero.io PodVolumeRestores: kubectl columns (strategy.go) and the REST storage (storage.go).
package podvolumerestore

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// Strategy is the PodVolumeRestore strategy.
type Strategy struct{ resource.Strategy }

// NewStrategy returns the PodVolumeRestore strategy.
func NewStrategy(typer runtime.ObjectTyper) Strategy {
	return Strategy{resource.NewStrategy(typer, velerov1.SchemeGroupVersion.String())}
}

// Validate checks the metadata and the spec.
func (s Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	o := obj.(*velero.PodVolumeRestore)
	return append(s.Strategy.Validate(ctx, obj), validateSpec(o)...)
}

// ValidateUpdate checks the metadata update and the new spec.
func (s Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	o := obj.(*velero.PodVolumeRestore)
	return append(s.Strategy.ValidateUpdate(ctx, obj, old), validateSpec(o)...)
}

func validateSpec(o *velero.PodVolumeRestore) field.ErrorList {
	return nil
}

// Table renders podvolumerestores for kubectl get.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Status", Type: "string", Description: "Phase of the pod volume restore", Cell: func(o runtime.Object) any { return string(o.(*velero.PodVolumeRestore).Status.Phase) }},
	resource.Column{Name: "Storage Location", Type: "string", Description: "Backup storage location", Cell: func(o runtime.Object) any { return string(o.(*velero.PodVolumeRestore).Spec.BackupStorageLocation) }},
	resource.AgeColumn,
)
