/*
 * This file is part of the KubeVirt project
 *
 * Licensed under the Apache License, Version 2.0 (the "License");
 * you may not use this file except in compliance with the License.
 * You may obtain a copy of the License at
 *
 *     http://www.apache.org/licenses/LICENSE-2.0
 *
 * Unless required by applicable law or agreed to in writing, software
 * distributed under the License is distributed on an "AS IS" BASIS,
 * WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 * See the License for the specific language governing permissions and
 * limitations under the License.
 *
 * Copyright 2025 Red Hat, Inc.
 *
 * Derived from kubevirt.io/api v1.9.0 backup/v1alpha1; fields marked
 * "Backstop addition" are not upstream.
 *
 */

package kubevirtbackup

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BackupMode is the const type for the backup possible modes
type BackupMode string

const (
	// PushMode defines backup which pushes the backup output
	// to a provided PVC - this is the default behavior
	PushMode BackupMode = "Push"
	// PullMode defines backup which exposes a pull endpoint
	// containing the backup disks and metadata
	PullMode BackupMode = "Pull"
)

// BackupVolumeInfo contains information about a volume included in a backup
type BackupVolumeInfo struct {
	// VolumeName is the volume name from VMI spec
	VolumeName string `json:"volumeName"`
	// DiskTarget is the disk target device name at backup time
	DiskTarget string `json:"diskTarget"`
	// DataEndpoint is the URL of the endpoint for read for pull mode
	DataEndpoint string `json:"dataEndpoint,omitempty"`
	// MapEndpoint is the URL of the endpoint for map for pull mode
	MapEndpoint string `json:"mapEndpoint,omitempty"`
}

type BackupCheckpoint struct {
	Name         string       `json:"name,omitempty"`
	CreationTime *metav1.Time `json:"creationTime,omitempty"`
	// Volumes lists volumes and their disk targets at backup time
	// +optional
	// +listType=atomic
	Volumes []BackupVolumeInfo `json:"volumes,omitempty"`
	// Disks lists the names of the disks the checkpoint covers (the same
	// disks as Volumes, by name, as KubeVirt's incremental backup proposal
	// lists them). The server writes both.
	// Backstop addition.
	// +optional
	// +listType=atomic
	Disks []string `json:"disks,omitempty"`
	// CheckpointXML is the libvirt checkpoint XML, kept so the checkpoint
	// can be redefined after the VM restarts. Backstop addition.
	// +optional
	CheckpointXML string `json:"checkpointXML,omitempty"`
}

// BackupType is the const type for the backup possible types
type BackupType string

const (
	// Full defines full backup, all the data is in the backup
	Full BackupType = "Full"
	// Incremental defines incremental backup, only changes from given checkpoint
	// are in the backup
	Incremental BackupType = "Incremental"
)

// BackupCmd is the const type for the backup possible commands
type BackupCmd string

const (
	Start  BackupCmd = "Start"
	Abort  BackupCmd = "Abort"
	Export BackupCmd = "Export"
)

// BackupOptions are options used to configure virtual machine backup job
type BackupOptions struct {
	BackupName       string       `json:"backupName,omitempty"`
	Cmd              BackupCmd    `json:"cmd,omitempty"`
	Mode             BackupMode   `json:"mode,omitempty"`
	BackupStartTime  *metav1.Time `json:"backupStartTime,omitempty"`
	Incremental      *string      `json:"incremental,omitempty"`
	TargetPath       *string      `json:"targetPath,omitempty"`
	SkipQuiesce      bool         `json:"skipQuiesce,omitempty"`
	ExportServerAddr *string      `json:"exportServerAddr,omitempty"`
	ExportServerName *string      `json:"exportServerName,omitempty"`
	BackupKey        *string      `json:"backupKey,omitempty"`
	BackupCert       *string      `json:"backupCert,omitempty"`
	CACert           *string      `json:"caCert,omitempty"`
}

// VirtualMachineBackupTracker defines the way to track the latest checkpoint of
// a backup solution for a vm
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachineBackupTracker struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VirtualMachineBackupTrackerSpec `json:"spec"`

	// +optional
	Status *VirtualMachineBackupTrackerStatus `json:"status,omitempty"`
}

