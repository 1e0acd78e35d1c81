package resourcemodifiers

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

func configMap(doc string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "modifiers"}, Data: map[string]string{"rules.yaml": doc}}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		// want is in the error.
		want string
	}{
		{"another version", "version: v2\nresourceModifierRules:\n- conditions: {groupResource: pods}\n  mergePatches: [{patchData: '{}'}]\n", `version: Unsupported value: "v2"`},
		{"no rules", "version: v1\n", "resourceModifierRules: Required value"},
		{"an unknown field", "version: v1\nresourceModifierRule: []\n", `unknown field "resourceModifierRule"`},
		{"no group-resource", "version: v1\nresourceModifierRules:\n- conditions: {}\n  mergePatches: [{patchData: '{}'}]\n",
			"resourceModifierRules[0].conditions.groupResource: Required value"},
		{"a bad glob", "version: v1\nresourceModifierRules:\n- conditions: {groupResource: '[pods'}\n  mergePatches: [{patchData: '{}'}]\n",
			"resourceModifierRules[0].conditions.groupResource: Invalid value"},
		{"a bad name regex", "version: v1\nresourceModifierRules:\n- conditions: {groupResource: pods, resourceNameRegex: '(web'}\n  mergePatches: [{patchData: '{}'}]\n",
			"resourceModifierRules[0].conditions.resourceNameRegex: Invalid value"},
		{"a bad label selector", "version: v1\nresourceModifierRules:\n- conditions: {groupResource: pods, labelSelector: {matchLabels: {'a b': c}}}\n  mergePatches: [{patchData: '{}'}]\n",
			"resourceModifierRules[0].conditions.labelSelector: Invalid value"},
		{"an unknown operation", "version: v1\nresourceModifierRules:\n- conditions: {groupResource: pods}\n  patches: [{operation: upsert, path: /spec}]\n",
			`resourceModifierRules[0].patches[0].operation: Unsupported value: "upsert"`},
		{"a patch without a path", "version: v1\nresourceModifierRules:\n- conditions: {groupResource: pods}\n  patches: [{operation: remove}]\n",
			"resourceModifierRules[0].patches[0].path: Required value"},
		{"a move without from", "version: v1\nresourceModifierRules:\n- conditions: {groupResource: pods}\n  patches: [{operation: move, path: /a}]\n",
			"resourceModifierRules[0].patches[0].from: Required value"},
		{"two kinds of patches", "version: v1\nresourceModifierRules:\n- conditions: {groupResource: pods}\n  patches: [{operation: remove, path: /a}]\n  mergePatches: [{patchData: '{}'}]\n",
			"resourceModifierRules[0]: Invalid value"},
		{"no patches", "version: v1\nresourceModifierRules:\n- conditions: {groupResource: pods}\n", "resourceModifierRules[0]: Required value"},
		{"patch data not an object", "version: v1\nresourceModifierRules:\n- conditions: {groupResource: pods}\n  strategicPatches: [{patchData: '[1, 2]'}]\n",
			"resourceModifierRules[0].strategicPatches[0].patchData: Invalid value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(configMap(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse: %v, want an error with %q", err, tc.want)
			}
		})
	}
	t.Run("two data keys", func(t *testing.T) {
		cm := configMap("version: v1")
		cm.Data["more.yaml"] = "version: v1"
		if _, err := Parse(cm); err == nil || !strings.Contains(err.Error(), "2 data keys") {
			t.Errorf("Parse: %v, want the count of keys", err)
		}
	})
}

// object decodes a YAML object.
func object(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(s), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

const claim = `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: db-data, namespace: shop, labels: {app: db}}
spec: {storageClassName: standard, resources: {requests: {storage: 1Gi}}}
`

const deployment = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {tier: frontend}}
spec:
  replicas: 3
  template:
    spec:
      containers:
      - {name: web, image: registry.old.example/web:1.2}
      - {name: sidecar, image: registry.old.example/proxy:2}
