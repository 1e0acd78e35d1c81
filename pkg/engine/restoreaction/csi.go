package restoreaction

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

// Claims backed up with a CSI snapshot come back from it, as Velero's CSI
// restore actions bring them (velero.io/csi-pvc-restorer,
// csi-volumesnapshot-restorer, csi-volumesnapshotcontent-restorer): the
// VolumeSnapshotContent is made again as a pre-provisioned content of the
// driver's snapshot (its handle, deletion policy Retain: the snapshot
// stays the backup's), the VolumeSnapshot bound to it, both under a name
// of this restore (two restores of one backup do not meet); the claim is
// provisioned anew from that VolumeSnapshot (its dataSource), and the
// volume it had is not restored. With restorePVs: false the snapshot is
// not restored and the claim is provisioned anew, empty.

// Names and values of the snapshot API the actions write.
const (
	snapshotGroup = "snapshot.storage.k8s.io"
	// VolumeSnapshotAnnotation on a claim in a backup names its snapshot.
	VolumeSnapshotAnnotation = "velero.io/volume-snapshot-name"
	// DeletionPolicyAnnotation on a restored VolumeSnapshot.
	DeletionPolicyAnnotation = "velero.io/csi-vsc-deletion-policy"
	retain                   = "Retain"
)

// RestoredSnapshotName is the name a restore gives the VolumeSnapshot it
// makes again of a backup's VolumeSnapshot, and its content: Velero's
// (hex SHA-256 of "<restore UID>/<snapshot>").
func RestoredSnapshotName(restoreUID, snapshot string) string {
	sum := sha256.Sum256([]byte(restoreUID + "/" + snapshot))
	return hex.EncodeToString(sum[:])
}

// restoresVolumes reports whether a restore brings volumes back (its
// restorePVs, unset: yes).
func restoresVolumes(in Input) bool {
	return in.Restore.Spec.RestorePVs == nil || *in.Restore.Spec.RestorePVs
}

// VolumeSnapshotContent makes a backup's content again as a
// pre-provisioned content of the driver's snapshot.
type VolumeSnapshotContent struct{}

func (VolumeSnapshotContent) Name() string { return "volumesnapshotcontent: the driver's snapshot" }
func (VolumeSnapshotContent) AppliesTo() []string {
	return []string{"volumesnapshotcontents." + snapshotGroup}
}

func (VolumeSnapshotContent) Execute(in Input) (Result, error) {
	if !restoresVolumes(in) {
		return Result{Skip: true, Reason: "restorePVs is false"}, nil
	}
	handle, _, _ := unstructured.NestedString(in.FromBackup.Object, "status", "snapshotHandle")
	if handle == "" {
		return Result{}, fmt.Errorf("VolumeSnapshotContent %s has no snapshot handle in the backup", in.FromBackup.GetName())
	}
	ref, _, _ := unstructured.NestedMap(in.FromBackup.Object, "spec", "volumeSnapshotRef")
	snapshot, _ := ref["name"].(string)
	ns, _ := ref["namespace"].(string)
	if snapshot == "" || ns == "" {
		return Result{}, fmt.Errorf("VolumeSnapshotContent %s names no VolumeSnapshot in the backup", in.FromBackup.GetName())
	}
	name := RestoredSnapshotName(string(in.Restore.UID), snapshot)
	obj := in.Item.Object
	in.Item.SetName(name)
	if err := unstructured.SetNestedMap(obj, map[string]any{
		"apiVersion": snapshotGroup + "/v1", "kind": "VolumeSnapshot", "namespace": MapNamespace(in.Restore, ns), "name": name,
	}, "spec", "volumeSnapshotRef"); err != nil {
		return Result{}, err
	}
	if err := unstructured.SetNestedMap(obj, map[string]any{"snapshotHandle": handle}, "spec", "source"); err != nil {
		return Result{}, err
	}
	unstructured.RemoveNestedField(obj, "spec", "volumeSnapshotClassName")
	// The content is the restore's, not the backup's: the backup's
	// deletion does not take it, and it never passes for one of the
	// contents the backup kept (a restore for a user writes only a
	// snapshot those vouch for).
	unstructured.RemoveNestedField(obj, "metadata", "labels", velerov1.BackupUIDLabel)
	return Result{}, unstructured.SetNestedField(obj, retain, "spec", "deletionPolicy")
}

// VolumeSnapshot makes a backup's VolumeSnapshot again, bound to the
// content VolumeSnapshotContent made.
type VolumeSnapshot struct{}

func (VolumeSnapshot) Name() string        { return "volumesnapshot: bound to the restored content" }
func (VolumeSnapshot) AppliesTo() []string { return []string{"volumesnapshots." + snapshotGroup} }

func (VolumeSnapshot) Execute(in Input) (Result, error) {
	if !restoresVolumes(in) {
		return Result{Skip: true, Reason: "restorePVs is false"}, nil
	}
	if content, _, _ := unstructured.NestedString(in.FromBackup.Object, "status", "boundVolumeSnapshotContentName"); content == "" {
		return Result{}, fmt.Errorf("VolumeSnapshot %s/%s has no bound VolumeSnapshotContent in the backup", in.FromBackup.GetNamespace(), in.FromBackup.GetName())
	}
	name := RestoredSnapshotName(string(in.Restore.UID), in.FromBackup.GetName())
	obj := in.Item.Object
	in.Item.SetName(name)
	if err := unstructured.SetNestedMap(obj, map[string]any{"volumeSnapshotContentName": name}, "spec", "source"); err != nil {
		return Result{}, err
	}
	unstructured.RemoveNestedField(obj, "spec", "volumeSnapshotClassName")
	annotations := in.Item.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[DeletionPolicyAnnotation] = retain
	in.Item.SetAnnotations(annotations)
	return Result{}, nil
}

