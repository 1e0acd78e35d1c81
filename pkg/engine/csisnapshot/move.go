package csisnapshot

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/engine/backup"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	"github.com/backstop-io/backstop/pkg/volumeinfo"
)

// MoveName is the action of the claims whose snapshot's data is moved
// (Velero's CSI PVC action, which makes their DataUploads).
const MoveName = "velero.io/csi-pvc-backupper"

// Names of the data mover, as Velero records them.
const (
	// BuiltInDataMover is the data mover spec.datamover "" means.
	BuiltInDataMover = "velero"
	// UploaderKopia is the uploader of the built-in data mover.
	UploaderKopia = "kopia"
	// canceledMessage is the error of a cancelled DataUpload's operation.
	canceledMessage = "DataUpload is canceled"
)

// MoveAction is the backup engine's action for the claims of a backup
// that moves its snapshots' data (spec.snapshotMoveData), as Velero's CSI
// PVC action is with the built-in data mover (docs/datamover-reference.md,
// section 2): Start takes the claim's VolumeSnapshot as Action does and
// makes a DataUpload of it in the backup's namespace; the operation
// (Velero's ID du-<backup UID>.<claim UID>) follows the DataUpload, which
// the data-mover engine ends; cancelling it sets spec.cancel. The
// completed DataUpload goes into the tarball (a restore finds the kopia
// snapshot in it), the volume into the volume info file.
type MoveAction struct {
	Action
	// Client makes and reads the DataUploads (this server).
	Client versioned.Interface
}

var (
	_ backup.OperationFinisher = MoveAction{}
	_ backup.ResourceMaker     = MoveAction{}
	_ backup.OperationFinder   = MoveAction{}
)

// dataUploadsResource is the resource of DataUploads in the tarball.
var dataUploadsResource = items.Resource{GVR: velerov2alpha1.SchemeGroupVersion.WithResource("datauploads"), Kind: "DataUpload", Namespaced: true}

// Name implements backup.ItemAction.
func (MoveAction) Name() string { return MoveName }

// MadeResources implements backup.ResourceMaker: the backups' own
// DataUploads are added by FinalItems, not collected (a source served
// through the aggregator lists them).
func (MoveAction) MadeResources() []string { return []string{dataUploadsResource.GroupResource()} }

// DataUploadOperationID is Velero's operation ID of a claim's DataUpload.
func DataUploadOperationID(backupUID, claimUID types.UID) string {
	return velerov1.LabelValue(string(velerov1.AsyncOperationIDPrefixDataUpload) + string(backupUID) + "." + string(claimUID))
}

// Start implements backup.ItemAction: for a backup that moves data, the
// claim's snapshot and its DataUpload.
func (a MoveAction) Start(ctx context.Context, b *velerov1.Backup, item *unstructured.Unstructured) (backup.Started, error) {
	if !MovesData(b) {
		return backup.Started{}, nil
	}
	t, err := a.snapshotClaim(ctx, b, item)
	if err != nil || t.snapshot == nil {
		return t.skipped, err
	}
	id := DataUploadOperationID(b.UID, t.pvc.UID)
	du := &velerov2alpha1.DataUpload{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: b.Namespace, GenerateName: b.Name + "-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: velerov1.SchemeGroupVersion.String(), Kind: "Backup", Name: b.Name, UID: b.UID, Controller: ptr.To(true)}},
			Labels: map[string]string{
				velerov1.BackupNameLabel:       velerov1.LabelValue(b.Name),
				velerov1.BackupUIDLabel:        string(b.UID),
				velerov1.PVCUIDLabel:           string(t.pvc.UID),
				velerov1.AsyncOperationIDLabel: id,
			},
		},
		Spec: velerov2alpha1.DataUploadSpec{
			SnapshotType: velerov2alpha1.SnapshotTypeCSI,
			CSISnapshot: &velerov2alpha1.CSISnapshotSpec{VolumeSnapshot: t.snapshot.Name, StorageClass: ptr.Deref(t.pvc.Spec.StorageClassName, ""),
				Driver: t.pv.Spec.CSI.Driver, SnapshotClass: t.class},
			SourcePVC: t.pvc.Name, SourceNamespace: t.pvc.Namespace, DataMover: b.Spec.DataMover,
			BackupStorageLocation: b.Spec.StorageLocation, OperationTimeout: b.Spec.CSISnapshotTimeout,
		},
	}
	created, err := a.Client.VeleroV2alpha1().DataUploads(b.Namespace).Create(ctx, du, metav1.CreateOptions{})
	if err != nil {
		if derr := a.discard(ctx, b, t.snapshot.Namespace, t.snapshot.Name); derr != nil {
			err = fmt.Errorf("%w (and discarding its snapshot: %v)", err, derr)
		}
		return backup.Started{}, fmt.Errorf("creating the DataUpload of PVC %s/%s: %w", t.pvc.Namespace, t.pvc.Name, err)
	}
	setAnnotation(item, velerov1.DataUploadNameAnnotation, created.Namespace+"/"+created.Name)
	setAnnotation(item, MustIncludeAnnotation, "true")
	return backup.Started{OperationID: id, Modified: true, PostOperationItems: []backup.ResourceIdentifier{
		{Group: velerov1.GroupName, Resource: "datauploads", Namespace: created.Namespace, Name: created.Name}}}, nil
}

