package nonadminrestore

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
)

// PreviewREST is nonadminrestores/<name>/preview: the NonAdminRestore
// with its preview whole, each item's object (the target's answer to the
// dry run) shown only to a reader who may get that object. The stored
// status carries no objects (every reader of the NonAdminRestore, a user
// bound to view, reads it; a Secret's or a Role's body is not every such
// reader's to read).
type PreviewREST struct {
	nars     rest.Getter
	restores Restores
	authz    authorizer.Authorizer
	newFunc  func() runtime.Object
}

var (
	_ rest.Getter  = (*PreviewREST)(nil)
	_ rest.Storage = (*PreviewREST)(nil)
)

// NewPreviewREST returns the preview subresource of nars, deciding with
// authz which objects a reader may see.
func NewPreviewREST(nars rest.Getter, restores Restores, authz authorizer.Authorizer) *PreviewREST {
	return &PreviewREST{nars: nars, restores: restores, authz: authz, newFunc: func() runtime.Object { return &oadp.NonAdminRestore{} }}
}

func (p *PreviewREST) New() runtime.Object { return p.newFunc() }

func (p *PreviewREST) Destroy() {}

// Get returns the NonAdminRestore name with its Restore's preview, the
// objects of the items the reader may get.
func (p *PreviewREST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	obj, err := p.nars.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	nar := obj.(*oadp.NonAdminRestore).DeepCopy()
	r, err := restoreOf(ctx, p.nars, p.restores, name)
	if err != nil {
		return nil, err
	}
	if r.Status.Preview == nil || nar.Status.VeleroRestore == nil || nar.Status.VeleroRestore.Status == nil {
		return nil, apierrors.NewConflict(oadp.Resource("nonadminrestores"), name, fmt.Errorf("the NonAdminRestore has no preview (restoreSpec.preview, once its restore ran)"))
	}
	user, ok := genericrequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewUnauthorized("no user")
	}
	preview := r.Status.Preview.DeepCopy()
	may := map[string]bool{}
	for i := range preview.Items {
		it := &preview.Items[i]
		if it.Object == nil {
			continue
		}
		key := it.Resource + "/" + it.Namespace
		allowed, seen := may[key]
		if !seen {
			gr := schema.ParseGroupResource(it.Resource)
			decision, _, err := p.authz.Authorize(ctx, authorizer.AttributesRecord{User: user, Verb: "get", APIGroup: gr.Group, Resource: gr.Resource,
				Namespace: it.Namespace, ResourceRequest: true})
			allowed = err == nil && decision == authorizer.DecisionAllow
			may[key] = allowed
		}
		if !allowed {
			it.Object = nil
		}
	}
	nar.Status.VeleroRestore.Status.Preview = preview
	return nar, nil
}
