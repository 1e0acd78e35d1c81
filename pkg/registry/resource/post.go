package resource

import (
	"context"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
)

// PostSubresource is what every POST-only action subresource (cancel,
// pause, trigger, ...) has in common: POST only, no options, nothing of
// its own to destroy. Embed it and add New and Connect.
type PostSubresource struct{}

// Destroy does nothing: the main store owns the storage.
func (PostSubresource) Destroy() {}

// ConnectMethods: POST only.
func (PostSubresource) ConnectMethods() []string { return []string{http.MethodPost} }

// NewConnectOptions: the request takes no options.
func (PostSubresource) NewConnectOptions() (runtime.Object, bool, string) { return nil, false, "" }

// UpdateAndRespond changes an object through its store (so the update
// rules apply) with mutate, which gets a copy it may change or an error to
// refuse, and answers with the object or the error.
func UpdateAndRespond(ctx context.Context, store *genericregistry.Store, name string, responder rest.Responder, mutate func(obj runtime.Object) error) {
	obj, _, err := store.Update(ctx, name, rest.DefaultUpdatedObjectInfo(nil, func(_ context.Context, _, old runtime.Object) (runtime.Object, error) {
		obj := old.DeepCopyObject()
		if err := mutate(obj); err != nil {
			return nil, err
		}
		return obj, nil
	}), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	if err != nil {
		responder.Error(err)
		return
	}
	responder.Object(http.StatusOK, obj)
}
