package restore

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/resourcemodifiers"
)

// modifiersOf reads the resource modifiers the restore names (Velero's
// spec.resourceModifier: a ConfigMap of the restore's namespace in the
// target cluster; for a tenant's NonAdminRestore, of the tenant's
// namespace, read with the tenant's rights). A problem is why the
// restore cannot run (FailedValidation, in Velero's words); an error is
// the API's, to try again.
func (c *Controller) modifiersOf(ctx context.Context, r *velerov1.Restore) (mods *resourcemodifiers.Modifiers, problem string, err error) {
	ref := r.Spec.ResourceModifier
	if ref == nil {
		return nil, "", nil
	}
	if !strings.EqualFold(ref.Kind, resourcemodifiers.ConfigMapKind) {
		return nil, fmt.Sprintf("resourceModifier: kind %q is not supported: only a ConfigMap", ref.Kind), nil
	}
	namespace, reader, problem := c.modifiersReader(r)
	if problem != "" {
		return nil, problem, nil
	}
	u, err := reader.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Sprintf("failed to get resource modifiers configmap %s/%s: not found", namespace, ref.Name), nil
	case apierrors.IsForbidden(err):
		return nil, fmt.Sprintf("failed to get resource modifiers configmap %s/%s: %v", namespace, ref.Name, err), nil
	case err != nil:
		return nil, "", fmt.Errorf("reading resource modifiers configmap %s/%s: %w", namespace, ref.Name, err)
	}
	var cm corev1.ConfigMap
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cm); err != nil {
		return nil, fmt.Sprintf("Error in parsing resource modifiers provided in configmap %s/%s: %v", namespace, ref.Name, err), nil
	}
	mods, err = resourcemodifiers.Parse(&cm)
	if err != nil {
		return nil, fmt.Sprintf("Validation error in resource modifiers provided in configmap %s/%s: %v", namespace, ref.Name, err), nil
	}
	return mods, "", nil
}

// modifiersReader is where a restore's resource modifiers are and the
// client that reads them: the restore's namespace with the server's
// rights; for a restore made for a user (a tenant's NonAdminRestore), the
// NonAdminRestore's namespace with that user's rights, so that a tenant
// names only a ConfigMap it could read itself.
func (c *Controller) modifiersReader(r *velerov1.Restore) (namespace string, reader dynamic.Interface, problem string) {
	target, user, err := c.targetOf(r)
	if err != nil {
		// Who the restore acts as is wrong for good: its run would fail.
		return "", nil, fmt.Sprintf("resourceModifier: %v", err)
	}
	namespace = r.Namespace
	if user != "" {
		namespace = r.Annotations[oadpv1alpha1.NarOriginNamespaceAnnotation]
		if namespace == "" {
			return "", nil, fmt.Sprintf("resourceModifier: the restore acts as user %q for no NonAdminRestore (annotation %s): no namespace to read the ConfigMap in", user, oadpv1alpha1.NarOriginNamespaceAnnotation)
		}
	}
	if target == nil {
		return "", nil, fmt.Sprintf("failed to get resource modifiers configmap %s/%s: no cluster to read it from", namespace, r.Spec.ResourceModifier.Name)
	}
	return namespace, target, ""
}
