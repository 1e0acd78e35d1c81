package backup

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/backstop-io/backstop/pkg/engine/items"
)

// Related items. A backup of some namespaces (includeClusterResources
// unset) takes no cluster-scoped resource by itself, but takes those its
// namespaced items need to be restored whole, as Velero's item actions
// add them: the PersistentVolume a claim is bound to, the
// CustomResourceDefinition of a custom resource, and the
// ClusterRoleBindings naming a ServiceAccount with their ClusterRoles.
// includeClusterResources: false, or resource filters that leave the
// resource out, take none (items.Filter.IncludesRelated). Label selectors
// do not apply to them; the exclude-from-backup label does.

// Group resources of the related items.
const (
	persistentVolumes   = "persistentvolumes"
	crds                = "customresourcedefinitions.apiextensions.k8s.io"
	clusterRoleBindings = "clusterrolebindings.rbac.authorization.k8s.io"
	clusterRoles        = "clusterroles.rbac.authorization.k8s.io"
)

// relatedItems collects, while namespaced items are written, what they
// bring along.
type relatedItems struct {
	volumes         sets.Set[string]
	crdNames        sets.Set[string]
	serviceAccounts sets.Set[string] // namespace/name
}

func (ri *relatedItems) note(r items.Resource, item *items.RawItem, obj *unstructured.Unstructured) {
	if !r.Namespaced {
		return
	}
	add := func(set *sets.Set[string], key string) {
		if *set == nil {
			*set = sets.New[string]()
		}
		set.Insert(key)
	}
	switch {
	case isClaims(r):
		if v, _, _ := unstructured.NestedString(obj.Object, "spec", "volumeName"); v != "" {
			add(&ri.volumes, v)
		}
	case r.GVR.Group == "" && r.GVR.Resource == "serviceaccounts":
		add(&ri.serviceAccounts, item.Namespace+"/"+item.Name)
	case r.GVR.Group != "":
		// A CRD of this name exists only for custom resources.
		add(&ri.crdNames, r.GroupResource())
	}
}

// reads reports whether note needs the items of r decoded (a claim's
// volume is in its spec).
func (ri *relatedItems) reads(r items.Resource) bool { return isClaims(r) }

func isClaims(r items.Resource) bool {
	return r.GVR.Group == "" && r.GVR.Resource == "persistentvolumeclaims"
}

// writeRelated writes the related items the filter takes.
func (c *collector) writeRelated(ctx context.Context, resources []items.Resource) error {
	byGR := make(map[string]items.Resource, len(resources))
	for _, r := range resources {
		byGR[r.GroupResource()] = r
	}
	taken := func(gr string) (items.Resource, bool) {
		r, ok := byGR[gr]
		return r, ok && c.filter.IncludesRelated(r)
	}
	if r, ok := taken(persistentVolumes); ok {
		if err := c.writeNamed(ctx, r, sets.List(c.related.volumes)); err != nil {
			return err
		}
	}
	if r, ok := taken(crds); ok {
		if err := c.writeNamed(ctx, r, sets.List(c.related.crdNames)); err != nil {
			return err
		}
	}
	if len(c.related.serviceAccounts) == 0 {
		return nil
	}
	crb, ok := taken(clusterRoleBindings)
	if !ok {
		return nil
	}
	list, err := c.source.Dynamic.Resource(crb.GVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		c.log.Error("", items.ScopeCluster, fmt.Sprintf("listing %s for the service accounts backed up: %v", clusterRoleBindings, err))
		return nil
	}
	roles := sets.New[string]()
	for i := range list.Items {
		b := &list.Items[i]
		if !c.namesServiceAccount(b) || b.GetLabels()[items.ExcludeLabel] == "true" {
			continue
		}
		if err := c.writeObject(ctx, crb, b); err != nil {
			return err
		}
		if kind, _, _ := unstructured.NestedString(b.Object, "roleRef", "kind"); kind == "ClusterRole" {
			name, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
			roles.Insert(name)
		}
	}
	if r, ok := taken(clusterRoles); ok {
		return c.writeNamed(ctx, r, sets.List(roles))
	}
	return nil
}

// namesServiceAccount reports whether a binding has a backed-up
// ServiceAccount among its subjects.
func (c *collector) namesServiceAccount(binding *unstructured.Unstructured) bool {
	subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
	for _, s := range subjects {
		m, _ := s.(map[string]any)
		if m["kind"] != "ServiceAccount" {
			continue
		}
		ns, _ := m["namespace"].(string)
		name, _ := m["name"].(string)
		if c.related.serviceAccounts.Has(ns + "/" + name) {
			return true
		}
	}
	return false
}

// writeNamed reads the cluster-scoped items names of r and writes them;
// one that does not exist is not an error (a claim's volume deleted, a
// group without CRDs).
func (c *collector) writeNamed(ctx context.Context, r items.Resource, names []string) error {
	for _, name := range names {
		obj, err := c.source.Dynamic.Resource(r.GVR).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			c.log.Error("", items.ScopeCluster, fmt.Sprintf("reading %s %s: %v", r.GroupResource(), name, err))
			continue
		}
		if obj.GetLabels()[items.ExcludeLabel] == "true" {
			continue
		}
		if err := c.writeObject(ctx, r, obj); err != nil {
			return err
		}
	}
	return nil
}
