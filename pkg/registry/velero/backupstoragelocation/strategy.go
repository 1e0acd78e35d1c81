// Package backupstoragelocation is the registry of velero.io BackupStorageLocations: validation and kubectl columns (strategy.go) and the REST storage (storage.go).
package backupstoragelocation

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerovalidation "github.com/backstop-io/backstop/pkg/apis/velero/validation"
	"github.com/backstop-io/backstop/pkg/encryption"
	"github.com/backstop-io/backstop/pkg/objectstore"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// Strategy is the BackupStorageLocation strategy.
type Strategy struct {
	resource.Strategy
	servingCA []byte
}

// NewStrategy returns the BackupStorageLocation strategy. servingCA is the
// PEM of the CA that signs this server's certificate.
func NewStrategy(typer runtime.ObjectTyper, servingCA []byte) Strategy {
	base := resource.NewStrategy(typer, velerov1.SchemeGroupVersion.String())
	base.ValidateObject = validate
	return Strategy{Strategy: base, servingCA: servingCA}
}

// PrepareForCreate clears the status. The files of a filesystem location
// are served by this server itself (download links), so such a location
// gets the CA of the links (this server's standalone, kube-apiserver's
// aggregated) as its caCert, which the velero CLI trusts for downloads; a
// caCert or caCertRef the user set is kept.
func (s Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	s.Strategy.PrepareForCreate(ctx, obj)
	l := obj.(*velero.BackupStorageLocation)
	if os := l.Spec.ObjectStorage; os != nil && len(s.servingCA) > 0 && objectstore.IsServedByBackstop(l.Spec.Provider) &&
		len(os.CACert) == 0 && os.CACertRef == nil {
		os.CACert = append([]byte(nil), s.servingCA...)
	}
}

func validate(obj runtime.Object) field.ErrorList {
	l := obj.(*velero.BackupStorageLocation)
	errs := velerovalidation.ValidateBackupStorageLocationSpec(&l.Spec, field.NewPath("spec"))
	return append(errs, encryption.ValidateConfig(l.Spec.Config, false, field.NewPath("spec", "config"))...)
}

// Table renders backupstoragelocations for kubectl get.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Phase", Type: "string", Description: "Available or Unavailable", Cell: func(o runtime.Object) any { return string(o.(*velero.BackupStorageLocation).Status.Phase) }},
	resource.Column{Name: "Last Validated", Type: "string", Description: "Time since the location was last validated", Cell: func(o runtime.Object) any {
		return resource.SinceP(o.(*velero.BackupStorageLocation).Status.LastValidationTime)
	}},
	resource.AgeColumn,
	resource.Column{Name: "Default", Type: "boolean", Description: "Default backup storage location", Cell: func(o runtime.Object) any { return o.(*velero.BackupStorageLocation).Spec.Default }},
	resource.Column{Name: "Provider", Type: "string", Priority: 1, Description: "Object storage provider", Cell: func(o runtime.Object) any { return string(o.(*velero.BackupStorageLocation).Spec.Provider) }},
)
