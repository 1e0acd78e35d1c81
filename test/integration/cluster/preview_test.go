package cluster

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// previewRestore asks kube-apiserver (which passes it on to Backstop) for
// a restore's preview: kubectl create --dry-run=server -o json.
func previewRestore(t *testing.T, c *framework.Cluster, r *velerov1.Restore) *velerov1.RestorePreview {
	t.Helper()
	r.TypeMeta = metav1.TypeMeta{APIVersion: "velero.io/v1", Kind: "Restore"}
	r.Namespace = adminNamespace
	manifest, err := yaml.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Kubectl(c.AdminKubeconfig, manifest, "create", "-f", "-", "--dry-run=server", "-o", "json")
	if err != nil {
		t.Fatalf("kubectl create --dry-run=server: %v: %s", err, out)
	}
	var answered velerov1.Restore
	if err := json.Unmarshal([]byte(out), &answered); err != nil || answered.Status.Preview == nil {
		t.Fatalf("the answer: %v, %.2000s", err, out)
	}
	if _, err := c.Backstop.VeleroV1().Restores(adminNamespace).Get(context.Background(), r.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the previewed restore %s was stored: %v", r.Name, err)
	}
	return answered.Status.Preview
}

// checkModifiersPreview previews the restore of backup into
// shop-modified with resource modifiers, before it runs: the preview
// writes nothing (the namespace is not made), shows each patch kind's
// effect on the objects as they would be written, and lists, item by
// item, what the restore then creates (restored, the namespace's objects
// labelled with the restore's name: compareWithPreview).
func checkModifiersPreview(t *testing.T, c *framework.Cluster, backup string, modifiers *corev1.TypedLocalObjectReference) *velerov1.RestorePreview {
	t.Helper()
	p := previewRestore(t, c, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "shop-modified"}, Spec: velerov1.RestoreSpec{
		BackupName: backup, NamespaceMapping: map[string]string{"shop": "shop-modified"}, ResourceModifier: modifiers}})
	if _, err := c.Kube.CoreV1().Namespaces().Get(context.Background(), "shop-modified", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace shop-modified after the preview: %v, want none", err)
	}
	objects := map[string]*unstructured.Unstructured{}
	for _, it := range p.Items {
		if it.Object != nil && it.Namespace == "shop-modified" {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(it.Object.Raw); err != nil {
				t.Fatalf("%s %s: %v", it.Resource, it.Name, err)
			}
			objects[it.Resource+" "+it.Name] = u
		}
	}
	for _, check := range []struct {
		what, item string
		path       []string
		want       string
	}{
		{"the currency (merge patch)", "configmaps settings", []string{"data", "currency"}, "CHF"},
		{"the annotation (JSON patch)", "services web", []string{"metadata", "annotations", "restored-by"}, "modifiers"},
	} {
		obj := objects[check.item]
		if obj == nil {
			t.Errorf("the preview shows no %s", check.item)
			continue
		}
		if got, _, _ := unstructured.NestedString(obj.Object, check.path...); got != check.want {
			t.Errorf("%s in the preview: %q, want %q", check.what, got, check.want)
		}
	}
	if web := objects["deployments.apps web"]; web == nil || !strings.Contains(string(mustJSON(t, web)), `"image":"registry.invalid/web:2"`) {
		t.Errorf("the web deployment in the preview (strategic merge patch of its image): %v", web)
	}
	if !hasItem(p, velerov1.PreviewCreate, "namespaces", "", "shop-modified") {
		t.Errorf("the preview does not say namespace shop-modified would be created: %v", p.Items)
	}
	return p
}

func mustJSON(t *testing.T, u *unstructured.Unstructured) []byte {
	t.Helper()
	data, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func hasItem(p *velerov1.RestorePreview, action, resource, namespace, name string) bool {
	for _, it := range p.Items {
		if it.Action == action && it.Resource == resource && it.Namespace == namespace && it.Name == name {
			return true
		}
	}
	return false
}

// compareWithPreview: what the restore created in namespace (its objects
// labelled with its name, per resource the preview names) is, item by
// item, what the preview said it would create there.
func compareWithPreview(t *testing.T, c *framework.Cluster, p *velerov1.RestorePreview, namespace, restore string) {
	t.Helper()
	if p.Truncated {
		t.Fatalf("the preview lists %d items of more", len(p.Items))
	}
	previewed := map[string][]string{}
	for _, it := range p.Items {
		if it.Namespace == namespace && it.Action == velerov1.PreviewCreate {
			previewed[it.Resource] = append(previewed[it.Resource], it.Name)
		}
	}
	for resource, names := range previewed {
		out, err := c.Kubectl(c.AdminKubeconfig, nil, "get", resource, "-n", namespace, "-l", "velero.io/restore-name="+restore,
			"-o", "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}")
		if err != nil {
			t.Errorf("kubectl get %s: %v: %s", resource, err, out)
			continue
		}
		restored := strings.Fields(out)
		sort.Strings(restored)
		sort.Strings(names)
		if strings.Join(restored, ",") != strings.Join(names, ",") {
			t.Errorf("%s in %s: the restore created %v, the preview said %v", resource, namespace, restored, names)
		}
	}
	if len(previewed) < 5 {
		t.Errorf("the preview would create %d kinds of objects in %s: %v", len(previewed), namespace, previewed)
	}
}
