package restore

// One item of a restore: whether the restore takes it (filters, scope,
// the kinds never restored), and how it is prepared and written (metadata
// reset, labels, restore item actions, the namespace made, an existing
// object left, warned of or updated).

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	kubescheme "k8s.io/client-go/kubernetes/scheme"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/archive"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/engine/restoreaction"
)

// nonRestorable are never restored: Velero's list, and the request
// objects whose restore would act again (delete a backup, ...).
var nonRestorable = map[string]bool{
	"nodes": true, "events": true, "events.events.k8s.io": true,
	"backups.velero.io": true, "restores.velero.io": true, "resticrepositories.velero.io": true,
	"csinodes.storage.k8s.io": true, "volumeattachments.storage.k8s.io": true, "backuprepositories.velero.io": true,
	"deletebackuprequests.velero.io": true, "downloadrequests.velero.io": true, "serverstatusrequests.velero.io": true,
	// A backup's DataUploads say where its claims' data is (the volume
	// info file says it too); the data mover makes DataDownloads anew.
	"datauploads.velero.io": true, "datadownloads.velero.io": true,
}

// tenantKind reports whether a resource is one of the tenants' kinds
// (oadp.openshift.io): a restore for a user never restores them, whatever
// the backup holds: a NonAdminBackup or storage location restored by a
// tenant would be one it made without admission's record of who made it.
func tenantKind(groupResource string) bool {
	_, group, _ := strings.Cut(groupResource, ".")
	return group == oadpv1alpha1.GroupName
}

// restoredFirst are restored in a first pass, before what lives in them
// or is defined by them.
var restoredFirst = map[string]bool{"namespaces": true, crdGroupResource: true}

// skipResource logs, once per restore, that the items of a resource are
// skipped and why.
func (run *restoreRun) skipResource(groupResource, why string) {
	run.mu.Lock()
	first := !run.pass.skipped[groupResource] && !run.pass.counting
	run.pass.skipped[groupResource] = true
	run.mu.Unlock()
	if first {
		run.log.Info(why, "resource", groupResource)
	}
}

// selected reports whether the restore takes an item (before any write).
func (run *restoreRun) selected(it *archive.Item) bool {
	if nonRestorable[it.GroupResource] {
		run.skipResource(it.GroupResource, "Skipping a resource that is never restored")
		return false
	}
	if run.as != "" && tenantKind(it.GroupResource) {
		run.skipResource(it.GroupResource, "Skipping a resource a restore for a user never restores: the tenants' own objects are made by the server, not restored")
		return false
	}
	res, ok := run.pass.byGR[it.GroupResource]
	if !ok {
		// Not served (yet): counted, and reported when restored.
		return run.pass.filter.IncludesNamespace(it.Namespace) || it.Namespace == ""
	}
	if run.forUser() && it.GroupResource == snapshotContentsGR && it.Namespace == "" {
		// Cluster-scoped, but its VolumeSnapshot's (snapshots.go).
		return run.userContent(it)
	}
	if res.Namespaced != (it.Namespace != "") {
		// Where the tarball put it says another scope than the target
		// serves: a namespaced item claimed cluster-wide, or the reverse.
		if !run.pass.counting {
			scope := ""
			if it.Namespace == "" {
				scope = items.ScopeCluster
			}
			run.log.Warning(it.Namespace, scope, fmt.Sprintf("%s %s is filed in the backup as %s, but the target serves it %s: not restored",
				it.GroupResource, qualified(it.Namespace, it.Name), scopeWord(it.Namespace != ""), scopeWord(res.Namespaced)))
		}
		return false
	}
	if !run.pass.filter.IncludesResource(res) {
		return false
	}
	if res.Namespaced && !run.pass.filter.IncludesNamespace(it.Namespace) {
		return false
	}
	if items.IsNamespaces(res) && !run.pass.filter.IncludesNamespace(it.Name) {
		return false
	}
	var obj struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(it.Data, &obj); err != nil {
		return true // reported when restored
	}
	return run.pass.filter.IncludesItem(obj.Metadata.Labels)
}

