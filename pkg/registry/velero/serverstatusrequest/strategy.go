// Package serverstatusrequest is the registry of velero.io ServerStatusRequests: kubectl columns (strategy.go) and the REST storage (storage.go); the server answers requests.
package serverstatusrequest

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// Strategy is the ServerStatusRequest strategy.
type Strategy struct{ resource.Strategy }

// NewStrategy returns the ServerStatusRequest strategy.
func NewStrategy(typer runtime.ObjectTyper) Strategy {
	return Strategy{resource.NewStrategy(typer, velerov1.SchemeGroupVersion.String())}
}

// Validate checks the metadata and the spec.
func (s Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	o := obj.(*velero.ServerStatusRequest)
	return append(s.Strategy.Validate(ctx, obj), validateSpec(o)...)
}

// ValidateUpdate checks the metadata update and the new spec.
func (s Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	o := obj.(*velero.ServerStatusRequest)
	return append(s.Strategy.ValidateUpdate(ctx, obj, old), validateSpec(o)...)
}

func validateSpec(o *velero.ServerStatusRequest) field.ErrorList {
	return nil
}

// Table renders serverstatusrequests for kubectl get.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Phase", Type: "string", Description: "Phase of the request", Cell: func(o runtime.Object) any { return string(o.(*velero.ServerStatusRequest).Status.Phase) }},
	resource.Column{Name: "Server Version", Type: "string", Description: "Version of the server", Cell: func(o runtime.Object) any { return string(o.(*velero.ServerStatusRequest).Status.ServerVersion) }},
	resource.AgeColumn,
)
