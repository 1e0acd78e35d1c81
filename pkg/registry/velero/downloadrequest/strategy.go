// Package downloadrequest is the registry of velero.io DownloadRequests: validation and kubectl columns (strategy.go) and the REST storage (storage.go).
package downloadrequest

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerovalidation "github.com/backstop-io/backstop/pkg/apis/velero/validation"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewStrategy returns the DownloadRequest strategy.
func NewStrategy(typer runtime.ObjectTyper) resource.Strategy {
	s := resource.NewStrategy(typer, velerov1.SchemeGroupVersion.String())
	s.ValidateObject = validate
	return s
}

func validate(obj runtime.Object) field.ErrorList {
	return velerovalidation.ValidateDownloadRequestSpec(&obj.(*velero.DownloadRequest).Spec, field.NewPath("spec"))
}

// Table renders downloadrequests for kubectl get.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Kind", Type: "string", Description: "What to download", Cell: func(o runtime.Object) any { return string(o.(*velero.DownloadRequest).Spec.Target.Kind) }},
	resource.Column{Name: "Target", Type: "string", Description: "Backup or restore name", Cell: func(o runtime.Object) any { return string(o.(*velero.DownloadRequest).Spec.Target.Name) }},
	resource.Column{Name: "Phase", Type: "string", Description: "Phase of the request", Cell: func(o runtime.Object) any { return string(o.(*velero.DownloadRequest).Status.Phase) }},
	resource.AgeColumn,
)
