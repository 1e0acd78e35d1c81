package cluster

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/diff"

	"github.com/backstop-io/backstop/pkg/engine/restore"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// The field-by-field comparison of a namespace before its backup with what
// a restore made of it.

// clusterObjects are the cluster-scoped objects the workloads' backup
// takes along with the namespace (related items).
var clusterObjects = []clusterObject{
	{schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}, "shop-data"},
	{schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, "widgets.example.com"},
	{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}, "shop-robot-audits"},
	{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, "shop-auditor"},
}

type clusterObject struct {
	gvr  schema.GroupVersionResource
	name string
}

// snapshotObject is one object as it was before the backup.
type snapshotObject struct {
	gvr schema.GroupVersionResource
	obj *unstructured.Unstructured
}

// snapshot reads every object of namespace ns (every listable namespaced
// resource the cluster serves), the namespace itself and clusterObjects.
func snapshot(t *testing.T, c *framework.Cluster, ns string) []snapshotObject {
	t.Helper()
	ctx := context.Background()
	lists, err := c.Kube.Discovery().ServerPreferredNamespacedResources()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	var out []snapshotObject
	for _, l := range lists {
		gv, _ := schema.ParseGroupVersion(l.GroupVersion)
		for _, r := range l.APIResources {
			// events.k8s.io serves the core group's Events again.
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || gv.Group == "events.k8s.io" {
				continue
			}
			gvr := gv.WithResource(r.Name)
			list, err := c.Dynamic.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatalf("listing %s in %s: %v", gvr, ns, err)
			}
			for i := range list.Items {
				out = append(out, snapshotObject{gvr, &list.Items[i]})
			}
		}
	}
	namespace, err := c.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, snapshotObject{schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, namespace})
	for _, co := range clusterObjects {
		obj, err := c.Dynamic.Resource(co.gvr).Get(ctx, co.name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s %s: %v", co.gvr.Resource, co.name, err)
		}
		out = append(out, snapshotObject{co.gvr, obj})
	}
	return out
}

// skippedByRule is the restore rule that leaves an object to the cluster,
// or "".
func skippedByRule(gvr schema.GroupVersionResource, obj *unstructured.Unstructured) string {
	controlled := false
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller {
			controlled = true
		}
	}
	switch gr := gvr.GroupResource().String(); {
	case gr == "events" || gr == "events.events.k8s.io":
		return "events are never restored"
	case (gr == "pods" || gr == "replicasets.apps" || gr == "controllerrevisions.apps") && controlled:
		return "made by its controller"
	case gr == "endpointslices.discovery.k8s.io" && obj.GetLabels()["endpointslice.kubernetes.io/managed-by"] != "":
		return "managed endpoints"
	case gr == "endpoints" && obj.GetLabels()["endpointslice.kubernetes.io/skip-mirror"] == "":
		return "managed endpoints"
	case gr == "secrets" && obj.Object["type"] == "kubernetes.io/service-account-token":
		return "service account token"
	}
	return ""
}

// row is one kind's line of the table.
type row struct {
	objects, restored, kept, skipped, differing int
}

