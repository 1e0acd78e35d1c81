package backup

import (
	"context"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// refuseCancelOfFinished is the store's BeginUpdate: requesting
// cancellation (spec.cancel false → true, by update, patch, apply or the
// cancel subresource) of a finished backup is a 409 Conflict, and nothing
// changes.
func refuseCancelOfFinished(_ context.Context, obj, old runtime.Object, _ *metav1.UpdateOptions) (genericregistry.FinishFunc, error) {
	b, oldB := obj.(*velero.Backup), old.(*velero.Backup)
	if b.Spec.Cancel && !oldB.Spec.Cancel && velerov1.BackupPhase(oldB.Status.Phase).Terminal() {
		return nil, apierrors.NewConflict(velero.Resource("backups"), b.Name,
			fmt.Errorf("the backup is %s: a finished backup cannot be cancelled", oldB.Status.Phase))
	}
	return func(context.Context, bool) {}, nil
}

// CancelREST is backups/<name>/cancel: POST requests cancellation, like
// setting spec.cancel, and answers with the backup. It is idempotent.
type CancelREST struct {
	resource.PostSubresource
	store *genericregistry.Store
}

var _ rest.Connecter = &CancelREST{}

// New returns an empty backup.
func (r *CancelREST) New() runtime.Object { return &velero.Backup{} }

// Connect sets spec.cancel through the store (so the update rules, the
// 409 for finished backups among them, apply) and returns the backup.
func (r *CancelREST) Connect(ctx context.Context, name string, _ runtime.Object, responder rest.Responder) (http.Handler, error) {
	return http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		resource.UpdateAndRespond(ctx, r.store, name, responder, func(obj runtime.Object) error {
			obj.(*velero.Backup).Spec.Cancel = true
			return nil
		})
	}), nil
}

// logTarget: a backup's log is in its storage location.
func logTarget(backups rest.Getter) resource.LogTarget {
	return func(ctx context.Context, namespace, name string) (resource.LogFile, error) {
		obj, err := backups.Get(ctx, name, &metav1.GetOptions{})
		if err != nil {
			return resource.LogFile{}, err
		}
		return resource.LogFile{Namespace: namespace, Location: obj.(*velero.Backup).Spec.StorageLocation,
			Kind: velerov1.DownloadTargetKindBackupLog, Name: name}, nil
	}
}
