package virtualmachinebackup

import (
	"context"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/backstop-io/backstop/pkg/apis/kubevirtbackup"
)

// CancelAnnotation records that cancellation of a VirtualMachineBackup
// was requested (its value is when); the VM backup engine aborts the
// backup. Its spec is immutable, its metadata is not.
const CancelAnnotation = "backstop.io/cancel-requested"

// Finished reports whether a backup has ended (Complete or Failed).
func Finished(b *kubevirtbackup.VirtualMachineBackup) bool {
	if b.Status == nil {
		return false
	}
	return meta.IsStatusConditionTrue(b.Status.Conditions, string(kubevirtbackup.ConditionComplete)) ||
		meta.IsStatusConditionTrue(b.Status.Conditions, string(kubevirtbackup.ConditionFailed))
}

// CancelREST is virtualmachinebackups/<name>/cancel: POST asks the engine
// to abort the backup (idempotent) and answers with it; 409 Conflict once
// the backup has ended.
type CancelREST struct {
	store *genericregistry.Store
}

var _ rest.Connecter = &CancelREST{}

// New returns an empty VirtualMachineBackup.
func (r *CancelREST) New() runtime.Object { return &kubevirtbackup.VirtualMachineBackup{} }

// Destroy does nothing: the main store owns the storage.
func (r *CancelREST) Destroy() {}

// ConnectMethods: POST only.
func (r *CancelREST) ConnectMethods() []string { return []string{http.MethodPost} }

// NewConnectOptions: no options.
func (r *CancelREST) NewConnectOptions() (runtime.Object, bool, string) { return nil, false, "" }

// Connect records the request.
func (r *CancelREST) Connect(ctx context.Context, name string, _ runtime.Object, responder rest.Responder) (http.Handler, error) {
	return http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		obj, _, err := r.store.Update(ctx, name, rest.DefaultUpdatedObjectInfo(nil, func(_ context.Context, _, old runtime.Object) (runtime.Object, error) {
			b := old.(*kubevirtbackup.VirtualMachineBackup).DeepCopy()
			if _, done := b.Annotations[CancelAnnotation]; done {
				return b, nil
			}
			if Finished(b) {
				return nil, apierrors.NewConflict(kubevirtbackup.Resource("virtualmachinebackups"), name,
					fmt.Errorf("the backup has ended: it cannot be cancelled"))
			}
			if b.Annotations == nil {
				b.Annotations = map[string]string{}
			}
			b.Annotations[CancelAnnotation] = time.Now().UTC().Format(time.RFC3339)
			return b, nil
		}), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
		if err != nil {
			responder.Error(err)
			return
		}
		responder.Object(http.StatusOK, obj)
	}), nil
}
