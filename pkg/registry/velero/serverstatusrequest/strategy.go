// Package serverstatusrequest is the registry of velero.io ServerStatusRequests: kubectl columns (strategy.go) and the REST storage (storage.go); the server answers requests.
package serverstatusrequest

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewStrategy returns the ServerStatusRequest strategy: the shared rules only.
func NewStrategy(typer runtime.ObjectTyper) resource.Strategy {
	return resource.NewStrategy(typer, velerov1.SchemeGroupVersion.String())
}

// Table renders serverstatusrequests for kubectl get.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Phase", Type: "string", Description: "Phase of the request", Cell: func(o runtime.Object) any { return string(o.(*velero.ServerStatusRequest).Status.Phase) }},
	resource.Column{Name: "Server Version", Type: "string", Description: "Version of the server", Cell: func(o runtime.Object) any { return string(o.(*velero.ServerStatusRequest).Status.ServerVersion) }},
	resource.AgeColumn,
)