// dataUpload reads the DataUpload of an operation (by its label, in the
// backup's namespace); nil when there is none.
func (a MoveAction) dataUpload(ctx context.Context, b *velerov1.Backup, id string) (*velerov2alpha1.DataUpload, error) {
	list, err := a.Client.VeleroV2alpha1().DataUploads(b.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: velerov1.AsyncOperationIDLabel + "=" + id})
	if err != nil {
		return nil, fmt.Errorf("listing the DataUpload of operation %s: %w", id, err)
	}
	var own []*velerov2alpha1.DataUpload
	for i := range list.Items {
		if list.Items[i].Labels[velerov1.BackupUIDLabel] == string(b.UID) {
			own = append(own, &list.Items[i])
		}
	}
	switch len(own) {
	case 0:
		return nil, nil
	case 1:
		return own[0], nil
	}
	return nil, fmt.Errorf("operation %s has %d DataUploads", id, len(own))
}

// Progress implements backup.ItemAction: the DataUpload's, as Velero
// reports it.
func (a MoveAction) Progress(ctx context.Context, b *velerov1.Backup, id string) (backup.OperationProgress, error) {
	du, err := a.dataUpload(ctx, b, id)
	if err != nil {
		return backup.OperationProgress{}, err
	}
	if du == nil {
		return backup.OperationProgress{Completed: true, Err: "its DataUpload is gone"}, nil
	}
	st := du.Status
	if st.Phase == "" || st.Phase == velerov2alpha1.DataUploadPhaseNew {
		return backup.OperationProgress{}, nil
	}
	p := backup.OperationProgress{Description: string(st.Phase), OperationUnits: "Bytes",
		NCompleted: st.Progress.BytesDone, NTotal: st.Progress.TotalBytes}
	switch st.Phase {
	case velerov2alpha1.DataUploadPhaseCompleted:
		p.Completed = true
	case velerov2alpha1.DataUploadPhaseFailed:
		p.Completed, p.Err = true, st.Message
		if p.Err == "" {
			p.Err = "the DataUpload failed"
		}
	case velerov2alpha1.DataUploadPhaseCanceled:
		p.Completed, p.Err = true, canceledMessage
	}
	return p, nil
}

// Cancel implements backup.ItemAction: the DataUpload's spec.cancel is set
// (the data mover stops the upload and removes what it made), and the
// claim's snapshot, if no data mover has taken it yet, deleted.
func (a MoveAction) Cancel(ctx context.Context, b *velerov1.Backup, id string) error {
	du, err := a.dataUpload(ctx, b, id)
	if err != nil || du == nil {
		return err
	}
	return a.cancelAndDiscard(ctx, b, du)
}

// cancelAndDiscard cancels a DataUpload and deletes the claim's snapshot
// if it is still in the claim's namespace (a data mover that took it
// moved it out).
func (a MoveAction) cancelAndDiscard(ctx context.Context, b *velerov1.Backup, du *velerov2alpha1.DataUpload) error {
	if err := a.cancel(ctx, du); err != nil {
		return err
	}
	if s := du.Spec.CSISnapshot; s != nil && s.VolumeSnapshot != "" {
		return a.discard(ctx, b, du.Spec.SourceNamespace, s.VolumeSnapshot)
	}
	return nil
}

func (a MoveAction) cancel(ctx context.Context, du *velerov2alpha1.DataUpload) error {
	if du.Spec.Cancel || du.Status.Phase.Terminal() {
		return nil
	}
	_, err := a.Client.VeleroV2alpha1().DataUploads(du.Namespace).Patch(ctx, du.Name, types.MergePatchType, []byte(`{"spec":{"cancel":true}}`), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("cancelling DataUpload %s/%s: %w", du.Namespace, du.Name, err)
	}
	return nil
}