func scopeWord(namespaced bool) string {
	if namespaced {
		return "namespaced"
	}
	return "cluster-scoped"
}

func (run *restoreRun) mapNamespace(ns string) string { return restoreaction.MapNamespace(run.r, ns) }

// restoreItem creates one item in the target, or reconciles it with the
// object already there.
func (run *restoreRun) restoreItem(ctx context.Context, it *archive.Item) {
	namespace := run.mapNamespace(it.Namespace)
	scope := ""
	if it.Namespace == "" {
		scope = items.ScopeCluster
	}
	fail := func(msg string) {
		run.log.Error(namespace, scope, msg, "resource", it.GroupResource, "name", it.Name)
		run.record(it.GroupResource, namespace, it.Name, velerov1.PreviewRefuse, msg, nil)
	}
	res, ok := run.pass.byGR[it.GroupResource]
	if it.GroupResource == vmGroupResource {
		if !ok {
			const why = "the target serves no VirtualMachines: the VM is its libvirt domain, whose disks are restored from its VM backup"
			run.log.Item("Skipped", "item", fmt.Sprintf("%s %s", it.GroupResource, qualified(namespace, it.Name)), "reason", why)
			run.record(it.GroupResource, namespace, it.Name, velerov1.PreviewSkip, why, nil)
			run.count.total.Add(-1)
			return
		}
	}
	if !ok {
		fail(fmt.Sprintf("the target cluster serves no %s: %s %s/%s not restored", it.GroupResource, it.GroupResource, it.Namespace, it.Name))
		return
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(it.Data); err != nil {
		fail(fmt.Sprintf("decoding %s %s/%s from the backup: %v", it.GroupResource, it.Namespace, it.Name, err))
		return
	}
	// The backed-up version, for the actions that read it (a copy only
	// where one applies) and the owner references set last.
	var fromBackup *unstructured.Unstructured
	if restoreaction.Applies(run.c.cfg.Actions, it.GroupResource) {
		fromBackup = obj.DeepCopy()
	}
	owners := obj.GetOwnerReferences()
	resetMetadata(obj)
	if run.pass.statusFilter == nil || !run.pass.statusFilter.IncludesResource(res) {
		unstructured.RemoveNestedField(obj.Object, "status")
	}
	status, hasStatus, _ := unstructured.NestedFieldCopy(obj.Object, "status")
	// The resource modifiers see the item as backed up (its namespace the
	// source's, as in Velero); an error is the restore's, and the item is
	// written as the rules before it left it.
	if res.Namespaced {
		obj.SetNamespace(it.Namespace)
	}
	if err := run.modifiers.Apply(obj, it.GroupResource, kubescheme.Scheme); err != nil {
		run.log.Error(namespace, scope, fmt.Sprintf("%s %s/%s: %v", it.GroupResource, it.Namespace, it.Name, err))
	}
	// The name is the one the item's path gives, which the filters
	// decided on, never another its JSON claims (or a modifier gives).
	obj.SetName(it.Name)
	if items.IsNamespaces(res) {
		obj.SetName(run.mapNamespace(it.Name))
		if _, err := run.waitNamespaceGone(ctx, obj.GetName()); err != nil {
			fail(err.Error())
			return
		}
	}
	if res.Namespaced {
		obj.SetNamespace(namespace)
	}
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	// Label values: names of over 63 characters shortened, as Velero does.
	l[BackupNameLabel], l[RestoreNameLabel] = velerov1.LabelValue(run.backup.Name), velerov1.LabelValue(run.r.Name)
	obj.SetLabels(l)

	what := fmt.Sprintf("%s %s", it.GroupResource, qualified(obj.GetNamespace(), obj.GetName()))
	result, err := restoreaction.Run(run.c.cfg.Actions, it.GroupResource, restoreaction.Input{Item: obj, FromBackup: fromBackup, Restore: run.r, Volumes: run.volumes})
	if err != nil {
		fail(fmt.Sprintf("restoring %s: %v", what, err))
		return
	}
	if result.Skip {
		// Not an item the restore has to write: out of the total.
		run.log.Item("Skipped", "item", what, "reason", result.Reason)
		run.record(it.GroupResource, obj.GetNamespace(), obj.GetName(), velerov1.PreviewSkip, result.Reason, nil)
		run.count.total.Add(-1)
		return
	}
	if res.Namespaced {
		if err := run.ensureNamespace(ctx, obj.GetNamespace()); err != nil {
			fail(fmt.Sprintf("restoring %s: %v", what, err))
			return
		}
	}
	writer, serverWrites := run.target, false
	if run.forUser() && it.GroupResource == snapshotContentsGR {
		vouched, err := run.vouchedContent(ctx, obj)
		if err != nil {
			fail(fmt.Sprintf("not restoring %s: %v", what, err))
			return
		}
		// Vouched for: the server writes it, as made from what it kept
		// (snapshots.go), without a status.
		obj, hasStatus, serverWrites = vouched, false, true
		writer = run.writes(run.c.cfg.Target.Dynamic)
	}
	gvr := schema.GroupVersionResource{Group: res.GVR.Group, Version: it.Version, Resource: res.GVR.Resource}
	client := writer.Resource(gvr)
	var ri = client.Namespace(obj.GetNamespace())
	if !res.Namespaced {
		ri = client.Namespace("")
	}
	created, err := ri.Create(ctx, obj, metav1.CreateOptions{})
	if (err == nil || apierrors.IsAlreadyExists(err)) && it.GroupResource == crdGroupResource {
		run.mu.Lock()
		run.crds = append(run.crds, obj.GetName())
		run.mu.Unlock()
	}
	if err != nil && run.notCheckable(err, obj.GetNamespace()) {
		run.recordUncheckable(it.GroupResource, obj)
		run.count.restored.Add(1)
		return
	}
	switch {
	case err == nil:
		run.log.Item("Restored", "item", what)
		run.record(it.GroupResource, obj.GetNamespace(), obj.GetName(), velerov1.PreviewCreate, "", created)
		if run.preview != nil && items.IsNamespaces(res) {
			run.preview.namespaceCreated(obj.GetName())
		}
		run.addDependent(gvr, obj.GetNamespace(), obj.GetName(), owners)
		if it.GroupResource == "persistentvolumeclaims" {
			run.recordMoved(fromBackup, obj)
		}
		if hasStatus {
			created.Object["status"] = status
			if _, err := ri.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
				run.log.Warning(namespace, scope, fmt.Sprintf("restoring the status of %s: %v", what, err))
			}
		}
	case apierrors.IsAlreadyExists(err):
		existing, getErr := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if getErr != nil {
			fail(fmt.Sprintf("%s exists but could not be read: %v", what, getErr))
			return
		}
		if it.GroupResource == "persistentvolumes" {
			existing = run.freeStaleClaimRef(ctx, ri, existing, obj)
		}
		if same(existing, obj) {
			run.log.Item("Already exists, unchanged", "item", what)
			run.record(it.GroupResource, obj.GetNamespace(), obj.GetName(), velerov1.PreviewSkip, "already exists, unchanged", nil)
			break
		}
		if run.r.Spec.ExistingResourcePolicy != velerov1.PolicyTypeUpdate || serverWrites {
			run.log.Warning(namespace, scope, fmt.Sprintf("could not restore, %s already exists. Warning: the in-cluster version is different than the backed-up version", what))
			run.record(it.GroupResource, obj.GetNamespace(), obj.GetName(), velerov1.PreviewSkip,
				"already exists, different from the backed-up version (existingResourcePolicy: "+string(run.r.Spec.ExistingResourcePolicy)+")", nil)
			return
		}
		obj.SetResourceVersion(existing.GetResourceVersion())
		obj.SetUID(existing.GetUID())
		updated, err := ri.Update(ctx, obj, metav1.UpdateOptions{})
		if err != nil {
			run.log.Warning(namespace, scope, fmt.Sprintf("existingResourcePolicy update: updating %s: %v", what, err))
			run.record(it.GroupResource, obj.GetNamespace(), obj.GetName(), velerov1.PreviewRefuse, "existingResourcePolicy update: "+err.Error(), nil)
			return
		}
		run.log.Item("Updated to the backed-up version (existingResourcePolicy: update)", "item", what)
		run.record(it.GroupResource, obj.GetNamespace(), obj.GetName(), velerov1.PreviewUpdate, "", updated)
		run.addDependent(gvr, obj.GetNamespace(), obj.GetName(), owners)
	case apierrors.IsForbidden(err) && run.as != "":
		// A restore for a user writes what that user may write; what it
		// may not is left out and said, not counted as an error.
		msg := fmt.Sprintf("not restored: %s may not write %s (the restore writes with its rights)", run.as, what)
		run.log.Warning(namespace, scope, msg)
		run.record(it.GroupResource, obj.GetNamespace(), obj.GetName(), velerov1.PreviewRefuse, msg, nil)
		return
	default:
		fail(fmt.Sprintf("restoring %s: %v", what, err))
		return
	}
	run.count.restored.Add(1)
}

