package nonadminbackup

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
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

// Backups is what NonAdminBackups reach of the admin namespace's Velero
// Backups, in process: never shown to the tenant, always the one the
// NonAdminBackup's status (written by the server alone) names.
type Backups struct {
	// Namespace is the admin namespace.
	Namespace string
	// Store is the Backups' store.
	Store *genericregistry.Store
	// Position is the queue position of a backup by name.
	Position func(name string) int
	// Locations opens their storage locations.
	Locations objectstore.Locations
	// Live holds the logs of the backups running on this server.
	Live *livelog.Registry
	// TenantLocations reads NonAdminBackupStorageLocations.
	TenantLocations rest.Getter
}

// Storage is the REST storage of NonAdminBackups and their subresources.
type Storage struct {
	NonAdminBackup *resource.DecoratedREST
	Status         *resource.StatusREST
	Cancel         *CancelREST
	Logs           *resource.LogsREST
}

// NewREST returns the storage of NonAdminBackups, their status, cancel
// and logs.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, backups Backups, policy tenantlimits.PolicyFunc) (*Storage, error) {
	strategy := NewStrategy(scheme, policy, backups.TenantLocations)
	fill := queueFill(backups.Position)
	main, status, err := resource.NewStore(optsGetter, resource.Definition{
		Resource:       oadp.Resource("nonadminbackups"),
		Singular:       oadp.Resource("nonadminbackup"),
		NewFunc:        func() runtime.Object { return &oadp.NonAdminBackup{} },
		NewListFunc:    func() runtime.Object { return &oadp.NonAdminBackupList{} },
		Strategy:       strategy,
		StatusStrategy: NewStatusStrategy(strategy.Strategy),
		Decorate:       fill,
		Filled:         queueFilled,
		Table:          Table,
		ShortNames:     []string{"nab"},
		Categories:     []string{"oadp"},
	})
	if err != nil {
		return nil, err
	}
	strategy.total.Lister = main
	decorated := &resource.DecoratedREST{REST: main, Fill: fill}
	return &Storage{
		NonAdminBackup: decorated,
		Status:         status,
		Cancel:         &CancelREST{nabs: decorated, backups: backups},
		Logs: resource.NewLogsREST(oadp.Resource("nonadminbackups"), main.New, func(ctx context.Context, _, name string) (resource.LogFile, error) {
			b, err := backupOf(ctx, main, backups, name)
			if err != nil {
				return resource.LogFile{}, err
			}
			return resource.LogFile{Namespace: backups.Namespace, Location: b.Spec.StorageLocation, Kind: velerov1.DownloadTargetKindBackupLog, Name: b.Name}, nil
		}, backups.Locations, backups.Live),
	}, nil
}

// queueFill sets status.queueInfo of a NonAdminBackup or of the items of
// a list from its Backup's place in the queue (0 once it runs or ends).
// queueFilled reports a served NonAdminBackup whose queue position
// queueFill filled in (stored as 0, in queueInfo and in its Backup's
// status alike).
func queueFilled(obj runtime.Object) bool {
	nab, ok := obj.(*oadpv1alpha1.NonAdminBackup)
	return ok && nab.Status.QueueInfo != nil && nab.Status.QueueInfo.EstimatedQueuePosition != 0
}

func queueFill(position func(string) int) func(runtime.Object) {
	set := func(nab *oadp.NonAdminBackup) {
		vb := nab.Status.VeleroBackup
		if vb == nil || vb.Name == "" || nab.Status.QueueInfo == nil {
			return
		}
		// What the status points to is shared with the storage's cache
		// (its lists are shallow copies): filled in on copies.
		p := position(vb.Name)
		nab.Status.QueueInfo = &oadp.QueueInfo{EstimatedQueuePosition: p}
		if vb.Status != nil {
			vb, st := *vb, *vb.Status
			st.QueuePosition = p
			vb.Status = &st
			nab.Status.VeleroBackup = &vb
		}
	}
	return func(obj runtime.Object) {
		switch o := obj.(type) {
		case *oadp.NonAdminBackup:
			set(o)
		case *oadp.NonAdminBackupList:
			for i := range o.Items {
				set(&o.Items[i])
			}
		}
	}
}

