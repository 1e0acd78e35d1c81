package apiserver

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestEnsureCAConfigMap: the serving CA's ConfigMap is made when missing,
// patched when it holds another CA (what else it holds is kept), and left
// alone when it holds this one.
func TestEnsureCAConfigMap(t *testing.T) {
	const ns, ca = "backstop-system", "-----BEGIN CERTIFICATE-----\nnew\n-----END CERTIFICATE-----\n"
	configMap := func(data map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": ServingCAConfigMap, "namespace": ns}, "data": data}}
	}
	tests := []struct {
		name     string
		existing []runtime.Object
		verbs    []string
		want     map[string]any
	}{
		{name: "missing", verbs: []string{"get", "create"}, want: map[string]any{ServingCAKey: ca}},
		{name: "made by the chart, empty", existing: []runtime.Object{configMap(nil)}, verbs: []string{"get", "patch"}, want: map[string]any{ServingCAKey: ca}},
		{name: "another CA", existing: []runtime.Object{configMap(map[string]any{ServingCAKey: "old", "note": "kept"})},
			verbs: []string{"get", "patch"}, want: map[string]any{ServingCAKey: ca, "note": "kept"}},
		{name: "this CA", existing: []runtime.Object{configMap(map[string]any{ServingCAKey: ca})}, verbs: []string{"get"}, want: map[string]any{ServingCAKey: ca}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{configMapsResource: "ConfigMapList"}, tt.existing...)
			ctx := context.Background()
			if err := ensureCAConfigMap(ctx, client, []byte(ca), ns); err != nil {
				t.Fatal(err)
			}
			var verbs []string
			for _, a := range client.Actions() {
				verbs = append(verbs, a.GetVerb())
				if a.GetNamespace() != ns {
					t.Errorf("%s in namespace %q, want %q", a.GetVerb(), a.GetNamespace(), ns)
				}
				if p, ok := a.(k8stesting.PatchAction); ok && p.GetName() != ServingCAConfigMap {
					t.Errorf("patched %s", p.GetName())
				}
			}
			if len(verbs) != len(tt.verbs) {
				t.Fatalf("requests %v, want %v", verbs, tt.verbs)
			}
			for i := range verbs {
				if verbs[i] != tt.verbs[i] {
					t.Fatalf("requests %v, want %v", verbs, tt.verbs)
				}
			}
			got, err := client.Resource(configMapsResource).Namespace(ns).Get(ctx, ServingCAConfigMap, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			data, _, _ := unstructured.NestedMap(got.Object, "data")
			if len(data) != len(tt.want) {
				t.Fatalf("data %v, want %v", data, tt.want)
			}
			for k, v := range tt.want {
				if data[k] != v {
					t.Errorf("data[%s] = %v, want %v", k, data[k], v)
				}
			}
		})
	}
}
