package csisnapshot

import (
	"context"
	"fmt"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/backup"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/volumeinfo"
)

// FinalItems implements backup.OperationFinisher: the volume's entry in
// the volume info file, and for a snapshot ready to use the
// VolumeSnapshot, its content (labelled with the backup, in the cluster
// too: a restart finds it by the label) and its class, as the tarball
// holds them.
func (a Action) FinalItems(ctx context.Context, b *velerov1.Backup, op *backup.BackupOperation) (backup.FinalItems, error) {
	id := op.Spec.ResourceIdentifier
	if op.Status.Phase == backup.OperationPhaseFailed && a.Recorder != nil {
		a.Recorder.Eventf(b, corev1.EventTypeWarning, FailedReason, "CSI snapshot %s/%s failed: %s", id.Namespace, id.Name, op.Status.Error)
	}
	vs, err := a.own(ctx, b, id.Namespace, id.Name)
	if err != nil {
		return backup.FinalItems{}, err
	}
	vol := &volumeinfo.BackupVolumeInfo{
		PVCNamespace: id.Namespace, BackupMethod: volumeinfo.MethodCSISnapshot, PreserveLocalSnapshot: true,
		CompletionTimestamp: op.Status.Updated, Result: volumeinfo.ResultFailed,
		CSISnapshotInfo: &volumeinfo.CSISnapshotInfo{OperationID: op.Spec.OperationID},
	}
	if vs == nil {
		if op.Status.Phase == backup.OperationPhaseCompleted {
			return backup.FinalItems{Volume: vol}, fmt.Errorf("VolumeSnapshot %s/%s is gone", id.Namespace, id.Name)
		}
		return backup.FinalItems{Volume: vol}, nil
	}
	if vs.Spec.Source.PersistentVolumeClaimName != nil {
		vol.PVCName = *vs.Spec.Source.PersistentVolumeClaimName
		a.describeVolume(ctx, vol)
	}
	var content *snapshotv1.VolumeSnapshotContent
	if st := vs.Status; st != nil {
		vol.StartTimestamp = st.CreationTime
		vol.CSISnapshotInfo.ReadyToUse = st.ReadyToUse
		if st.RestoreSize != nil {
			vol.CSISnapshotInfo.Size = st.RestoreSize.Value()
		}
		if st.BoundVolumeSnapshotContentName != nil {
			vol.CSISnapshotInfo.VSCName = *st.BoundVolumeSnapshotContentName
			content, err = a.Snapshots.SnapshotV1().VolumeSnapshotContents().Get(ctx, *st.BoundVolumeSnapshotContentName, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return backup.FinalItems{Volume: vol}, fmt.Errorf("reading VolumeSnapshotContent %s: %w", *st.BoundVolumeSnapshotContentName, err)
			}
			if apierrors.IsNotFound(err) {
				content = nil
			}
		}
	}
	if content != nil {
		vol.CSISnapshotInfo.Driver = content.Spec.Driver
		if cs := content.Status; cs != nil && cs.SnapshotHandle != nil {
			vol.CSISnapshotInfo.SnapshotHandle = *cs.SnapshotHandle
		}
	}
	if op.Status.Phase != backup.OperationPhaseCompleted {
		return backup.FinalItems{Volume: vol}, nil
	}
	if content == nil || vol.CSISnapshotInfo.SnapshotHandle == "" {
		return backup.FinalItems{Volume: vol}, fmt.Errorf("VolumeSnapshot %s/%s has no content with a snapshot handle", id.Namespace, id.Name)
	}
	vol.Result = volumeinfo.ResultSucceeded

	// The content carries the backup's name: a backup's deletion finds its
	// contents in the tarball by it (Velero's label), and this server's
	// next start finds them in the cluster by the UID.
	labelled, err := a.labelContent(ctx, b, content)
	if err != nil {
		return backup.FinalItems{Volume: vol}, err
	}
	snapshot := vs.DeepCopy()
	setAnnotation(snapshot, DeletionPolicyAnnotation, string(labelled.Spec.DeletionPolicy))
	setAnnotation(snapshot, HandleAnnotation, vol.CSISnapshotInfo.SnapshotHandle)
	setAnnotation(snapshot, DriverAnnotation, labelled.Spec.Driver)
	if cs := labelled.Status; cs != nil && cs.RestoreSize != nil {
		setAnnotation(snapshot, RestoreSizeAnnotation, resource.NewQuantity(*cs.RestoreSize, resource.BinarySI).String())
	}
	setAnnotation(snapshot, MustIncludeAnnotation, "true")

	out := backup.FinalItems{Volume: vol}
	for _, it := range []struct {
		r   items.Resource
		obj runtime.Object
	}{{volumeSnapshotsResource, snapshot}, {volumeSnapshotContentsResource, labelled}} {
		u, err := toItem(it.r, it.obj)
		if err != nil {
			return out, err
		}
		out.Items = append(out.Items, backup.FinalItem{Resource: it.r, Object: u})
	}
	if class := vs.Spec.VolumeSnapshotClassName; class != nil {
		if c, err := a.Snapshots.SnapshotV1().VolumeSnapshotClasses().Get(ctx, *class, metav1.GetOptions{}); err == nil {
			if u, err := toItem(volumeSnapshotClassesResource, c); err == nil {
				out.Items = append(out.Items, backup.FinalItem{Resource: volumeSnapshotClassesResource, Object: u})
			}
		}
	}
	op.Spec.PostOperationItems = []backup.ResourceIdentifier{
		{Group: SnapshotGroup, Resource: VolumeSnapshots, Namespace: id.Namespace, Name: id.Name},
		{Group: SnapshotGroup, Resource: VolumeSnapshotContents, Name: labelled.Name},
	}
	return out, nil
}

