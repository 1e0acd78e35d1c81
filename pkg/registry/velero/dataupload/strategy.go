// Package dataupload is the registry of velero.io/v2alpha1 DataUploads:
// validation, the status rules and kubectl columns (strategy.go) and the
// REST storage (storage.go).
package dataupload

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	velerovalidation "github.com/backstop-io/backstop/pkg/apis/velero/validation"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// Strategy is the DataUpload strategy: the name's and the spec's rules on
// create; on update only cancel may change, from false to true, and the
// spec, immutable, is not checked again (a rule tightened later never
// holds up a stored object's status or finalizers).
type Strategy struct{ resource.Strategy }

// NewStrategy returns the DataUpload strategy.
func NewStrategy(typer runtime.ObjectTyper) Strategy {
	return Strategy{resource.NewStrategy(typer, velerov2alpha1.SchemeGroupVersion.String())}
}

// Validate checks a new DataUpload.
func (s Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	o := obj.(*velero.DataUpload)
	errs := s.Strategy.Validate(ctx, obj)
	if o.Name != "" {
		errs = append(errs, velerovalidation.ValidateDataMoveName(o.Name, field.NewPath("metadata", "name"))...)
	}
	return append(errs, velerovalidation.ValidateDataUploadSpec(&o.Spec, field.NewPath("spec"))...)
}

// ValidateUpdate checks the update: the spec keeps its rules and changes
// only to be cancelled.
func (s Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	du, oldDU := obj.(*velero.DataUpload), old.(*velero.DataUpload)
	errs := s.Strategy.ValidateUpdate(ctx, obj, old)
	spec, oldSpec := du.Spec, oldDU.Spec
	spec.Cancel, oldSpec.Cancel = false, false
	return append(errs, velerovalidation.ValidateDataMoveUpdate(spec, oldSpec, du.Spec.Cancel, oldDU.Spec.Cancel, field.NewPath("spec"))...)
}

// NewStatusStrategy returns the strategy of the status subresource: only
// the server's engines write it, along velerov2alpha1.DataUploadLifecycle.
func NewStatusStrategy(s Strategy) resource.StatusStrategy {
	return resource.NewLifecycleStatusStrategy(s.Strategy, velerov2alpha1.DataUploadLifecycle, func(o runtime.Object) velerov2alpha1.DataUploadPhase {
		return velerov2alpha1.DataUploadPhase(o.(*velero.DataUpload).Status.Phase)
	}, field.NewPath("status", "phase"))
}

// Table renders datauploads as Velero's CRD prints them.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Status", Type: "string", Description: "DataUpload status such as New/InProgress", Cell: func(o runtime.Object) any {
		return string(o.(*velero.DataUpload).Status.Phase)
	}},
	resource.Column{Name: "Started", Type: "date", Description: "Time duration since this DataUpload was started", Cell: func(o runtime.Object) any {
		return resource.SinceP(o.(*velero.DataUpload).Status.StartTimestamp)
	}},
	resource.Column{Name: "Bytes Done", Type: "integer", Format: "int64", Description: "Completed bytes", Cell: func(o runtime.Object) any {
		return o.(*velero.DataUpload).Status.Progress.BytesDone
	}},
	resource.Column{Name: "Total Bytes", Type: "integer", Format: "int64", Description: "Total bytes", Cell: func(o runtime.Object) any {
		return o.(*velero.DataUpload).Status.Progress.TotalBytes
	}},
	resource.Column{Name: "Incremental Bytes", Type: "integer", Format: "int64", Priority: 10, Description: "Incremental bytes", Cell: func(o runtime.Object) any {
		return o.(*velero.DataUpload).Status.IncrementalBytes
	}},
	resource.Column{Name: "Storage Location", Type: "string", Description: "Name of the Backup Storage Location where this backup should be stored", Cell: func(o runtime.Object) any {
		return o.(*velero.DataUpload).Spec.BackupStorageLocation
	}},
	resource.AgeColumn,
	resource.Column{Name: "Node", Type: "string", Description: "Name of the node where the DataUpload is processed", Cell: func(o runtime.Object) any {
		return o.(*velero.DataUpload).Status.Node
	}},
)