// freeStaleClaimRef: a volume that outlived its claim (the namespace was
// deleted; reclaim policy Retain) still names the old claim's UID, so the
// volume controller would never bind it to the restored claim. When the
// live volume names the claim the restore brings back and that claim does
// not exist, the old UID is removed from the volume's claim reference, as
// the restored item has it: the restored claim binds to it again. It
// returns the volume as it is now.
func (run *restoreRun) freeStaleClaimRef(ctx context.Context, ri dynamic.ResourceInterface, existing, restored *unstructured.Unstructured) *unstructured.Unstructured {
	live, _, _ := unstructured.NestedStringMap(existing.Object, "spec", "claimRef")
	want, _, _ := unstructured.NestedStringMap(restored.Object, "spec", "claimRef")
	if live["uid"] == "" || live["namespace"] != want["namespace"] || live["name"] != want["name"] {
		return existing
	}
	claims := run.target.Resource(schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"})
	if _, err := claims.Namespace(live["namespace"]).Get(ctx, live["name"], metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return existing
	}
	patch := []byte(`{"spec":{"claimRef":{"uid":null,"resourceVersion":null}}}`)
	freed, err := ri.Patch(ctx, existing.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		run.log.Warning("", items.ScopeCluster, fmt.Sprintf("freeing the claim reference of persistentvolume %s for the restored claim: %v", existing.GetName(), err))
		return existing
	}
	run.log.Info("Volume freed for its restored claim", "persistentvolume", existing.GetName(), "claim", live["namespace"]+"/"+live["name"])
	return freed
}

// addDependent records a written item whose backed-up version had owner
// references refs, for relinkOwners.
func (run *restoreRun) addDependent(gvr schema.GroupVersionResource, namespace, name string, refs []metav1.OwnerReference) {
	if len(refs) > 0 {
		run.mu.Lock()
		run.dependents = append(run.dependents, dependent{gvr: gvr, namespace: namespace, name: name, refs: refs})
		run.mu.Unlock()
	}
}

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// resetMetadata drops what the target cluster assigns, as Velero does.
func resetMetadata(obj *unstructured.Unstructured) {
	for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
		"deletionGracePeriodSeconds", "selfLink", "managedFields", "ownerReferences", "generateName"} {
		unstructured.RemoveNestedField(obj.Object, "metadata", f)
	}
}

// same reports whether the object in the cluster equals the one to
// restore, ignoring what the cluster assigns and the restore labels.
func same(existing, restored *unstructured.Unstructured) bool {
	a, b := existing.DeepCopy(), restored.DeepCopy()
	for _, o := range []*unstructured.Unstructured{a, b} {
		resetMetadata(o)
		unstructured.RemoveNestedField(o.Object, "status")
		l := o.GetLabels()
		delete(l, BackupNameLabel)
		delete(l, RestoreNameLabel)
		if len(l) == 0 {
			l = nil
		}
		o.SetLabels(l)
		if len(o.GetAnnotations()) == 0 {
			o.SetAnnotations(nil)
		}
	}
	return apiequality.Semantic.DeepEqual(a.Object, b.Object)
}
