package restore

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/resourcemodifiers"
)

// modifiersOf reads the resource modifiers the restore names (Velero's
// spec.resourceModifier: a ConfigMap of the restore's namespace in the
// target cluster). A problem is why the restore cannot run
// (FailedValidation, in Velero's words); an error is the API's, to try
// again.
func (c *Controller) modifiersOf(ctx context.Context, r *velerov1.Restore) (mods *resourcemodifiers.Modifiers, problem string, err error) {
	ref := r.Spec.ResourceModifier
	if ref == nil {
		return nil, "", nil
	}
	if !strings.EqualFold(ref.Kind, resourcemodifiers.ConfigMapKind) {
		return nil, fmt.Sprintf("resourceModifier: kind %q is not supported: only a ConfigMap", ref.Kind), nil
	}
	if c.cfg.Target.Dynamic == nil {
		return nil, fmt.Sprintf("failed to get resource modifiers configmap %s/%s: no cluster to read it from", r.Namespace, ref.Name), nil
	}
	u, err := c.cfg.Target.Dynamic.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace(r.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Sprintf("failed to get resource modifiers configmap %s/%s: not found", r.Namespace, ref.Name), nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading resource modifiers configmap %s/%s: %w", r.Namespace, ref.Name, err)
	}
	var cm corev1.ConfigMap
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cm); err != nil {
		return nil, fmt.Sprintf("Error in parsing resource modifiers provided in configmap %s/%s: %v", r.Namespace, ref.Name, err), nil
	}
	mods, err = resourcemodifiers.Parse(&cm)
	if err != nil {
		return nil, fmt.Sprintf("Validation error in resource modifiers provided in configmap %s/%s: %v", r.Namespace, ref.Name, err), nil
	}
	return mods, "", nil
}
