// Package podvolumebackup is the registry of velero.io PodVolumeBackups: kubectl columns (strategy.go) and the REST storage (storage.go).
package podvolumebackup

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// Strategy is the PodVolumeBackup strategy.
type Strategy struct{ resource.Strategy }

// NewStrategy returns the PodVolumeBackup strategy.
func NewStrategy(typer runtime.ObjectTyper) Strategy {
	return Strategy{resource.NewStrategy(typer, velerov1.SchemeGroupVersion.String())}
}

// Validate checks the metadata and the spec.
func (s Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	o := obj.(*velero.PodVolumeBackup)
	return append(s.Strategy.Validate(ctx, obj), validateSpec(o)...)
}

// ValidateUpdate checks the metadata update and the new spec.
func (s Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	o := obj.(*velero.PodVolumeBackup)
	return append(s.Strategy.ValidateUpdate(ctx, obj, old), validateSpec(o)...)
}

func validateSpec(o *velero.PodVolumeBackup) field.ErrorList {
	return nil
}

// Table renders podvolumebackups for kubectl get.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Status", Type: "string", Description: "Phase of the pod volume backup", Cell: func(o runtime.Object) any { return string(o.(*velero.PodVolumeBackup).Status.Phase) }},
	resource.Column{Name: "Storage Location", Type: "string", Description: "Backup storage location", Cell: func(o runtime.Object) any { return string(o.(*velero.PodVolumeBackup).Spec.BackupStorageLocation) }},
	resource.AgeColumn,
	resource.Column{Name: "Node", Type: "string", Priority: 1, Description: "Node processing it", Cell: func(o runtime.Object) any { return string(o.(*velero.PodVolumeBackup).Spec.Node) }},
)
