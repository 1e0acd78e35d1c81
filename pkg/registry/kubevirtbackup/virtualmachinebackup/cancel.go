package virtualmachinebackup

import (
	"context"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/backstop-io/backstop/pkg/apis/kubevirtbackup"
	"github.com/backstop-io/backstop/pkg/registry/resource"
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
			if _, done := b.Annotations[CancelAnnotation]; done {
				return nil
			}
			if Finished(b) {
				return apierrors.NewConflict(kubevirtbackup.Resource("virtualmachinebackups"), name,
					fmt.Errorf("the backup has ended: it cannot be cancelled"))
			}
			if b.Annotations == nil {
				b.Annotations = map[string]string{}
			}
			b.Annotations[CancelAnnotation] = time.Now().UTC().Format(time.RFC3339)
			return nil
		})
	}), nil
}
