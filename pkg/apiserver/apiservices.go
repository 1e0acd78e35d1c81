package apiserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	consolev1 "github.com/backstop-io/backstop/pkg/apis/console/v1"
	kubevirtbackupv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
)

// apiServicesResource is kube-aggregator's APIService.
var apiServicesResource = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// APIServiceNames are the APIServices that register the server's groups
// with kube-apiserver (artifacts/deploy/50-apiservice.yaml): <version>.<group>.
func APIServiceNames() []string {
	var names []string
	for _, gv := range []schema.GroupVersion{velerov1.SchemeGroupVersion, velerov2alpha1.SchemeGroupVersion, oadpv1alpha1.SchemeGroupVersion, kubevirtbackupv1alpha1.SchemeGroupVersion, consolev1.SchemeGroupVersion} {
		names = append(names, gv.Version+"."+gv.Group)
	}
	return names
}

// CABundleHookName is the post-start hook that publishes the serving CA.
const CABundleHookName = "backstop-apiservice-cabundle"

// ServingCAConfigMap is the ConfigMap of the admin namespace the server
// publishes its serving CA in (key ServingCAKey), for the clients that
// reach it through its Service rather than through kube-apiserver: a
// Prometheus scraping /metrics (the chart's ServiceMonitor verifies the
// server with it), as kube publishes its own in kube-root-ca.crt.
const (
	ServingCAConfigMap = "backstop-serving-ca"
	ServingCAKey       = "ca.crt"
)

// configMapsResource is core's ConfigMap.
var configMapsResource = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// caBundleRecheck is how often the APIServices are looked at again after
// they carry the CA (someone may have replaced them).
const caBundleRecheck = 5 * time.Minute

// publishCABundle returns the post-start hook of aggregated mode that puts
// the CA of the server's serving certificate into caBundle of its
// APIServices (and turns insecureSkipTLSVerify off), so that kube-apiserver
// verifies the server it proxies to: the shipped manifests carry neither;
// and into the ConfigMap ServingCAConfigMap of the admin namespace.
// The server's ClusterRole allows patching these APIServices and no others,
// its Role in the namespace that ConfigMap and no other.
// It retries until it succeeds, then looks again every few minutes; it does
// not hold readiness, since kube-apiserver cannot reach the server before
// the CA is there.
func publishCABundle(client dynamic.Interface, ca []byte, namespace string) genericapiserver.PostStartHookFunc {
	return func(hook genericapiserver.PostStartHookContext) error {
		go func() {
			backoff := wait.Backoff{Duration: time.Second, Factor: 2, Steps: 6, Cap: 30 * time.Second}
			for {
				err := errors.Join(ensureCABundle(hook.Context, client, ca), ensureCAConfigMap(hook.Context, client, ca, namespace))
				delay := caBundleRecheck
				if err != nil {
					klog.ErrorS(err, "Publishing the serving CA: kube-apiserver cannot verify this server until it is in the APIServices (allow patch on them, or set spec.caBundle yourself)", "configMap", klog.KRef(namespace, ServingCAConfigMap))
					delay = backoff.Step()
				}
				select {
				case <-hook.Context.Done():
					return
				case <-time.After(delay):
				}
			}
		}()
		return nil
	}
}

// ensureCABundle patches every APIService of the server whose caBundle is
// not ca or which skips TLS verification.
func ensureCABundle(ctx context.Context, client dynamic.Interface, ca []byte) error {
	encoded := base64.StdEncoding.EncodeToString(ca)
	patch := fmt.Appendf(nil, `{"spec":{"caBundle":%q,"insecureSkipTLSVerify":false}}`, encoded)
	var errs []error
	for _, name := range APIServiceNames() {
		svc, err := client.Resource(apiServicesResource).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue // not registered (yet): nothing to trust
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reading APIService %s: %w", name, err))
			continue
		}
		spec, _ := svc.Object["spec"].(map[string]any)
		current, _ := spec["caBundle"].(string)
		decoded, _ := base64.StdEncoding.DecodeString(current)
		if skip, _ := spec["insecureSkipTLSVerify"].(bool); bytes.Equal(decoded, ca) && !skip {
			continue
		}
		if _, err := client.Resource(apiServicesResource).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "backstop-apiserver"}); err != nil {
			errs = append(errs, fmt.Errorf("patching APIService %s: %w", name, err))
			continue
		}
		klog.InfoS("Published the serving CA in an APIService", "apiService", name)
	}
	return errors.Join(errs...)
}

// ensureCAConfigMap makes the ConfigMap ServingCAConfigMap hold ca under
// ServingCAKey, creating it when it is missing.
func ensureCAConfigMap(ctx context.Context, client dynamic.Interface, ca []byte, namespace string) error {
	configMaps := client.Resource(configMapsResource).Namespace(namespace)
	current, err := configMaps.Get(ctx, ServingCAConfigMap, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": ServingCAConfigMap, "namespace": namespace},
			"data":     map[string]any{ServingCAKey: string(ca)}}}
		if _, err := configMaps.Create(ctx, cm, metav1.CreateOptions{FieldManager: "backstop-apiserver"}); err != nil {
			return fmt.Errorf("creating ConfigMap %s/%s: %w", namespace, ServingCAConfigMap, err)
		}
	case err != nil:
		return fmt.Errorf("reading ConfigMap %s/%s: %w", namespace, ServingCAConfigMap, err)
	default:
		if have, _, _ := unstructured.NestedString(current.Object, "data", ServingCAKey); have == string(ca) {
			return nil
		}
		patch, err := json.Marshal(map[string]any{"data": map[string]string{ServingCAKey: string(ca)}})
		if err != nil {
			return err
		}
		if _, err := configMaps.Patch(ctx, ServingCAConfigMap, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "backstop-apiserver"}); err != nil {
			return fmt.Errorf("patching ConfigMap %s/%s: %w", namespace, ServingCAConfigMap, err)
		}
	}
	klog.InfoS("Published the serving CA in a ConfigMap", "configMap", klog.KRef(namespace, ServingCAConfigMap))
	return nil
}
