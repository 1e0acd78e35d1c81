package virtualmachinebackup

import (
	"context"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/backstop-io/backstop/pkg/apis/kubevirtbackup"
	kubevirtbackupv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// state is the backup's state (kubevirtbackupv1alpha1.StateOf).
func state(b *kubevirtbackup.VirtualMachineBackup) kubevirtbackupv1alpha1.BackupState {
	if b.Status == nil {
		return kubevirtbackupv1alpha1.BackupPending
	}
	return kubevirtbackupv1alpha1.StateOf(b.Status.Conditions)
}

// refuseCancelOfFinished is the store's BeginUpdate: requesting
// cancellation (adding kubevirtbackupv1alpha1.CancelAnnotation, by update,
// patch, apply or the cancel subresource) of a backup that has ended is a
// 409 Conflict, and nothing changes.
func refuseCancelOfFinished(_ context.Context, obj, old runtime.Object, _ *metav1.UpdateOptions) (genericregistry.FinishFunc, error) {
	b, oldB := obj.(*kubevirtbackup.VirtualMachineBackup), old.(*kubevirtbackup.VirtualMachineBackup)
	_, was := oldB.Annotations[kubevirtbackupv1alpha1.CancelAnnotation]
	_, is := b.Annotations[kubevirtbackupv1alpha1.CancelAnnotation]
	if is && !was && state(oldB).Terminal() {
		return nil, apierrors.NewConflict(kubevirtbackup.Resource("virtualmachinebackups"), b.Name,
			fmt.Errorf("the backup has ended (%s): it cannot be cancelled", state(oldB)))
	}
	return func(context.Context, bool) {}, nil
}

// validateCancel refuses removing or changing the cancel annotation: a
// cancelled backup cannot be un-cancelled.
func validateCancel(b, old *kubevirtbackup.VirtualMachineBackup) field.ErrorList {
	was, ok := old.Annotations[kubevirtbackupv1alpha1.CancelAnnotation]
	if !ok {
		return nil
	}
	if is, ok := b.Annotations[kubevirtbackupv1alpha1.CancelAnnotation]; !ok || is != was {
		return field.ErrorList{field.Forbidden(field.NewPath("metadata", "annotations").Key(kubevirtbackupv1alpha1.CancelAnnotation),
			"a cancelled backup cannot be un-cancelled")}
	}
	return nil
}

// CancelREST is virtualmachinebackups/<name>/cancel: POST asks the engine
// to abort the backup (idempotent) and answers with it; 409 Conflict once
// the backup has ended.
type CancelREST struct {
	resource.PostSubresource
	store *genericregistry.Store
}

var _ rest.Connecter = &CancelREST{}

// New returns an empty VirtualMachineBackup.
func (r *CancelREST) New() runtime.Object { return &kubevirtbackup.VirtualMachineBackup{} }

// Connect records the request.
func (r *CancelREST) Connect(ctx context.Context, name string, _ runtime.Object, responder rest.Responder) (http.Handler, error) {
	return http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		resource.UpdateAndRespond(ctx, r.store, name, responder, func(obj runtime.Object) error {
			b := obj.(*kubevirtbackup.VirtualMachineBackup)
			if _, done := b.Annotations[kubevirtbackupv1alpha1.CancelAnnotation]; done {
				return nil
			}
			if b.Annotations == nil {
				b.Annotations = map[string]string{}
			}
			// A backup that has ended is refused by refuseCancelOfFinished.
			b.Annotations[kubevirtbackupv1alpha1.CancelAnnotation] = time.Now().UTC().Format(time.RFC3339)
			return nil
		})
	}), nil
}