`

func TestApply(t *testing.T) {
	for _, tc := range []struct {
		name, rules, item, groupResource string
		// want is the item after (unchanged when empty).
		want string
		// wantErr is in the error.
		wantErr string
	}{
		{name: "a JSON patch changes a claim's storage class", groupResource: "persistentvolumeclaims", item: claim,
			rules: `[{conditions: {groupResource: persistentvolumeclaims}, patches: [{operation: replace, path: /spec/storageClassName, value: premium}]}]`,
			want:  strings.Replace(claim, "storageClassName: standard", "storageClassName: premium", 1)},
		{name: "numbers and booleans go as JSON, a quoted value as a string", groupResource: "deployments.apps", item: deployment,
			rules: `[{conditions: {groupResource: deployments.apps}, patches: [{operation: replace, path: /spec/replicas, value: "1"}, {operation: add, path: /spec/paused, value: "true"},
			          {operation: add, path: /metadata/labels/version, value: '"2"'}, {operation: add, path: /metadata/annotations, value: '{"note": "kept"}'}]}]`,
			want: strings.Replace(strings.Replace(deployment, "replicas: 3", "replicas: 1\n  paused: true", 1), "labels: {tier: frontend}}",
				"labels: {tier: frontend, version: \"2\"}, annotations: {note: kept}}", 1)},
		{name: "a strategic merge patch changes one container's image by name", groupResource: "deployments.apps", item: deployment,
			rules: `[{conditions: {groupResource: "*.apps", namespaces: [shop], labelSelector: {matchLabels: {tier: frontend}}}, strategicPatches: [{patchData: '{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"registry.new.example/web:1.2"}]}}}}'}]}]`,
			want:  strings.Replace(deployment, "registry.old.example/web:1.2", "registry.new.example/web:1.2", 1)},
		{name: "a merge patch adds an annotation", groupResource: "persistentvolumeclaims", item: claim,
			rules: "[{conditions: {groupResource: persistentvolumeclaims, resourceNameRegex: '^db-'}, mergePatches: [{patchData: 'metadata: {annotations: {restored: \"yes\"}}'}]}]",
			want:  strings.Replace(claim, "labels: {app: db}}", "labels: {app: db}, annotations: {restored: \"yes\"}}", 1)},
		{name: "another group-resource: untouched", groupResource: "persistentvolumeclaims", item: claim,
			rules: `[{conditions: {groupResource: "*.apps"}, mergePatches: [{patchData: '{"metadata":{"labels":null}}'}]}]`},
		{name: "another namespace: untouched", groupResource: "persistentvolumeclaims", item: claim,
			rules: `[{conditions: {groupResource: persistentvolumeclaims, namespaces: [other]}, mergePatches: [{patchData: '{"metadata":{"labels":null}}'}]}]`},
		{name: "a name the regex does not match: untouched", groupResource: "persistentvolumeclaims", item: claim,
			rules: `[{conditions: {groupResource: persistentvolumeclaims, resourceNameRegex: "^web"}, mergePatches: [{patchData: '{"metadata":{"labels":null}}'}]}]`},
		{name: "labels the selector does not match: untouched", groupResource: "persistentvolumeclaims", item: claim,
			rules: `[{conditions: {groupResource: persistentvolumeclaims, labelSelector: {matchLabels: {app: web}}}, mergePatches: [{patchData: '{"metadata":{"labels":null}}'}]}]`},
		{name: "a match that holds selects", groupResource: "persistentvolumeclaims", item: claim,
			rules: `[{conditions: {groupResource: persistentvolumeclaims, matches: [{path: /spec/storageClassName, value: standard}]}, patches: [{operation: remove, path: /spec/storageClassName}]}]`,
			want:  strings.Replace(claim, "storageClassName: standard, ", "", 1)},
		{name: "a match that does not hold: untouched", groupResource: "persistentvolumeclaims", item: claim,
			rules: `[{conditions: {groupResource: persistentvolumeclaims, matches: [{path: /spec/storageClassName, value: premium}]}, patches: [{operation: remove, path: /spec/storageClassName}]}]`},
		{name: "a failed test among the patches: untouched", groupResource: "persistentvolumeclaims", item: claim,
			rules: `[{conditions: {groupResource: persistentvolumeclaims}, patches: [{operation: test, path: /spec/storageClassName, value: premium}, {operation: remove, path: /spec/storageClassName}]}]`},
		{name: "conditions are read on the item as it came", groupResource: "persistentvolumeclaims", item: claim,
			rules: `[{conditions: {groupResource: persistentvolumeclaims}, mergePatches: [{patchData: '{"metadata":{"labels":{"app":"web"}}}'}]},
			         {conditions: {groupResource: persistentvolumeclaims, labelSelector: {matchLabels: {app: web}}}, mergePatches: [{patchData: '{"metadata":{"labels":null}}'}]}]`,
			want: strings.Replace(claim, "labels: {app: db}", "labels: {app: web}", 1)},
		{name: "a patch that cannot apply: the error names the rule", groupResource: "persistentvolumeclaims", item: claim,
			rules:   `[{conditions: {groupResource: persistentvolumeclaims}, patches: [{operation: remove, path: /spec/volumeName}]}]`,
			wantErr: "resource modifier rule 0: JSON patch"},
		{name: "a strategic patch of a kind without a Go type", groupResource: "widgets.example.com", item: "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
			rules:   `[{conditions: {groupResource: widgets.example.com}, strategicPatches: [{patchData: '{"spec":{"size":2}}'}]}]`,
			wantErr: "has no Go type to merge by"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse(configMap("version: v1\nresourceModifierRules: " + tc.rules))
			if err != nil {
				t.Fatal(err)
			}
			obj := object(t, tc.item)
			err = m.Apply(obj, tc.groupResource, scheme.Scheme)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Apply: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == "" {
				want = tc.item
			}
			if w := object(t, want); !equal(obj, w) {
				t.Errorf("item after:\n%v\nwant:\n%v", obj.Object, w.Object)
			}
		})
	}
}

func equal(a, b *unstructured.Unstructured) bool {
	x, _ := a.MarshalJSON()
	y, _ := b.MarshalJSON()
	return string(x) == string(y)
}
