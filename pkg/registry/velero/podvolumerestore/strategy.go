// Package podvolumerestore is the registry of velero.io PodVolumeRestores: kubectl columns (strategy.go) and the REST storage (storage.go).
package podvolumerestore

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewStrategy returns the PodVolumeRestore strategy: the shared rules only.
func NewStrategy(typer runtime.ObjectTyper) resource.Strategy {
	return resource.NewStrategy(typer, velerov1.SchemeGroupVersion.String())
}

// Table renders podvolumerestores for kubectl get.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Status", Type: "string", Description: "Phase of the pod volume restore", Cell: func(o runtime.Object) any { return string(o.(*velero.PodVolumeRestore).Status.Phase) }},
	resource.Column{Name: "Storage Location", Type: "string", Description: "Backup storage location", Cell: func(o runtime.Object) any { return string(o.(*velero.PodVolumeRestore).Spec.BackupStorageLocation) }},
	resource.AgeColumn,
)
