// Package backuprepository is the registry of velero.io BackupRepositorys: kubectl columns (strategy.go) and the REST storage (storage.go).
package backuprepository

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewStrategy returns the BackupRepository strategy: the shared rules only.
func NewStrategy(typer runtime.ObjectTyper) resource.Strategy {
	return resource.NewStrategy(typer, velerov1.SchemeGroupVersion.String())
}

// Table renders backuprepositories for kubectl get.
var Table = resource.NewTableConvertor(
	resource.AgeColumn,
	resource.Column{Name: "Repository Type", Type: "string", Description: "Repository type", Cell: func(o runtime.Object) any { return string(o.(*velero.BackupRepository).Spec.RepositoryType) }},
)