// VirtualMachineBackupTrackerSpec is the spec for a VirtualMachineBackupTracker resource
type VirtualMachineBackupTrackerSpec struct {
	// Source specifies the VM that this backupTracker is associated with
	Source corev1.TypedLocalObjectReference `json:"source"`
}

type VirtualMachineBackupTrackerStatus struct {
	// +optional
	// LatestCheckpoint is the metadata of the checkpoint of
	// the latest performed backup
	LatestCheckpoint *BackupCheckpoint `json:"latestCheckpoint,omitempty"`

	// +optional
	// CheckpointRedefinitionRequired is set to true by virt-handler when the VM
	// restarts and has a checkpoint that needs to be redefined in libvirt.
	// virt-controller will process this flag, attempt redefinition, and clear it.
	CheckpointRedefinitionRequired *bool `json:"checkpointRedefinitionRequired,omitempty"`

	// ChangedBlockTracking is the changed block tracking state of the
	// tracked VM's disks (KubeVirt's VirtualMachine
	// status.changedBlockTracking): a tracker selects its VM for changed
	// block tracking unless its annotation backstop.io/changed-block-tracking
	// is "false". Backstop addition.
	// +optional
	ChangedBlockTracking *ChangedBlockTrackingStatus `json:"changedBlockTracking,omitempty"`
}

// ChangedBlockTrackingState is the changed block tracking state of a VM,
// with KubeVirt's names.
type ChangedBlockTrackingState string

const (
	// ChangedBlockTrackingPendingRestart: the VM's definition has changed
	// (tracking enabled or disabled); the running VM takes it when it is
	// started again.
	ChangedBlockTrackingPendingRestart ChangedBlockTrackingState = "PendingRestart"
	// ChangedBlockTrackingInitializing: the overlays of the VM's raw disks
	// are being made.
	ChangedBlockTrackingInitializing ChangedBlockTrackingState = "Initializing"
	// ChangedBlockTrackingEnabled: every disk of the VM keeps dirty bitmaps
	// (qcow2 disks themselves, raw disks through their overlays).
	ChangedBlockTrackingEnabled ChangedBlockTrackingState = "Enabled"
	// ChangedBlockTrackingDisabled: raw disks have no overlay; backups of
	// the VM are full, without a checkpoint.
	ChangedBlockTrackingDisabled ChangedBlockTrackingState = "Disabled"
)

// ChangedBlockTrackingStatus is a VM's changed block tracking state (the
// shape of KubeVirt's), with why it is not what was asked for.
type ChangedBlockTrackingStatus struct {
	// State is PendingRestart, Initializing, Enabled or Disabled.
	// +optional
	State ChangedBlockTrackingState `json:"state,omitempty"`
	// Reason is why the state is not the selected one, in CamelCase
	// (DomainNotFound, LibvirtUnavailable, EnableFailed, DisableFailed).
	// Backstop addition.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message says what happened, for humans. Backstop addition.
	// +optional
	Message string `json:"message,omitempty"`
}

// VirtualMachineBackupTrackerList is a list of VirtualMachineBackupTracker resources
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachineBackupTrackerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	// +listType=atomic
	Items []VirtualMachineBackupTracker `json:"items"`
}

// VirtualMachineBackup defines the operation of backing up a VM
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachineBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VirtualMachineBackupSpec `json:"spec"`

	// +optional
	Status *VirtualMachineBackupStatus `json:"status,omitempty"`
}

