// Package backuprepository is the registry of velero.io BackupRepositorys: kubectl columns (strategy.go) and the REST storage (storage.go).
package backuprepository

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// Strategy is the BackupRepository strategy.
type Strategy struct{ resource.Strategy }

// NewStrategy returns the BackupRepository strategy.
func NewStrategy(typer runtime.ObjectTyper) Strategy {
	return Strategy{resource.NewStrategy(typer, velerov1.SchemeGroupVersion.String())}
}

// Validate checks the metadata and the spec.
func (s Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	o := obj.(*velero.BackupRepository)
	return append(s.Strategy.Validate(ctx, obj), validateSpec(o)...)
}

// ValidateUpdate checks the metadata update and the new spec.
func (s Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	o := obj.(*velero.BackupRepository)
	return append(s.Strategy.ValidateUpdate(ctx, obj, old), validateSpec(o)...)
}

func validateSpec(o *velero.BackupRepository) field.ErrorList {
	return nil
}

// Table renders backuprepositories for kubectl get.
var Table = resource.NewTableConvertor(
	resource.AgeColumn,
	resource.Column{Name: "Repository Type", Type: "string", Description: "Repository type", Cell: func(o runtime.Object) any { return string(o.(*velero.BackupRepository).Spec.RepositoryType) }},
)
