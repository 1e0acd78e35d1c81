/*
Copyright 2024 the OADP non-admin authors (github.com/migtools/oadp-non-admin api/v1alpha1).

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

// NonAdminBackupStorageLocationSpec defines the desired state of NonAdminBackupStorageLocation
type NonAdminBackupStorageLocationSpec struct {
	BackupStorageLocationSpec *velero.BackupStorageLocationSpec `json:"backupStorageLocationSpec"`
}

// VeleroBackupStorageLocation contains information of the related Velero backup object.
type VeleroBackupStorageLocation struct {
	// status captures the current status of the Velero backup storage location.
	// +optional
	Status *velero.BackupStorageLocationStatus `json:"status,omitempty"`

	// nacuuid references the Velero BackupStorageLocation object by it's label containing same NACUUID.
	// +optional
	NACUUID string `json:"nacuuid,omitempty"`

	// references the Velero BackupStorageLocation object by it's name.
	// +optional
	Name string `json:"name,omitempty"`

	// namespace references the Namespace in which Velero backup storage location exists.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// NonAdminBackupStorageLocationStatus defines the observed state of NonAdminBackupStorageLocation
type NonAdminBackupStorageLocationStatus struct {
	// +optional
	VeleroBackupStorageLocation *VeleroBackupStorageLocation `json:"veleroBackupStorageLocation,omitempty"`

	// phase is a simple one high-level summary of the lifecycle of an NonAdminBackupStorageLocation.
	Phase NonAdminPhase `json:"phase,omitempty"`

	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NonAdminBackupStorageLocation is the Schema for the nonadminbackupstoragelocations API
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type NonAdminBackupStorageLocation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NonAdminBackupStorageLocationSpec   `json:"spec,omitempty"`
	Status NonAdminBackupStorageLocationStatus `json:"status,omitempty"`
}

// NonAdminBackupStorageLocationList contains a list of NonAdminBackupStorageLocation
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type NonAdminBackupStorageLocationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NonAdminBackupStorageLocation `json:"items"`
}

// NonAdminBSLRequest controls the approval of the NonAdminBackupStorageLocation
type NonAdminBSLRequest string

// NonAdminBSLRequestPhase is the phase of the NonAdminBackupStorageLocationRequest
type NonAdminBSLRequestPhase string

// Predefined NonAdminBSLRequest decisions
const (
	NonAdminBSLRequestApproved NonAdminBSLRequest = "approve"
	NonAdminBSLRequestRejected NonAdminBSLRequest = "reject"
	NonAdminBSLRequestPending  NonAdminBSLRequest = "pending"
)

// Predefined NonAdminBSLRequestPhases
const (
	NonAdminBSLRequestPhasePending  NonAdminBSLRequestPhase = "Pending"
	NonAdminBSLRequestPhaseApproved NonAdminBSLRequestPhase = "Approved"
	NonAdminBSLRequestPhaseRejected NonAdminBSLRequestPhase = "Rejected"
)

// NonAdminBackupStorageLocationRequestSpec defines the desired state of NonAdminBackupStorageLocationRequest
type NonAdminBackupStorageLocationRequestSpec struct {
	// approvalDecision is the decision of the cluster admin on the Requested NonAdminBackupStorageLocation creation.
	// The value may be set to either approve or reject.
	// +optional
	ApprovalDecision NonAdminBSLRequest `json:"approvalDecision,omitempty"`
}

// SourceNonAdminBSL contains information of the NonAdminBackupStorageLocation object that triggered NonAdminBSLRequest
type SourceNonAdminBSL struct {
	// requestedSpec contains the requested Velero BackupStorageLocation spec from the NonAdminBackupStorageLocation
	RequestedSpec *velero.BackupStorageLocationSpec `json:"requestedSpec"`

	// nacuuid references the NonAdminBackupStorageLocation object by it's label containing same NACUUID.
	// +optional
	NACUUID string `json:"nacuuid,omitempty"`

	// name references the NonAdminBackupStorageLocation object by it's name.
	// +optional
	Name string `json:"name,omitempty"`

	// namespace references the Namespace in which NonAdminBackupStorageLocation exists.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// NonAdminBackupStorageLocationRequestStatus defines the observed state of NonAdminBackupStorageLocationRequest
type NonAdminBackupStorageLocationRequestStatus struct {
	// nonAdminBackupStorageLocation contains information of the NonAdminBackupStorageLocation object that triggered NonAdminBSLRequest
	// +optional
	SourceNonAdminBSL *SourceNonAdminBSL `json:"nonAdminBackupStorageLocation,omitempty"`

	// phase represents the current state of the NonAdminBSLRequest. It can be either Pending, Approved or Rejected.
	// +optional
	Phase NonAdminBSLRequestPhase `json:"phase,omitempty"`
}

// NonAdminBackupStorageLocationRequest is the Schema for the nonadminbackupstoragelocationrequests API
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type NonAdminBackupStorageLocationRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NonAdminBackupStorageLocationRequestSpec   `json:"spec,omitempty"`
	Status NonAdminBackupStorageLocationRequestStatus `json:"status,omitempty"`
}

// NonAdminBackupStorageLocationRequestList contains a list of NonAdminBackupStorageLocationRequest
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type NonAdminBackupStorageLocationRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NonAdminBackupStorageLocationRequest `json:"items"`
}
