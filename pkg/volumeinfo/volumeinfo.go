// Package volumeinfo is the format of a backup's volume info file,
// <backup>-volumeinfo.json.gz: how each volume of the backup was backed
// up, in Velero's JSON (internal/volume.BackupVolumeInfo of Velero v1.18).
// `velero backup describe` lists a backup's volumes from it; a restore
// knows from it which volumes come back from a snapshot.
package volumeinfo

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Backup methods.
const (
	MethodCSISnapshot = "CSISnapshot"
)

// Results.
const (
	ResultSucceeded = "succeeded"
	ResultFailed    = "failed"
)

// MaxSize bounds the file read back, uncompressed (a bucket is input).
const MaxSize = 64 << 20

// BackupVolumeInfo is one volume of a backup.
type BackupVolumeInfo struct {
	PVCName               string           `json:"pvcName,omitempty"`
	PVCNamespace          string           `json:"pvcNamespace,omitempty"`
	PVName                string           `json:"pvName,omitempty"`
	BackupMethod          string           `json:"backupMethod,omitempty"`
	SnapshotDataMoved     bool             `json:"snapshotDataMoved"`
	PreserveLocalSnapshot bool             `json:"preserveLocalSnapshot"`
	Skipped               bool             `json:"skipped"`
	SkippedReason         string           `json:"skippedReason,omitempty"`
	StartTimestamp        *metav1.Time     `json:"startTimestamp,omitempty"`
	CompletionTimestamp   *metav1.Time     `json:"completionTimestamp,omitempty"`
	Result                string           `json:"result,omitempty"`
	CSISnapshotInfo       *CSISnapshotInfo `json:"csiSnapshotInfo,omitempty"`
	// SnapshotDataMovementInfo is the data mover's upload of the
	// snapshot (SnapshotDataMoved).
	SnapshotDataMovementInfo *SnapshotDataMovementInfo `json:"snapshotDataMovementInfo,omitempty"`
	PVInfo                   *PVInfo                   `json:"pvInfo,omitempty"`
}

// SnapshotDataMovementInfo is a snapshot's data moved into the storage
// location (a DataUpload).
type SnapshotDataMovementInfo struct {
	DataMover        string `json:"dataMover"`
	UploaderType     string `json:"uploaderType"`
	RetainedSnapshot string `json:"retainedSnapshot,omitempty"`
	// SnapshotHandle is the kopia snapshot's ID.
	SnapshotHandle  string `json:"snapshotHandle"`
	OperationID     string `json:"operationID"`
	Size            int64  `json:"size"`
	IncrementalSize int64  `json:"incrementalSize,omitempty"`
	// Phase has no JSON name in Velero: its key is "Phase".
	Phase string
}

// CSISnapshotInfo is a volume's CSI snapshot.
type CSISnapshotInfo struct {
	SnapshotHandle string `json:"snapshotHandle"`
	Size           int64  `json:"size"`
	Driver         string `json:"driver"`
	VSCName        string `json:"vscName"`
	OperationID    string `json:"operationID,omitempty"`
	// ReadyToUse has no JSON name in Velero: its key is "ReadyToUse".
	ReadyToUse *bool
}

// PVInfo is what of a volume a new one made from its snapshot keeps.
type PVInfo struct {
	ReclaimPolicy string            `json:"reclaimPolicy"`
	Labels        map[string]string `json:"labels"`
}

// Decode decodes a volume info file (uncompressed).
func Decode(data []byte) ([]BackupVolumeInfo, error) {
	var out []BackupVolumeInfo
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("decoding the volume info file: %w", err)
	}
	return out, nil
}

// Index is a backup's volumes by the name of the PersistentVolume.
type Index map[string]BackupVolumeInfo

// NewIndex indexes volumes.
func NewIndex(volumes []BackupVolumeInfo) Index {
	x := make(Index, len(volumes))
	for _, v := range volumes {
		if v.PVName != "" {
			x[v.PVName] = v
		}
	}
	return x
}

// FromCSISnapshot reports whether the backup holds a CSI snapshot of the
// volume pv, in the cluster's storage (not moved), that succeeded: a
// restore provisions its claim anew from it.
func (x Index) FromCSISnapshot(pv string) bool {
	v, ok := x[pv]
	return ok && v.BackupMethod == MethodCSISnapshot && !v.SnapshotDataMoved && v.Result == ResultSucceeded
}

// movedOK reports whether a volume's snapshot data was moved into the
// storage location, successfully.
func movedOK(v BackupVolumeInfo) bool {
	return v.SnapshotDataMoved && v.Result == ResultSucceeded && v.SnapshotDataMovementInfo != nil && v.SnapshotDataMovementInfo.SnapshotHandle != ""
}

// FromMovedData reports whether the backup moved the data of volume pv's
// snapshot into the storage location, successfully: a restore provisions
// its claim anew and the data mover writes the data into it.
func (x Index) FromMovedData(pv string) bool {
	v, ok := x[pv]
	return ok && movedOK(v)
}

// Moved returns the moved data of a claim (by its namespace and name in
// the backup), if the backup moved it successfully.
func (x Index) Moved(namespace, claim string) (BackupVolumeInfo, bool) {
	for _, v := range x {
		if v.PVCNamespace == namespace && v.PVCName == claim && movedOK(v) {
			return v, true
		}
	}
	return BackupVolumeInfo{}, false
}