// describeVolume fills in the claim's volume and what of it a volume made
// from the snapshot keeps (best effort: the claim may be gone).
func (a Action) describeVolume(ctx context.Context, vol *volumeinfo.BackupVolumeInfo) {
	pvc, err := a.Kube.CoreV1().PersistentVolumeClaims(vol.PVCNamespace).Get(ctx, vol.PVCName, metav1.GetOptions{})
	if err != nil || pvc.Spec.VolumeName == "" {
		return
	}
	vol.PVName = pvc.Spec.VolumeName
	pv, err := a.Kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return
	}
	vol.PVInfo = &volumeinfo.PVInfo{ReclaimPolicy: string(pv.Spec.PersistentVolumeReclaimPolicy), Labels: pv.Labels}
}

// labelContent labels a content with the backup's name and UID.
func (a Action) labelContent(ctx context.Context, b *velerov1.Backup, content *snapshotv1.VolumeSnapshotContent) (*snapshotv1.VolumeSnapshotContent, error) {
	name, uid := velerov1.LabelValue(b.Name), string(b.UID)
	if content.Labels[velerov1.BackupNameLabel] == name && content.Labels[velerov1.BackupUIDLabel] == uid {
		return content, nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q,%q:%q}}}`, velerov1.BackupNameLabel, name, velerov1.BackupUIDLabel, uid)
	out, err := a.Snapshots.SnapshotV1().VolumeSnapshotContents().Patch(ctx, content.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("labelling VolumeSnapshotContent %s with its backup: %w", content.Name, err)
	}
	return out, nil
}

// Release implements backup.OperationFinisher: the backup holds the
// snapshot now. Its content is kept with deletion policy Retain, labelled
// with the backup (FinalItems): the server's record of the snapshots the
// backup owns, cluster-scoped, which no tenant writes; the VolumeSnapshot
// leaves the claim's namespace. Deleting the backup deletes the content
// (DeleteBackupSnapshots), and with it the driver's snapshot.
func (a Action) Release(ctx context.Context, b *velerov1.Backup, op *backup.BackupOperation) error {
	id := op.Spec.ResourceIdentifier
	vs, err := a.own(ctx, b, id.Namespace, id.Name)
	if err != nil || vs == nil {
		return err
	}
	var kept *snapshotv1.VolumeSnapshotContent
	if st := vs.Status; st != nil && st.BoundVolumeSnapshotContentName != nil {
		if err := a.setDeletionPolicy(ctx, *st.BoundVolumeSnapshotContentName, snapshotv1.VolumeSnapshotContentRetain); err != nil {
			return err
		}
		kept, err = a.Snapshots.SnapshotV1().VolumeSnapshotContents().Get(ctx, *st.BoundVolumeSnapshotContentName, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading VolumeSnapshotContent %s: %w", *st.BoundVolumeSnapshotContentName, err)
		}
	}
	err = a.Snapshots.SnapshotV1().VolumeSnapshots(id.Namespace).Delete(ctx, id.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &vs.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting VolumeSnapshot %s/%s: %w", id.Namespace, id.Name, err)
	}
	if kept == nil || kept.Status == nil || kept.Status.SnapshotHandle == nil {
		return nil
	}
	return a.keepContent(ctx, vs, kept)
}

// ReleaseTimeout bounds how long Release waits for a VolumeSnapshot it
// deleted to go.
const ReleaseTimeout = 2 * time.Minute

// keepContent makes sure the content of a released snapshot outlives its
// VolumeSnapshot. The snapshot-controller decides whether deleting a
// VolumeSnapshot deletes its content from its informer's copy of the
// content: one that has not seen the deletion policy Retain yet (a busy
// controller) deletes the content, and the CSI sidecar, which reads
// Retain, then removes it without deleting the driver's snapshot: a
// snapshot nothing records. Once the VolumeSnapshot is gone, a content
// deleted so is made again, pre-provisioned from the snapshot's handle
// ("<content>-kept", Retain, the backup's labels), which the backup's
// deletion deletes with the snapshot as any of its contents.
func (a Action) keepContent(ctx context.Context, vs *snapshotv1.VolumeSnapshot, content *snapshotv1.VolumeSnapshotContent) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, ReleaseTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := a.Snapshots.SnapshotV1().VolumeSnapshots(vs.Namespace).Get(ctx, vs.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for VolumeSnapshot %s/%s to go: %w", vs.Namespace, vs.Name, err)
	}
	live, err := a.Snapshots.SnapshotV1().VolumeSnapshotContents().Get(ctx, content.Name, metav1.GetOptions{})
	switch {
	case err == nil && live.DeletionTimestamp == nil:
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("reading VolumeSnapshotContent %s: %w", content.Name, err)
	}
	again := &snapshotv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: content.Name + "-kept", Labels: content.Labels},
		Spec: snapshotv1.VolumeSnapshotContentSpec{
			DeletionPolicy:          snapshotv1.VolumeSnapshotContentRetain,
			Driver:                  content.Spec.Driver,
			Source:                  snapshotv1.VolumeSnapshotContentSource{SnapshotHandle: content.Status.SnapshotHandle},
			VolumeSnapshotClassName: content.Spec.VolumeSnapshotClassName,
			SourceVolumeMode:        content.Spec.SourceVolumeMode,
			// The VolumeSnapshot is gone: no UID, nothing binds it.
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: vs.Namespace, Name: vs.Name},
		},
	}
	if _, err := a.Snapshots.SnapshotV1().VolumeSnapshotContents().Create(ctx, again, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("keeping the snapshot of VolumeSnapshotContent %s, which the snapshot-controller deleted with its VolumeSnapshot: %w", content.Name, err)
	}
	return nil
}

// DeleteBackupSnapshots deletes the snapshots a deleted backup took: its
// contents (labelled with its UID) get deletion policy Delete and are
// deleted; the CSI sidecar then deletes the driver's snapshots. Its
// VolumeSnapshots still in the claims' namespaces (a backup that failed
// before it released them, and whose restart could not delete them) are
// discarded too. It returns how many it deleted; a cluster that serves no
// snapshots has none.
func (a Action) DeleteBackupSnapshots(ctx context.Context, b *velerov1.Backup) (int, error) {
	left, err := a.StartedOperations(ctx, b)
	if err != nil {
		return 0, err
	}
	for _, op := range left {
		if err := a.discard(ctx, b, op.Resource.Namespace, op.Resource.Name); err != nil {
			return 0, err
		}
	}
	list, err := a.Snapshots.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{
		LabelSelector: velerov1.BackupUIDSelector(b.UID)})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("listing the VolumeSnapshotContents of backup %s: %w", b.Name, err)
	}
	n := 0
	for _, content := range list.Items {
		if content.DeletionTimestamp != nil {
			continue
		}
		if err := a.setDeletionPolicy(ctx, content.Name, snapshotv1.VolumeSnapshotContentDelete); err != nil {
			return n, err
		}
		err := a.Snapshots.SnapshotV1().VolumeSnapshotContents().Delete(ctx, content.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &content.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return n, fmt.Errorf("deleting VolumeSnapshotContent %s: %w", content.Name, err)
		}
		n++
	}
	return n, nil
}

// toItem is an object as the tarball holds it: with its kind, without
// managed fields.
func toItem(r items.Resource, obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding a %s: %w", r.Kind, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(r.GVR.GroupVersion().String())
	u.SetKind(r.Kind)
	u.SetManagedFields(nil)
	return u, nil
}