// ClaimFromSnapshot provisions a claim backed up with a CSI snapshot anew
// from the restored VolumeSnapshot.
type ClaimFromSnapshot struct{}

func (ClaimFromSnapshot) Name() string        { return "persistentvolumeclaim: from its CSI snapshot" }
func (ClaimFromSnapshot) AppliesTo() []string { return []string{"persistentvolumeclaims"} }

func (ClaimFromSnapshot) Execute(in Input) (Result, error) {
	obj := in.Item.Object
	snapshot := in.FromBackup.GetAnnotations()[VolumeSnapshotAnnotation]
	if _, moved := in.Volumes.Moved(in.FromBackup.GetNamespace(), in.FromBackup.GetName()); moved {
		// ClaimFromMovedData's.
		return Result{}, nil
	}
	annotations := in.Item.GetAnnotations()
	delete(annotations, VolumeSnapshotAnnotation)
	if len(annotations) == 0 {
		annotations = nil
	}
	in.Item.SetAnnotations(annotations)
	if snapshot == "" {
		return Result{}, nil
	}
	unstructured.RemoveNestedField(obj, "spec", "volumeName")
	unstructured.RemoveNestedField(obj, "spec", "dataSourceRef")
	if !restoresVolumes(in) {
		// Provisioned anew, empty.
		unstructured.RemoveNestedField(obj, "spec", "dataSource")
		return Result{}, nil
	}
	return Result{}, unstructured.SetNestedMap(obj, map[string]any{
		"apiGroup": snapshotGroup, "kind": "VolumeSnapshot", "name": RestoredSnapshotName(string(in.Restore.UID), snapshot),
	}, "spec", "dataSource")
}

// SnapshottedVolume leaves out a volume backed up with a CSI snapshot:
// its claim is provisioned anew from the snapshot.
type SnapshottedVolume struct{}

func (SnapshottedVolume) Name() string        { return "persistentvolume: backed up by a CSI snapshot" }
func (SnapshottedVolume) AppliesTo() []string { return []string{"persistentvolumes"} }

func (SnapshottedVolume) Execute(in Input) (Result, error) {
	if in.Volumes.FromMovedData(in.FromBackup.GetName()) {
		if !restoresVolumes(in) {
			return Result{Skip: true, Reason: "restorePVs is false"}, nil
		}
		return Result{Skip: true, Reason: "dynamically re-provisioned; the data mover writes its data from the storage location"}, nil
	}
	if in.Volumes == nil || !in.Volumes.FromCSISnapshot(in.FromBackup.GetName()) {
		return Result{}, nil
	}
	if !restoresVolumes(in) {
		return Result{Skip: true, Reason: "restorePVs is false"}, nil
	}
	return Result{Skip: true, Reason: "dynamically re-provisioned from its CSI snapshot"}, nil
}

// ClaimFromMovedData provisions anew a claim whose snapshot's data the
// backup moved into the storage location, as Velero's CSI PVC restorer
// does: bound to no volume, with no data source, and selecting only a
// volume labelled for it (DynamicPVRestoreLabel), which the data mover
// hands it once it has written the data (the restore makes the
// DataDownload). With restorePVs: false it is provisioned anew, empty.
type ClaimFromMovedData struct{}

func (ClaimFromMovedData) Name() string {
	return "persistentvolumeclaim: its data from the storage location"
}
func (ClaimFromMovedData) AppliesTo() []string { return []string{"persistentvolumeclaims"} }

func (ClaimFromMovedData) Execute(in Input) (Result, error) {
	if _, moved := in.Volumes.Moved(in.FromBackup.GetNamespace(), in.FromBackup.GetName()); !moved {
		return Result{}, nil
	}
	obj := in.Item.Object
	unstructured.RemoveNestedField(obj, "spec", "volumeName")
	unstructured.RemoveNestedField(obj, "spec", "dataSource")
	unstructured.RemoveNestedField(obj, "spec", "dataSourceRef")
	annotations := in.Item.GetAnnotations()
	delete(annotations, velerov1.DataUploadNameAnnotation)
	delete(annotations, VolumeSnapshotAnnotation)
	if len(annotations) == 0 {
		annotations = nil
	}
	in.Item.SetAnnotations(annotations)
	if !restoresVolumes(in) {
		return Result{}, nil
	}
	return Result{}, unstructured.SetNestedField(obj, MovedDataSelector(in.Restore, in.Item.GetNamespace(), in.Item.GetName()),
		"spec", "selector", "matchLabels", velerov1.DynamicPVRestoreLabel)
}

// MovedDataSelector is the value of DynamicPVRestoreLabel a restored claim
// selects its volume by: Velero's "<namespace>.<claim>.<suffix>", the
// suffix the restore's (the same on a restart of it).
func MovedDataSelector(r *velerov1.Restore, namespace, claim string) string {
	sum := sha256.Sum256([]byte(r.UID))
	return velerov1.LabelValue(namespace + "." + claim + "." + hex.EncodeToString(sum[:])[:5])
}
