package backup

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The volume info file, <backup>-volumeinfo.json.gz: how each volume of a
// backup was backed up, in Velero's JSON (internal/volume.BackupVolumeInfo
// of Velero v1.18: `velero backup describe` lists a backup's volumes from
// it, and a restore knows from it which claims come back from a snapshot).

// Volume backup methods.
const (
	VolumeMethodCSISnapshot = "CSISnapshot"
)

// Volume results.
const (
	VolumeResultSucceeded = "succeeded"
	VolumeResultFailed    = "failed"
)

// VolumeInfo is one volume of a backup.
type VolumeInfo struct {
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
	PVInfo                *PVInfo          `json:"pvInfo,omitempty"`
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
