package restore

// The CSI snapshot contents of a restore for a user. Such a restore (a
// tenant's) writes with that user's rights and takes no cluster-scoped
// item; but a claim backed up with a CSI snapshot comes back from it only
// through a VolumeSnapshotContent, which is cluster-scoped and names the
// driver's snapshot by its handle: whoever writes one reaches any snapshot
// of the driver, another tenant's too. So the restore takes the contents
// of the VolumeSnapshots it restores and writes them with the server's
// rights, but only a content its backup vouches for: one of the contents
// the backup's snapshots left in the cluster (labelled with the Backup's
// UID, which the server assigned) has the same driver and handle. The
// handle in the tarball is what a tenant can rewrite (in its own bucket,
// or a backup synced from it); the Backup's UID and the contents the
// server kept are not. The content written is made from the kept one:
// nothing else of the tarball's (annotations such as
// snapshot.storage.kubernetes.io/allow-volume-mode-change, finalizers,
// its status) is written with the server's rights, and an existing content
// is never updated for it. This rests on tenants not writing the status
// of their VolumeSnapshots (the backup keeps the content its snapshot's
// status names).

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/archive"
)

const (
	snapshotContentsGR = "volumesnapshotcontents.snapshot.storage.k8s.io"
	snapshotsGR        = "volumesnapshots.snapshot.storage.k8s.io"
)

var snapshotContentsGVR = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotcontents"}

// forUser reports whether the restore is for a user (writes with that
// user's rights).
func (run *restoreRun) forUser() bool { return run.as != "" }

// userContent reports whether a restore for a user takes a backed-up
// VolumeSnapshotContent: the content of a VolumeSnapshot of a namespace
// it restores, when it restores VolumeSnapshots and does not exclude
// contents (read as the restore action reads it; vouchedContent checks the
// namespace again on what the server keeps).
func (run *restoreRun) userContent(it *archive.Item) bool {
	if contents, ok := run.pass.byGR[snapshotContentsGR]; !ok || !run.pass.excluded.IncludesResource(contents) {
		return false
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(it.Data); err != nil {
		return false
	}
	ns, _, _ := unstructured.NestedString(obj.Object, "spec", "volumeSnapshotRef", "namespace")
	if ns == "" || !run.pass.filter.IncludesNamespace(ns) {
		return false
	}
	snapshots, ok := run.pass.byGR[snapshotsGR]
	return ok && run.pass.filter.IncludesResource(snapshots)
}

// vouchedContent is the content a restore for a user writes for restored
// (the restore action's pre-provisioned content of a driver's snapshot):
// made here from what the server kept, never from the tarball's fields. A
// content the backup's snapshots left in the cluster (labelled with the
// Backup's UID, not being deleted) must have restored's driver and handle,
// and be of a VolumeSnapshot of a namespace the restore takes, which
// restored's reference names as the restore maps it. The result holds the
// name, the restore's labels and the spec a pre-provisioned content needs
// (the kept content's source volume mode): no annotation, finalizer or
// status of the tarball's.
func (run *restoreRun) vouchedContent(ctx context.Context, restored *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	handle, _, _ := unstructured.NestedString(restored.Object, "spec", "source", "snapshotHandle")
	driver, _, _ := unstructured.NestedString(restored.Object, "spec", "driver")
	ref, _, _ := unstructured.NestedStringMap(restored.Object, "spec", "volumeSnapshotRef")
	kept, err := run.c.cfg.Target.Dynamic.Resource(snapshotContentsGVR).List(ctx,
		metav1.ListOptions{LabelSelector: velerov1.BackupUIDSelector(run.backup.UID)})
	if err != nil {
		return nil, fmt.Errorf("listing the snapshot contents backup %s kept: %w", run.backup.Name, err)
	}
	for _, k := range kept.Items {
		h, _, _ := unstructured.NestedString(k.Object, "status", "snapshotHandle")
		d, _, _ := unstructured.NestedString(k.Object, "spec", "driver")
		if handle == "" || h != handle || d != driver || k.GetDeletionTimestamp() != nil {
			continue
		}
		keptNS, _, _ := unstructured.NestedString(k.Object, "spec", "volumeSnapshotRef", "namespace")
		if !run.pass.filter.IncludesNamespace(keptNS) || ref["namespace"] != run.mapNamespace(keptNS) {
			return nil, fmt.Errorf("its snapshot is backup %s's snapshot of namespace %s, which this restore does not restore into %s", run.backup.Name, keptNS, ref["namespace"])
		}
		spec := map[string]any{
			"driver": driver, "deletionPolicy": "Retain", "source": map[string]any{"snapshotHandle": handle},
			"volumeSnapshotRef": map[string]any{"apiVersion": ref["apiVersion"], "kind": ref["kind"], "namespace": ref["namespace"], "name": ref["name"]},
		}
		if mode, ok, _ := unstructured.NestedString(k.Object, "spec", "sourceVolumeMode"); ok && mode != "" {
			spec["sourceVolumeMode"] = mode
		}
		out := &unstructured.Unstructured{Object: map[string]any{"apiVersion": restored.GetAPIVersion(), "kind": restored.GetKind(), "spec": spec}}
		out.SetName(restored.GetName())
		out.SetLabels(map[string]string{BackupNameLabel: velerov1.LabelValue(run.backup.Name), RestoreNameLabel: velerov1.LabelValue(run.r.Name)})
		return out, nil
	}
	return nil, fmt.Errorf("its snapshot (driver %q, handle %q) is none of those backup %s made in this cluster: a restore for a user brings back only those",
		driver, handle, run.backup.Name)
}
