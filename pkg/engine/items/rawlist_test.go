package items

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestRawItem: an item of a list keeps its JSON, gets apiVersion and kind
// when the server left them out, and its head is read for the filters.
func TestRawItem(t *testing.T) {
	configMaps := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	for _, tc := range []struct {
		name, in string
		want     map[string]any
	}{
		{"built-in list item: type added", `{"metadata":{"name":"a","namespace":"ns","labels":{"x":"y"}},"data":{"k":"v"}}`,
			map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a", "namespace": "ns", "labels": map[string]any{"x": "y"}}, "data": map[string]any{"k": "v"}}},
		{"custom resource: kept", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","namespace":"ns"}}`,
			map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "a", "namespace": "ns"}}},
		{"empty type sent: set, once", `{"apiVersion":"","kind":"","metadata":{"name":"a","namespace":"ns"}}`,
			map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a", "namespace": "ns"}}},
		{"white space before the first field", " {\n \"metadata\":{\"name\":\"a\",\"namespace\":\"ns\"}}",
			map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a", "namespace": "ns"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			item, err := rawItem(configMaps, []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(item.Data, &got); err != nil {
				t.Fatalf("%s: %v", item.Data, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("data %s, want %v", item.Data, tc.want)
			}
			if item.Name != "a" || item.Namespace != "ns" || item.APIVersion != tc.want["apiVersion"] || item.Kind != tc.want["kind"] {
				t.Errorf("head %+v", item)
			}
		})
	}
	if _, err := rawItem(configMaps, []byte(`{"metadata":`)); err == nil {
		t.Error("a truncated item: no error")
	}
}
