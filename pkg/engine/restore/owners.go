package restore

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/backstop-io/backstop/pkg/engine/items"
)

// Owner references are written last. An item is created without them
// (resetMetadata drops them: they carry the owners' UIDs in the backed-up
// cluster, and the garbage collector deletes a dependent whose owner UID
// does not exist). Once every item is in place, each restored item that
// had owner references gets them back, pointing at the owners in the
// target cluster by apiVersion, kind and name: restored by this restore or
// already there. A reference whose owner the target lacks stays dropped,
// as Velero drops them all. So a ConfigMap owned by a custom resource is
// deleted with it after a restore too, as before the backup.

// dependent is an item written by the restore whose backed-up version had
// owner references.
type dependent struct {
	gvr       schema.GroupVersionResource
	namespace string
	name      string
	refs      []metav1.OwnerReference
}

// ownerKey names an owner in the target cluster.
type ownerKey struct {
	group, kind, namespace, name string
}

// relinkOwners gives the dependents their owner references back, with the
// target's UIDs. resources are the target's (discovery of the last pass).
func (run *restoreRun) relinkOwners(ctx context.Context, resources []items.Resource) {
	if len(run.dependents) == 0 {
		return
	}
	byKind := make(map[schema.GroupKind]items.Resource, len(resources))
	for _, res := range resources {
		byKind[schema.GroupKind{Group: res.GVR.Group, Kind: res.Kind}] = res
	}
	uids := map[ownerKey]types.UID{}
	ownerUID := func(ref metav1.OwnerReference, namespace string) (types.UID, error) {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return "", fmt.Errorf("owner %s %s: %w", ref.Kind, ref.Name, err)
		}
		res, ok := byKind[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}]
		if !ok {
			return "", nil
		}
		if !res.Namespaced {
			namespace = ""
		}
		key := ownerKey{gv.Group, ref.Kind, namespace, ref.Name}
		if uid, ok := uids[key]; ok {
			return uid, nil
		}
		owner, err := run.target.Resource(res.GVR).Namespace(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			uids[key] = ""
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("reading owner %s %s: %w", ref.Kind, qualified(namespace, ref.Name), err)
		}
		uids[key] = owner.GetUID()
		return owner.GetUID(), nil
	}
	for _, d := range run.dependents {
		if ctx.Err() != nil {
			return
		}
		what := fmt.Sprintf("%s %s", d.gvr.GroupResource(), qualified(d.namespace, d.name))
		var refs []metav1.OwnerReference
		for _, ref := range d.refs {
			uid, err := ownerUID(ref, d.namespace)
			if err != nil {
				run.log.Warning(d.namespace, scopeOf(d.namespace), fmt.Sprintf("owner references of %s: %v", what, err))
				continue
			}
			if uid == "" {
				run.log.Item("Owner not in the target cluster: reference dropped", "item", what, "owner", ref.Kind+"/"+ref.Name)
				continue
			}
			ref.UID = uid
			refs = append(refs, ref)
		}
		if len(refs) == 0 {
			continue
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": refs}})
		if err != nil {
			run.log.Error(d.namespace, scopeOf(d.namespace), fmt.Sprintf("owner references of %s: %v", what, err))
			continue
		}
		if _, err := run.target.Resource(d.gvr).Namespace(d.namespace).Patch(ctx, d.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			run.log.Error(d.namespace, scopeOf(d.namespace), fmt.Sprintf("setting the owner references of %s: %v", what, err))
			continue
		}
		run.log.Item("Owner references set", "item", what, "owners", len(refs))
	}
}

// scopeOf is the log scope of an item in namespace ("" for cluster-scoped).
func scopeOf(namespace string) string {
	if namespace == "" {
		return items.ScopeCluster
	}
	return ""
}
