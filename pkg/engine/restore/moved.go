package restore

// The claims whose snapshot data the backup moved into the storage
// location (spec.snapshotMoveData). Each such claim is restored anew,
// selecting only a volume labelled for it (restoreaction.ClaimFromMovedData);
// once every item is restored, the restore makes a DataDownload of each
// (Velero's, in the admin namespace: the claim, the kopia snapshot, the
// repository's location and namespace) and waits for it: the data-mover
// engine of a node writes the snapshot into a volume of the claim's class
// and hands the volume to the claim. Each is one item operation of the
// restore (status.restoreItemOperations*). The repository is the one of
// the claim's namespace in the backup (never a namespace a bucket's file
// names), and the snapshot is the one the backup's volume info names.

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
)

// movedClaim is a restored claim whose data the data mover writes.
type movedClaim struct {
	// sourceNamespace and name are the claim's in the backup, uid its UID
	// there; namespace is where it was restored.
	sourceNamespace, name, namespace string
	uid                              types.UID
	snapshotID                       string
	size                             int64
}

// recordMoved notes a claim written with the moved-data selector.
func (run *restoreRun) recordMoved(fromBackup, written *unstructured.Unstructured) {
	if _, ok, _ := unstructured.NestedString(written.Object, "spec", "selector", "matchLabels", velerov1.DynamicPVRestoreLabel); !ok {
		return
	}
	v, ok := run.volumes.Moved(fromBackup.GetNamespace(), fromBackup.GetName())
	if !ok {
		return
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	run.moved = append(run.moved, movedClaim{sourceNamespace: fromBackup.GetNamespace(), name: fromBackup.GetName(), namespace: written.GetNamespace(),
		uid: fromBackup.GetUID(), snapshotID: v.SnapshotDataMovementInfo.SnapshotHandle, size: v.SnapshotDataMovementInfo.Size})
}

// dataDownloadPoll is how often a DataDownload is read while the restore
// waits for it.
const dataDownloadPoll = time.Second

// defaultDataDownloadTimeout bounds the wait for a data mover to take a
// DataDownload without spec.operationTimeout (Velero's default
// csiSnapshotTimeout).
const defaultDataDownloadTimeout = 10 * time.Minute

// restoreMovedData makes the DataDownload of each moved claim and waits
// for them all.
func (run *restoreRun) restoreMovedData(ctx context.Context) error {
	var made []*velerov2alpha1.DataDownload
	for _, m := range run.moved {
		run.count.opsAttempted.Add(1)
		dd, err := run.makeDataDownload(ctx, m)
		if err != nil {
			run.count.opsFailed.Add(1)
			run.log.Error(m.namespace, "", fmt.Sprintf("the data of PVC %s/%s: %v", m.namespace, m.name, err))
			continue
		}
		run.log.Info("Restoring the claim's data from the storage location", "persistentVolumeClaim", m.namespace+"/"+m.name,
			"dataDownload", dd.Name, "snapshot", m.snapshotID)
		made = append(made, dd)
	}
	for _, dd := range made {
		if err := run.waitDataDownload(ctx, dd); err != nil {
			return err
		}
	}
	return nil
}

// makeDataDownload makes a moved claim's DataDownload, as Velero's CSI PVC
// restorer does (one made already by this restore, before a restart, is
// used).
func (run *restoreRun) makeDataDownload(ctx context.Context, m movedClaim) (*velerov2alpha1.DataDownload, error) {
	client := run.c.cfg.Client.VeleroV2alpha1().DataDownloads(run.r.Namespace)
	id := velerov1.LabelValue(string(velerov1.AsyncOperationIDPrefixDataDownload) + string(run.r.UID) + "." + string(m.uid))
	existing, err := client.List(ctx, metav1.ListOptions{LabelSelector: velerov1.AsyncOperationIDLabel + "=" + id})
	if err != nil {
		return nil, fmt.Errorf("listing DataDownloads: %w", err)
	}
	for i := range existing.Items {
		if existing.Items[i].Labels[velerov1.RestoreUIDLabel] == string(run.r.UID) {
			return &existing.Items[i], nil
		}
	}
	dd := &velerov2alpha1.DataDownload{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: run.r.Namespace, GenerateName: run.r.Name + "-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: velerov1.SchemeGroupVersion.String(), Kind: "Restore", Name: run.r.Name, UID: run.r.UID, Controller: ptr.To(true)}},
			Labels: map[string]string{
				velerov1.RestoreNameLabel:      velerov1.LabelValue(run.r.Name),
				velerov1.RestoreUIDLabel:       string(run.r.UID),
				velerov1.AsyncOperationIDLabel: id,
			},
		},
		Spec: velerov2alpha1.DataDownloadSpec{
			TargetVolume:          velerov2alpha1.TargetVolumeSpec{PVC: m.name, Namespace: m.namespace},
			BackupStorageLocation: run.backup.Spec.StorageLocation, DataMover: run.backup.Spec.DataMover,
			SnapshotID: m.snapshotID, SourceNamespace: m.sourceNamespace, SnapshotSize: m.size,
			OperationTimeout: run.backup.Spec.CSISnapshotTimeout,
		},
	}
	created, err := client.Create(ctx, dd, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating its DataDownload: %w", err)
	}
	return created, nil
}

