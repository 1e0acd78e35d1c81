// Package datadownload is the registry of velero.io/v2alpha1 DataDownloads:
// validation, the status rules and kubectl columns (strategy.go) and the
// REST storage (storage.go).
package datadownload

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	velerovalidation "github.com/backstop-io/backstop/pkg/apis/velero/validation"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// Strategy is the DataDownload strategy: the name's and the spec's rules on
// create; on update only cancel may change, from false to true, and the
// spec, immutable, is not checked again (a rule tightened later never
// holds up a stored object's status or finalizers).
type Strategy struct{ resource.Strategy }

// NewStrategy returns the DataDownload strategy.
func NewStrategy(typer runtime.ObjectTyper) Strategy {
	return Strategy{resource.NewStrategy(typer, velerov2alpha1.SchemeGroupVersion.String())}
}

// Validate checks a new DataDownload.
func (s Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	o := obj.(*velero.DataDownload)
	errs := s.Strategy.Validate(ctx, obj)
	if o.Name != "" {
		errs = append(errs, velerovalidation.ValidateDataMoveName(o.Name, field.NewPath("metadata", "name"))...)
	}
	return append(errs, velerovalidation.ValidateDataDownloadSpec(&o.Spec, field.NewPath("spec"))...)
}

// ValidateUpdate checks the update: the spec keeps its rules and changes
// only to be cancelled.
func (s Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	dd, oldDD := obj.(*velero.DataDownload), old.(*velero.DataDownload)
	errs := s.Strategy.ValidateUpdate(ctx, obj, old)
	spec, oldSpec := dd.Spec, oldDD.Spec
	spec.Cancel, oldSpec.Cancel = false, false
	return append(errs, velerovalidation.ValidateDataMoveUpdate(spec, oldSpec, dd.Spec.Cancel, oldDD.Spec.Cancel, field.NewPath("spec"))...)
}

// NewStatusStrategy returns the strategy of the status subresource: only
// the server's engines write it, along velerov2alpha1.DataDownloadLifecycle.
func NewStatusStrategy(s Strategy) resource.StatusStrategy {
	return resource.NewLifecycleStatusStrategy(s.Strategy, velerov2alpha1.DataDownloadLifecycle, func(o runtime.Object) velerov2alpha1.DataDownloadPhase {
		return velerov2alpha1.DataDownloadPhase(o.(*velero.DataDownload).Status.Phase)
	}, field.NewPath("status", "phase"))
}

// Table renders datadownloads as Velero's CRD prints them.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Status", Type: "string", Description: "DataDownload status such as New/InProgress", Cell: func(o runtime.Object) any {
		return string(o.(*velero.DataDownload).Status.Phase)
	}},
	resource.Column{Name: "Started", Type: "date", Description: "Time duration since this DataDownload was started", Cell: func(o runtime.Object) any {
		return resource.SinceP(o.(*velero.DataDownload).Status.StartTimestamp)
	}},
	resource.Column{Name: "Bytes Done", Type: "integer", Format: "int64", Description: "Completed bytes", Cell: func(o runtime.Object) any {
		return o.(*velero.DataDownload).Status.Progress.BytesDone
	}},
	resource.Column{Name: "Total Bytes", Type: "integer", Format: "int64", Description: "Total bytes", Cell: func(o runtime.Object) any {
		return o.(*velero.DataDownload).Status.Progress.TotalBytes
	}},
	resource.Column{Name: "Storage Location", Type: "string", Description: "Name of the Backup Storage Location where the backup data is stored", Cell: func(o runtime.Object) any {
		return o.(*velero.DataDownload).Spec.BackupStorageLocation
	}},
	resource.AgeColumn,
	resource.Column{Name: "Node", Type: "string", Description: "Name of the node where the DataDownload is processed", Cell: func(o runtime.Object) any {
		return o.(*velero.DataDownload).Status.Node
	}},
)