// VirtualMachineBackupList is a list of VirtualMachineBackup resources
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachineBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`

	// +listType=atomic
	Items []VirtualMachineBackup `json:"items"`
}

// VirtualMachineBackupSpec is the spec for a VirtualMachineBackup resource
type VirtualMachineBackupSpec struct {
	// Source specifies the backup source - either a VirtualMachine or a VirtualMachineBackupTracker.
	// When Kind is VirtualMachine: performs a backup of the specified VM.
	// When Kind is VirtualMachineBackupTracker: uses the tracker to get the source VM
	// and the base checkpoint for incremental backup. The tracker will be updated
	// with the new checkpoint after backup completion.
	Source corev1.TypedLocalObjectReference `json:"source"`
	// +optional
	// Mode specifies the way the backup output will be recieved
	Mode *BackupMode `json:"mode,omitempty"`
	// +optional
	// PvcName required in push mode. Specifies the name of the PVC
	// where the backup output will be stored
	PvcName *string `json:"pvcName,omitempty"`
	// +optional
	// SkipQuiesce indicates whether the VM's filesystem shoule not be quiesced before the backup
	SkipQuiesce bool `json:"skipQuiesce,omitempty"`
	// +optional
	// ForceFullBackup indicates that a full backup is desired
	ForceFullBackup bool `json:"forceFullBackup,omitempty"`
	// +optional
	// TokenSecretRef is the name of the secret that
	// will be used to pull the backup from an associated endpoint
	TokenSecretRef string `json:"tokenSecretRef,omitempty"`
	// +optional
	// TtlDuration limits the lifetime of a pull mode backup and its export
	// If this field is set, after this duration has passed from counting from CreationTimestamp,
	// the backup is eligible to be automatically considered as complete.
	// If this field is omitted, a reasonable default is applied.
	// +optional
	TTLDuration *metav1.Duration `json:"ttlDuration,omitempty"`
	// BackupTracker names a VirtualMachineBackupTracker in the same
	// namespace to back up through: another way to write a tracker source
	// (KubeVirt's incremental backup proposal uses it). On create the
	// server moves it into Source (apiGroup backup.kubevirt.io, kind
	// VirtualMachineBackupTracker). Backstop addition.
	// +optional
	BackupTracker *string `json:"backupTracker,omitempty"`
}

// QuiesceStatus represents the outcome of a filesystem quiesce operation
type QuiesceStatus string

const (
	// QuiesceSucceeded indicates the filesystem was successfully quiesced
	QuiesceSucceeded QuiesceStatus = "Succeeded"
	// QuiesceFailed indicates the filesystem quiesce failed
	QuiesceFailed QuiesceStatus = "Failed"
	// QuiesceSkipped indicates the filesystem quiesce was skipped
	QuiesceSkipped QuiesceStatus = "Skipped"
)

// VirtualMachineBackupStatus is the status for a VirtualMachineBackup resource
type VirtualMachineBackupStatus struct {
	// +optional
	// Type indicates if the backup was full or incremental
	Type BackupType `json:"type,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +optional
	// CheckpointName the name of the checkpoint created for the current backup
	CheckpointName *string `json:"checkpointName,omitempty"`
	// +optional
	// EndpointCert is the raw CACert that is to be used when connecting
	// to an exported backup endpoint in pull mode.
	EndpointCert *string `json:"endpointCert,omitempty"`
	// +optional
	// +listType=atomic
	// IncludedVolumes lists the volumes that were included in the backup
	IncludedVolumes []BackupVolumeInfo `json:"includedVolumes,omitempty"`
	// +optional
	// ExportUID tracks the UID of the associated VMExport for pull-mode backups
	// used to detect VMExport recreation and re-initiate the export handshake
	ExportUID *types.UID `json:"exportUID,omitempty"`
	// BackupType is Full or Incremental, as Type (the name KubeVirt's
	// incremental backup proposal uses): the server always writes both with
	// the same value. Backstop addition.
	// +optional
	BackupType BackupType `json:"backupType,omitempty"`
	// Progress counts the bytes of the backup job. Backstop addition.
	// +optional
	Progress *BackupProgress `json:"progress,omitempty"`
	// ParentCheckpointName is, for an incremental backup, the checkpoint it
	// holds the changes since: that of the backup before it in its chain.
	// Backstop addition.
	// +optional
	ParentCheckpointName *string `json:"parentCheckpointName,omitempty"`
}

// BackupProgress is the progress of a backup job, from libvirt's job stats.
// Backstop addition.
type BackupProgress struct {
	// TotalBytes is the amount of data the job has to copy.
	TotalBytes int64 `json:"totalBytes,omitempty"`
	// BytesDone is the amount of data copied so far.
	BytesDone int64 `json:"bytesDone,omitempty"`
}