// waitDataDownload waits until a DataDownload has ended and counts it; a
// restore that ends first (deleted) cancels it.
func (run *restoreRun) waitDataDownload(ctx context.Context, dd *velerov2alpha1.DataDownload) error {
	client := run.c.cfg.Client.VeleroV2alpha1().DataDownloads(dd.Namespace)
	what := fmt.Sprintf("the data of PVC %s/%s (DataDownload %s)", dd.Spec.TargetVolume.Namespace, dd.Spec.TargetVolume.PVC, dd.Name)
	cancel := func() {
		patch := []byte(`{"spec":{"cancel":true}}`)
		if _, cerr := client.Patch(context.WithoutCancel(ctx), dd.Name, types.MergePatchType, patch, metav1.PatchOptions{}); cerr != nil && !apierrors.IsNotFound(cerr) {
			run.log.Warning(dd.Spec.TargetVolume.Namespace, "", fmt.Sprintf("cancelling %s: %v", what, cerr))
		}
	}
	// A DataDownload no data mover takes (no node reaches the class's
	// driver) is given up after the operation timeout.
	timeout := dd.Spec.OperationTimeout.Duration
	if timeout <= 0 {
		timeout = defaultDataDownloadTimeout
	}
	var got *velerov2alpha1.DataDownload
	untaken := false
	err := wait.PollUntilContextCancel(ctx, dataDownloadPoll, true, func(ctx context.Context) (bool, error) {
		var err error
		got, err = client.Get(ctx, dd.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, nil
		}
		if got.Status.AcceptedByNode == "" && run.c.cfg.Clock.Since(got.CreationTimestamp.Time) > timeout {
			untaken = true
			return true, nil
		}
		return got.Status.Phase.Terminal(), nil
	})
	if err != nil {
		cancel()
		return err
	}
	switch {
	case untaken:
		cancel()
		run.count.opsFailed.Add(1)
		run.log.Error(dd.Spec.TargetVolume.Namespace, "", fmt.Sprintf("%s: no data mover took it within %s (no node's data mover reaches the driver of the claim's storage class)", what, timeout))
	case got == nil || got.Name == "":
		run.count.opsFailed.Add(1)
		run.log.Error(dd.Spec.TargetVolume.Namespace, "", what+": the DataDownload was deleted")
	case got.Status.Phase == velerov2alpha1.DataDownloadPhaseCompleted:
		run.count.opsCompleted.Add(1)
		run.log.Info("Restored the claim's data", "persistentVolumeClaim", dd.Spec.TargetVolume.Namespace+"/"+dd.Spec.TargetVolume.PVC,
			"dataDownload", dd.Name, "bytes", got.Status.Progress.TotalBytes)
	default:
		run.count.opsFailed.Add(1)
		run.log.Error(dd.Spec.TargetVolume.Namespace, "", fmt.Sprintf("%s: %s: %s", what, got.Status.Phase, got.Status.Message))
	}
	return nil
}
