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
// server kept are not.

import (
	"context"
	"encoding/json"
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
// it restores, when it restores VolumeSnapshots.
func (run *restoreRun) userContent(it *archive.Item) bool {
	var obj struct {
		Spec struct {
			VolumeSnapshotRef struct {
				Namespace string `json:"namespace"`
			} `json:"volumeSnapshotRef"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(it.Data, &obj); err != nil {
		return false
	}
	ns := obj.Spec.VolumeSnapshotRef.Namespace
	if ns == "" || !run.pass.filter.IncludesNamespace(ns) {
		return false
	}
	snapshots, ok := run.pass.byGR[snapshotsGR]
	return ok && run.pass.filter.IncludesResource(snapshots)
}

// vouch checks a content a restore for a user is about to write (as the
// restore action made it: a pre-provisioned content of a driver's
// snapshot): the backup kept a content of that driver and handle.
func (run *restoreRun) vouch(ctx context.Context, content *unstructured.Unstructured) error {
	handle, _, _ := unstructured.NestedString(content.Object, "spec", "source", "snapshotHandle")
	driver, _, _ := unstructured.NestedString(content.Object, "spec", "driver")
	kept, err := run.c.cfg.Target.Dynamic.Resource(snapshotContentsGVR).List(ctx,
		metav1.ListOptions{LabelSelector: velerov1.BackupUIDLabel + "=" + string(run.backup.UID)})
	if err != nil {
		return fmt.Errorf("listing the snapshot contents backup %s kept: %w", run.backup.Name, err)
	}
	for _, k := range kept.Items {
		h, _, _ := unstructured.NestedString(k.Object, "status", "snapshotHandle")
		d, _, _ := unstructured.NestedString(k.Object, "spec", "driver")
		if handle != "" && h == handle && d == driver {
			return nil
		}
	}
	return fmt.Errorf("its snapshot (driver %q, handle %q) is none of those backup %s made in this cluster: a restore for a user brings back only those",
		driver, handle, run.backup.Name)
}