// compareRestored compares every object of before with its counterpart
// after the restore named restoreName into namespace target, field by
// field minus what servers set, prints the table and returns the count of
// differing objects (each one reported).
func compareRestored(t *testing.T, c *framework.Cluster, before []snapshotObject, from, target, restoreName string) int {
	t.Helper()
	ctx := context.Background()
	rows := map[string]*row{}
	differing := 0
	mapper := c.Mapper()
	for _, s := range before {
		kind := s.gvr.GroupResource().String()
		if rows[kind] == nil {
			rows[kind] = &row{}
		}
		r := rows[kind]
		r.objects++
		ri := c.Dynamic.Resource(s.gvr)
		name := s.obj.GetName()
		var got *unstructured.Unstructured
		var err error
		switch {
		case s.gvr.Resource == "namespaces":
			name = target
			got, err = ri.Get(ctx, name, metav1.GetOptions{})
		case s.obj.GetNamespace() == "":
			got, err = ri.Get(ctx, name, metav1.GetOptions{})
		default:
			got, err = ri.Namespace(target).Get(ctx, name, metav1.GetOptions{})
		}
		what := fmt.Sprintf("%s %s", kind, name)
		if rule := skippedByRule(s.gvr, s.obj); rule != "" {
			r.skipped++
			if err == nil && got.GetLabels()[restore.RestoreNameLabel] != "" {
				t.Errorf("%s was restored, want it left to the cluster (%s)", what, rule)
				r.differing++
				differing++
			}
			continue
		}
		if apierrors.IsNotFound(err) {
			t.Errorf("%s: not in %s after restore %s", what, target, restoreName)
			r.differing++
			differing++
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got.GetLabels()[restore.RestoreNameLabel] == restoreName {
			r.restored++
		} else {
			r.kept++
		}
		want := normalize(s.gvr, s.obj.DeepCopy(), from, target)
		have := normalize(s.gvr, got.DeepCopy(), target, target)
		if !apiequality.Semantic.DeepEqual(want.Object, have.Object) {
			t.Errorf("%s differs after restore %s (- backed up, + restored):\n%s", what, restoreName, diff.Diff(want.Object, have.Object))
			r.differing++
			differing++
		}
		checkOwners(t, c, mapper, what, got, target)
	}
	kinds := make([]string, 0, len(rows))
	for k := range rows {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var b strings.Builder
	fmt.Fprintf(&b, "restore %s (%s → %s)\n%-48s %7s %8s %5s %17s %9s\n", restoreName, from, target, "KIND", "OBJECTS", "RESTORED", "KEPT", "SKIPPED BY A RULE", "DIFFERING")
	var total row
	for _, k := range kinds {
		r := rows[k]
		fmt.Fprintf(&b, "%-48s %7d %8d %5d %17d %9d\n", k, r.objects, r.restored, r.kept, r.skipped, r.differing)
		total.objects += r.objects
		total.restored += r.restored
		total.kept += r.kept
		total.skipped += r.skipped
		total.differing += r.differing
	}
	fmt.Fprintf(&b, "%-48s %7d %8d %5d %17d %9d", "total", total.objects, total.restored, total.kept, total.skipped, total.differing)
	t.Log("\n" + b.String())
	return differing
}

// normalize drops what servers set (identity, versions, timestamps,
// status, the addresses and ports a cluster allocates, generated
// selectors, binding annotations, the restore labels) and writes
// namespace from as to, so that an object compares with its restored
// copy.
func normalize(gvr schema.GroupVersionResource, obj *unstructured.Unstructured, from, to string) *unstructured.Unstructured {
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "namespace", "deletionTimestamp"} {
		unstructured.RemoveNestedField(obj.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(obj.Object, "status")
	labels := obj.GetLabels()
	for _, l := range []string{restore.RestoreNameLabel, restore.BackupNameLabel, "kubernetes.io/metadata.name",
		"controller-uid", "batch.kubernetes.io/controller-uid"} {
		delete(labels, l)
	}
	if len(labels) == 0 {
		labels = nil
	}
	obj.SetLabels(labels)
	annotations := obj.GetAnnotations()
	for _, a := range []string{"pv.kubernetes.io/bind-completed", "pv.kubernetes.io/bound-by-controller"} {
		delete(annotations, a)
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	obj.SetAnnotations(annotations)
	refs := obj.GetOwnerReferences()
	for i := range refs {
		refs[i].UID = ""
	}
	obj.SetOwnerReferences(refs)
	if gvr.Resource == "namespaces" {
		obj.SetName(to)
	}
	switch gvr.GroupResource().String() {
	case "services":
		if ip, _, _ := unstructured.NestedString(obj.Object, "spec", "clusterIP"); ip != "None" {
			unstructured.RemoveNestedField(obj.Object, "spec", "clusterIP")
			unstructured.RemoveNestedField(obj.Object, "spec", "clusterIPs")
		}
		ports, _, _ := unstructured.NestedSlice(obj.Object, "spec", "ports")
		for _, p := range ports {
			delete(p.(map[string]any), "nodePort")
		}
		_ = unstructured.SetNestedSlice(obj.Object, ports, "spec", "ports")
	case "jobs.batch":
		unstructured.RemoveNestedField(obj.Object, "spec", "selector")
		tl, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "template", "metadata", "labels")
		delete(tl, "controller-uid")
		delete(tl, "batch.kubernetes.io/controller-uid")
		_ = unstructured.SetNestedStringMap(obj.Object, tl, "spec", "template", "metadata", "labels")
	case "persistentvolumes":
		unstructured.RemoveNestedField(obj.Object, "spec", "claimRef", "uid")
		unstructured.RemoveNestedField(obj.Object, "spec", "claimRef", "resourceVersion")
		if ns, _, _ := unstructured.NestedString(obj.Object, "spec", "claimRef", "namespace"); ns == from {
			_ = unstructured.SetNestedField(obj.Object, to, "spec", "claimRef", "namespace")
		}
	case "rolebindings.rbac.authorization.k8s.io", "clusterrolebindings.rbac.authorization.k8s.io":
		subjects, _, _ := unstructured.NestedSlice(obj.Object, "subjects")
		for _, s := range subjects {
			if m := s.(map[string]any); m["namespace"] == from {
				m["namespace"] = to
			}
		}
		_ = unstructured.SetNestedSlice(obj.Object, subjects, "subjects")
	}
	return obj
}

// checkOwners: the owner references of a restored object point at the
// owners in the target cluster, by UID.
func checkOwners(t *testing.T, c *framework.Cluster, mapper meta.RESTMapper, what string, obj *unstructured.Unstructured, namespace string) {
	t.Helper()
	for _, ref := range obj.GetOwnerReferences() {
		gv, _ := schema.ParseGroupVersion(ref.APIVersion)
		mapping, err := mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, gv.Version)
		if err != nil {
			t.Errorf("%s: owner %s %s: %v", what, ref.Kind, ref.Name, err)
			continue
		}
		ri := c.Dynamic.Resource(mapping.Resource)
		var owner *unstructured.Unstructured
		if mapping.Scope.Name() == "namespace" {
			owner, err = ri.Namespace(namespace).Get(context.Background(), ref.Name, metav1.GetOptions{})
		} else {
			owner, err = ri.Get(context.Background(), ref.Name, metav1.GetOptions{})
		}
		if err != nil || owner.GetUID() != ref.UID {
			t.Errorf("%s: owner reference %s %s (uid %s) does not point at the owner in the cluster: %v", what, ref.Kind, ref.Name, ref.UID, err)
		}
	}
}
