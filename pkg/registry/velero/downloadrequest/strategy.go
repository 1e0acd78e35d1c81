// Package downloadrequest is the registry of velero.io DownloadRequests: validation and kubectl columns (strategy.go) and the REST storage (storage.go).
package downloadrequest

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerovalidation "github.com/backstop-io/backstop/pkg/apis/velero/validation"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// Strategy is the DownloadRequest strategy.
type Strategy struct{ resource.Strategy }

// NewStrategy returns the DownloadRequest strategy.
func NewStrategy(typer runtime.ObjectTyper) Strategy {
	return Strategy{resource.NewStrategy(typer, velerov1.SchemeGroupVersion.String())}
}

// Validate checks the metadata and the spec.
func (s Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	o := obj.(*velero.DownloadRequest)
	return append(s.Strategy.Validate(ctx, obj), validateSpec(o)...)
}

// ValidateUpdate checks the metadata update and the new spec.
func (s Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	o := obj.(*velero.DownloadRequest)
	return append(s.Strategy.ValidateUpdate(ctx, obj, old), validateSpec(o)...)
}

func validateSpec(o *velero.DownloadRequest) field.ErrorList {
	return velerovalidation.ValidateDownloadRequestSpec(&o.Spec, field.NewPath("spec"))
}

// Table renders downloadrequests for kubectl get.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Kind", Type: "string", Description: "What to download", Cell: func(o runtime.Object) any { return string(o.(*velero.DownloadRequest).Spec.Target.Kind) }},
	resource.Column{Name: "Target", Type: "string", Description: "Backup or restore name", Cell: func(o runtime.Object) any { return string(o.(*velero.DownloadRequest).Spec.Target.Name) }},
	resource.Column{Name: "Phase", Type: "string", Description: "Phase of the request", Cell: func(o runtime.Object) any { return string(o.(*velero.DownloadRequest).Status.Phase) }},
	resource.AgeColumn,
)
