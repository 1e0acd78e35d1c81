// Package csisnapshot takes CSI snapshots of the persistent volume claims a
// backup holds, as Velero's CSI actions do (velero.io/csi-pvc-backupper and
// velero.io/csi-volumesnapshot-backupper of Velero v1.18), as an async
// operation of the backup engine (backup.OperationFinisher):
//
//   - Start, for each claim the backup writes: unless spec.snapshotVolumes
//     is false, a Bound claim of a CSI volume gets a VolumeSnapshot
//     (generateName velero-<claim>-, the claim's labels and the backup's
//     name and UID) of the VolumeSnapshotClass chosen as Velero chooses it
//     (the claim's annotation, the backup's per-driver annotation, the
//     driver's class labelled velero.io/csi-volumesnapshot-class, its
//     default class, its only class). The claim in the tarball names its
//     snapshot (velero.io/volume-snapshot-name), which is what a restore
//     finds it by. A claim of a volume that is not CSI, or bound to none,
//     is taken without a snapshot.
//   - Progress: the operation ("<namespace>/<snapshot>/<RFC 3339 start>")
//     completes when the snapshot's content is ReadyToUse, fails on the
//     content's error or when spec.csiSnapshotTimeout has passed since it
//     started.
//   - FinalItems: the VolumeSnapshot (annotated with its handle, driver,
//     restore size and deletion policy), its VolumeSnapshotContent
//     (labelled with the backup) and its class go into the tarball, the
//     volume into the volume info file.
//   - Release: the content's deletion policy becomes Retain and the
//     VolumeSnapshot leaves the claim's namespace; the content stays,
//     labelled with the backup: the server's record of the snapshots the
//     backup owns (cluster-scoped: no tenant writes it, whatever a bucket
//     holds). A content the snapshot-controller deleted anyway (its copy
//     still said Delete) is made again from the snapshot's handle
//     (keepContent). Deleting the backup deletes its contents with policy
//     Delete (DeleteBackupSnapshots): the driver deletes the snapshots.
//   - Discard (the backup cancelled, failed or deleted, the operation
//     failed): the content's policy becomes Delete and the VolumeSnapshot
//     is deleted: the driver deletes the snapshot.
package csisnapshot

// Names Velero gives the action, the operation and the objects.
const (
	// Name is the action in the item operations file (the operation is the
	// VolumeSnapshot's, as Velero's VolumeSnapshot action records it).
	Name = "velero.io/csi-volumesnapshot-backupper"

	// ClassSelector is the label of a driver's VolumeSnapshotClass for
	// backups, the claim annotation naming one, and the prefix of the
	// backup annotation naming one per driver ("<prefix>_<driver>").
	ClassSelector = "velero.io/csi-volumesnapshot-class"
	// DefaultClassAnnotation marks a driver's default VolumeSnapshotClass.
	DefaultClassAnnotation = "snapshot.storage.kubernetes.io/is-default-class"

	// VolumeSnapshotLabel names, on a claim in the tarball, its snapshot
	// (a label and an annotation).
	VolumeSnapshotLabel = "velero.io/volume-snapshot-name"
	// MustIncludeAnnotation marks items whose related items are backed up
	// whatever the filters.
	MustIncludeAnnotation = "backup.velero.io/must-include-additional-items"

	// On the VolumeSnapshot in the tarball.
	HandleAnnotation         = "velero.io/csi-volumesnapshot-handle"
	RestoreSizeAnnotation    = "velero.io/csi-volumesnapshot-restore-size"
	DriverAnnotation         = "velero.io/csi-driver-name"
	DeletionPolicyAnnotation = "velero.io/csi-vsc-deletion-policy"
)

// Resources of the snapshot API.
const (
	SnapshotGroup          = "snapshot.storage.k8s.io"
	VolumeSnapshots        = "volumesnapshots"
	VolumeSnapshotContents = "volumesnapshotcontents"
	VolumeSnapshotClasses  = "volumesnapshotclasses"
)

// snapshotNamePrefix starts the name of each VolumeSnapshot a backup takes.
const snapshotNamePrefix = "velero-"