// Discard implements backup.OperationFinisher: the DataUpload is cancelled
// (the data mover removes what it made) and the claim's snapshot, if it
// is still there (no data mover took it), deleted.
func (a MoveAction) Discard(ctx context.Context, b *velerov1.Backup, op *backup.BackupOperation) error {
	du, err := a.dataUpload(ctx, b, op.Spec.OperationID)
	if err != nil || du == nil {
		return err
	}
	return a.cancelAndDiscard(ctx, b, du)
}

// Release implements backup.OperationFinisher: the data mover has removed
// the snapshot once the data was moved; nothing is left to let go of.
func (MoveAction) Release(context.Context, *velerov1.Backup, *backup.BackupOperation) error {
	return nil
}

// FinalItems implements backup.OperationFinisher: the volume's entry in
// the volume info file and, completed, the DataUpload in the tarball (a
// restore reads the kopia snapshot's ID from it).
func (a MoveAction) FinalItems(ctx context.Context, b *velerov1.Backup, op *backup.BackupOperation) (backup.FinalItems, error) {
	du, err := a.dataUpload(ctx, b, op.Spec.OperationID)
	if err != nil {
		return backup.FinalItems{}, err
	}
	id := op.Spec.ResourceIdentifier
	vol := &volumeinfo.BackupVolumeInfo{PVCNamespace: id.Namespace, PVCName: id.Name, BackupMethod: volumeinfo.MethodCSISnapshot,
		SnapshotDataMoved: true, Result: volumeinfo.ResultFailed,
		CSISnapshotInfo:          &volumeinfo.CSISnapshotInfo{SnapshotHandle: "unknown", VSCName: "unknown", OperationID: "unknown"},
		SnapshotDataMovementInfo: &volumeinfo.SnapshotDataMovementInfo{DataMover: BuiltInDataMover, UploaderType: UploaderKopia, OperationID: op.Spec.OperationID}}
	a.describeVolume(ctx, vol)
	if du == nil {
		if op.Status.Phase == backup.OperationPhaseCompleted {
			return backup.FinalItems{Volume: vol}, fmt.Errorf("the DataUpload of operation %s is gone", op.Spec.OperationID)
		}
		return backup.FinalItems{Volume: vol}, nil
	}
	if du.Spec.DataMover != "" {
		vol.SnapshotDataMovementInfo.DataMover = du.Spec.DataMover
	}
	if s := du.Spec.CSISnapshot; s != nil {
		vol.CSISnapshotInfo.Driver = s.Driver
		vol.SnapshotDataMovementInfo.RetainedSnapshot = s.VolumeSnapshot
	}
	st := du.Status
	vol.StartTimestamp, vol.CompletionTimestamp = st.StartTimestamp, st.CompletionTimestamp
	m := vol.SnapshotDataMovementInfo
	m.SnapshotHandle, m.Size, m.IncrementalSize, m.Phase = st.SnapshotID, st.Progress.TotalBytes, st.IncrementalBytes, string(st.Phase)
	if st.Phase != velerov2alpha1.DataUploadPhaseCompleted || op.Status.Phase != backup.OperationPhaseCompleted {
		return backup.FinalItems{Volume: vol}, nil
	}
	vol.Result = volumeinfo.ResultSucceeded
	u, err := toItem(dataUploadsResource, du)
	if err != nil {
		return backup.FinalItems{Volume: vol}, err
	}
	return backup.FinalItems{Volume: vol, Items: []backup.FinalItem{{Resource: dataUploadsResource, Object: u}}}, nil
}

// StartedOperations implements backup.OperationFinder: the backup's
// DataUploads (labelled with its UID), each the operation of its claim.
func (a MoveAction) StartedOperations(ctx context.Context, b *velerov1.Backup) ([]backup.Started, error) {
	list, err := a.Client.VeleroV2alpha1().DataUploads(b.Namespace).List(ctx, metav1.ListOptions{LabelSelector: velerov1.BackupUIDSelector(b.UID)})
	if err != nil {
		return nil, fmt.Errorf("listing the DataUploads of backup %s: %w", b.Name, err)
	}
	var out []backup.Started
	for _, du := range list.Items {
		id := du.Labels[velerov1.AsyncOperationIDLabel]
		if id == "" {
			continue
		}
		claim := backup.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: du.Spec.SourceNamespace, Name: du.Spec.SourcePVC}
		out = append(out, backup.Started{OperationID: id, Resource: &claim, PostOperationItems: []backup.ResourceIdentifier{
			{Group: velerov1.GroupName, Resource: "datauploads", Namespace: du.Namespace, Name: du.Name}}})
	}
	return out, nil
}
