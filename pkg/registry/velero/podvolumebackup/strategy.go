// Package podvolumebackup is the registry of velero.io PodVolumeBackups: kubectl columns (strategy.go) and the REST storage (storage.go).
package podvolumebackup

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewStrategy returns the PodVolumeBackup strategy: the shared rules only.
func NewStrategy(typer runtime.ObjectTyper) resource.Strategy {
	return resource.NewStrategy(typer, velerov1.SchemeGroupVersion.String())
}

// Table renders podvolumebackups for kubectl get.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Status", Type: "string", Description: "Phase of the pod volume backup", Cell: func(o runtime.Object) any { return string(o.(*velero.PodVolumeBackup).Status.Phase) }},
	resource.Column{Name: "Storage Location", Type: "string", Description: "Backup storage location", Cell: func(o runtime.Object) any { return string(o.(*velero.PodVolumeBackup).Spec.BackupStorageLocation) }},
	resource.AgeColumn,
	resource.Column{Name: "Node", Type: "string", Priority: 1, Description: "Node processing it", Cell: func(o runtime.Object) any { return string(o.(*velero.PodVolumeBackup).Spec.Node) }},
)
