package nonadminrestore

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/livelog"
	"github.com/backstop-io/backstop/pkg/objectstore"
	"github.com/backstop-io/backstop/pkg/registry/resource"
	"github.com/backstop-io/backstop/pkg/registry/tenantlimits"
)

// Restores is what NonAdminRestores reach of the admin namespace's
// Velero Restores and Backups, in process: never shown to the tenant.
type Restores struct {
	Namespace         string
	Restores, Backups rest.Getter
	// Position is the place of a restore in the restore queue, by name.
	Position  func(name string) int
	Locations objectstore.Locations
	// Live holds the logs of the restores running on this server.
	Live *livelog.Registry
}

// Storage is the REST storage of NonAdminRestores and their subresources.
type Storage struct {
	NonAdminRestore *resource.DecoratedREST
	Status          *resource.StatusREST
	Logs            *resource.LogsREST
}

// NewREST returns the storage of NonAdminRestores, their status and logs;
// nabs reads the NonAdminBackups they name.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, nabs rest.Getter, restores Restores, policy tenantlimits.PolicyFunc) (*Storage, error) {
	strategy := NewStrategy(scheme, nabs, policy)
	fill := queueFill(restores.Position)
	main, status, err := resource.NewStore(optsGetter, resource.Definition{
		Resource:       oadp.Resource("nonadminrestores"),
		Singular:       oadp.Resource("nonadminrestore"),
		NewFunc:        func() runtime.Object { return &oadp.NonAdminRestore{} },
		NewListFunc:    func() runtime.Object { return &oadp.NonAdminRestoreList{} },
		Strategy:       strategy,
		StatusStrategy: NewStatusStrategy(strategy.Strategy),
		Decorate:       fill,
		Filled:         queueFilled,
		Table:          Table,
		ShortNames:     []string{"nar"},
		Categories:     []string{"oadp"},
	})
	if err != nil {
		return nil, err
	}
	strategy.total.Lister = main
	logs := resource.NewLogsREST(oadp.Resource("nonadminrestores"), main.New, func(ctx context.Context, _, name string) (resource.LogFile, error) {
		r, err := restoreOf(ctx, main, restores, name)
		if err != nil {
			return resource.LogFile{}, err
		}
		location := ""
		admin := genericrequest.WithNamespace(ctx, restores.Namespace)
		if b, err := restores.Backups.Get(admin, r.Spec.BackupName, &metav1.GetOptions{}); err == nil {
			location = b.(*velero.Backup).Spec.StorageLocation
		}
		return resource.LogFile{Namespace: restores.Namespace, Location: location, Kind: velerov1.DownloadTargetKindRestoreLog, Name: r.Name}, nil
	}, restores.Locations, restores.Live)
	return &Storage{NonAdminRestore: &resource.DecoratedREST{REST: main, Fill: fill}, Status: status, Logs: logs}, nil
}

// queueFill sets status.queueInfo of a NonAdminRestore or of the items of
// a list from its Restore's place in the restore queue (0 once it runs or
// ends).
// queueFilled reports a served NonAdminRestore whose queue position
// queueFill filled in (stored as 0).
func queueFilled(obj runtime.Object) bool {
	nar, ok := obj.(*oadpv1alpha1.NonAdminRestore)
	return ok && nar.Status.QueueInfo != nil && nar.Status.QueueInfo.EstimatedQueuePosition != 0
}

func queueFill(position func(string) int) func(runtime.Object) {
	set := func(nar *oadp.NonAdminRestore) {
		vr := nar.Status.VeleroRestore
		if position == nil || vr == nil || vr.Name == "" || nar.Status.QueueInfo == nil {
			return
		}
		// What the status points to is shared with the storage's cache
		// (its lists are shallow copies): filled in on a copy.
		nar.Status.QueueInfo = &oadp.QueueInfo{EstimatedQueuePosition: position(vr.Name)}
	}
	return func(obj runtime.Object) {
		switch o := obj.(type) {
		case *oadp.NonAdminRestore:
			set(o)
		case *oadp.NonAdminRestoreList:
			for i := range o.Items {
				set(&o.Items[i])
			}
		}
	}
}

// restoreOf returns the Restore the NonAdminRestore name of the request's
// namespace was made for: named by its status, carrying its NACUUID.
func restoreOf(ctx context.Context, nars rest.Getter, restores Restores, name string) (*velero.Restore, error) {
	obj, err := nars.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	nar := obj.(*oadp.NonAdminRestore)
	vr := nar.Status.VeleroRestore
	noRestore := apierrors.NewConflict(oadp.Resource("nonadminrestores"), name, fmt.Errorf("the NonAdminRestore has no Velero restore (phase %q)", nar.Status.Phase))
	if vr == nil || vr.Name == "" || vr.NACUUID == "" {
		return nil, noRestore
	}
	rObj, err := restores.Restores.Get(genericrequest.WithNamespace(ctx, restores.Namespace), vr.Name, &metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, noRestore
	}
	if err != nil {
		return nil, err
	}
	r := rObj.(*velero.Restore)
	if !oadpv1alpha1.MadeFor(r.Labels, r.Annotations, oadpv1alpha1.NarOriginNACUUIDLabel, oadpv1alpha1.NarOriginNamespaceAnnotation, vr.NACUUID, nar.Namespace) {
		return nil, noRestore
	}
	return r, nil
}
