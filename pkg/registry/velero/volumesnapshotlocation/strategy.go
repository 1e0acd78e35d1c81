// Package volumesnapshotlocation is the registry of velero.io VolumeSnapshotLocations: validation and kubectl columns (strategy.go) and the REST storage (storage.go).
package volumesnapshotlocation

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewStrategy returns the VolumeSnapshotLocation strategy.
func NewStrategy(typer runtime.ObjectTyper) resource.Strategy {
	s := resource.NewStrategy(typer, velerov1.SchemeGroupVersion.String())
	s.ValidateObject = validate
	return s
}

func validate(obj runtime.Object) field.ErrorList {
	if obj.(*velero.VolumeSnapshotLocation).Spec.Provider == "" {
		return field.ErrorList{field.Required(field.NewPath("spec", "provider"), "a provider is required")}
	}
	return nil
}

// Table renders volumesnapshotlocations for kubectl get.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Provider", Type: "string", Description: "Snapshot provider", Cell: func(o runtime.Object) any { return string(o.(*velero.VolumeSnapshotLocation).Spec.Provider) }},
	resource.AgeColumn,
)
