/*
Copyright 2026 the OADP non-admin authors (github.com/migtools/oadp-non-admin api/v1alpha1).

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package oadp

import (
	"github.com/backstop-io/backstop/pkg/apis/velero"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NonAdminScheduleTemplate defines the Backup template for a non-admin schedule.
// Metadata is deliberately not exposed: the server owns the backing Schedule's
// metadata, so generated Backups always keep their tenant ownership.
type NonAdminScheduleTemplate struct {
	// BackupSpec defines the specification for every generated Velero Backup.
	BackupSpec *velero.BackupSpec `json:"backupSpec"`
}

// NonAdminScheduleSpec defines the desired state of NonAdminSchedule.
type NonAdminScheduleSpec struct {
	// Schedule is a standard cron expression defining when to create a backup.
	Schedule string `json:"schedule"`

	// Paused stops future scheduled backups until it is set to false.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// SkipImmediately skips the backup due at once (at creation or unpause).
	// +optional
	SkipImmediately bool `json:"skipImmediately,omitempty"`

	// Template defines the backup request to run on the schedule.
	Template NonAdminScheduleTemplate `json:"template"`
}

// VeleroSchedule contains information about the backing Velero Schedule object.
type VeleroSchedule struct {
	// Status captures the current status of the backing Velero Schedule.
	// +optional
	Status *velero.ScheduleStatus `json:"status,omitempty"`

	// NACUUID identifies the backing Velero Schedule.
	// +optional
	NACUUID string `json:"nacuuid,omitempty"`

	// Name is the backing Velero Schedule name.
	// +optional
	Name string `json:"name,omitempty"`

	// Namespace is the namespace containing the backing Velero Schedule.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// NonAdminScheduledBackup describes one generated backup in schedule status.
type NonAdminScheduledBackup struct {
	// Name is the NonAdminBackup made for this schedule run.
	Name string `json:"name"`

	// VeleroBackupName is the generated backing Velero Backup name.
	VeleroBackupName string `json:"veleroBackupName"`

	// Phase is the current Velero Backup phase.
	Phase velero.BackupPhase `json:"phase,omitempty"`

	// StartTimestamp is when the Backup started.
	// +optional
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`

	// CompletionTimestamp is when the Backup completed.
	// +optional
	CompletionTimestamp *metav1.Time `json:"completionTimestamp,omitempty"`

	// Expiration is when the Backup expires.
	// +optional
	Expiration *metav1.Time `json:"expiration,omitempty"`
}

// NonAdminScheduleStatus defines the observed state of NonAdminSchedule.
type NonAdminScheduleStatus struct {
	// VeleroSchedule identifies and reports the backing Velero Schedule.
	// +optional
	VeleroSchedule *VeleroSchedule `json:"veleroSchedule,omitempty"`

	// NextRun is calculated from the cron expression and the backing Schedule status.
	// +optional
	NextRun *metav1.Time `json:"nextRun,omitempty"`

	// LastBackup is the newest generated Backup.
	// +optional
	LastBackup *NonAdminScheduledBackup `json:"lastBackup,omitempty"`

	// RecentBackups contains at most five generated Backups, newest first.
	// +optional
	RecentBackups []NonAdminScheduledBackup `json:"recentBackups,omitempty"`

	// Phase is a high-level summary of the NonAdminSchedule lifecycle.
	// +optional
	Phase NonAdminPhase `json:"phase,omitempty"`

	// Conditions contains detailed acceptance and lifecycle information.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NonAdminSchedule is the Schema for non-admin backup schedules.
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type NonAdminSchedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NonAdminScheduleSpec   `json:"spec,omitempty"`
	Status NonAdminScheduleStatus `json:"status,omitempty"`
}

// NonAdminScheduleList contains a list of NonAdminSchedules.
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type NonAdminScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NonAdminSchedule `json:"items"`
}