// backupOf returns the Backup the NonAdminBackup name of the request's
// namespace was made for: named by its status, carrying its NACUUID.
func backupOf(ctx context.Context, nabs rest.Getter, backups Backups, name string) (*velero.Backup, error) {
	obj, err := nabs.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	nab := obj.(*oadp.NonAdminBackup)
	vb := nab.Status.VeleroBackup
	noBackup := apierrors.NewConflict(oadp.Resource("nonadminbackups"), name, fmt.Errorf("the NonAdminBackup has no Velero backup (phase %q)", nab.Status.Phase))
	if vb == nil || vb.Name == "" || vb.NACUUID == "" {
		return nil, noBackup
	}
	bObj, err := backups.Store.Get(genericrequest.WithNamespace(ctx, backups.Namespace), vb.Name, &metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, noBackup
	}
	if err != nil {
		return nil, err
	}
	b := bObj.(*velero.Backup)
	if !oadpv1alpha1.MadeFor(b.Labels, b.Annotations, oadpv1alpha1.NabOriginNACUUIDLabel, oadpv1alpha1.NabOriginNamespaceAnnotation, vb.NACUUID, nab.Namespace) {
		return nil, noBackup
	}
	return b, nil
}

// CancelREST is nonadminbackups/<name>/cancel: POST asks the
// NonAdminBackup's Velero Backup to cancel, as backups/<name>/cancel does
// (409 when it has finished), and answers with the NonAdminBackup.
type CancelREST struct {
	resource.PostSubresource
	nabs    *resource.DecoratedREST
	backups Backups
}

var _ rest.Connecter = &CancelREST{}

// New returns an empty NonAdminBackup.
func (r *CancelREST) New() runtime.Object { return &oadp.NonAdminBackup{} }

// Connect cancels the Backup through its store (its update rules apply).
func (r *CancelREST) Connect(ctx context.Context, name string, _ runtime.Object, responder rest.Responder) (http.Handler, error) {
	return http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		b, err := backupOf(ctx, r.nabs, r.backups, name)
		if err != nil {
			responder.Error(err)
			return
		}
		_, _, err = r.backups.Store.Update(genericrequest.WithNamespace(ctx, r.backups.Namespace), b.Name,
			rest.DefaultUpdatedObjectInfo(nil, func(_ context.Context, _, old runtime.Object) (runtime.Object, error) {
				cur := old.(*velero.Backup)
				if cur.UID != b.UID {
					return nil, apierrors.NewConflict(oadp.Resource("nonadminbackups"), name, fmt.Errorf("its backup changed"))
				}
				cur = cur.DeepCopy()
				cur.Spec.Cancel = true
				return cur, nil
			}), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
		if err != nil {
			responder.Error(asNonAdminError(name, err))
			return
		}
		obj, err := r.nabs.Get(ctx, name, &metav1.GetOptions{})
		if err != nil {
			responder.Error(err)
			return
		}
		responder.Object(http.StatusOK, obj)
	}), nil
}

// asNonAdminError reports an error of the Backup as the NonAdminBackup's,
// with its message.
func asNonAdminError(name string, err error) error {
	var st apierrors.APIStatus
	if !apierrors.IsConflict(err) || !errors.As(err, &st) {
		return err
	}
	// "Operation cannot be fulfilled on backups.velero.io "x": why"
	msg := st.Status().Message
	if _, why, ok := strings.Cut(msg, "\": "); ok {
		msg = why
	}
	return apierrors.NewConflict(oadp.Resource("nonadminbackups"), name, errors.New(msg))
}
