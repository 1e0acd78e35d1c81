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

package v1alpha1

import (
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NonAdminDownloadRequestSpec defines the desired state of NonAdminDownloadRequest.
// Mirrors velero DownloadRequestSpec to allow non admins to download information for a non admin backup/restore
type NonAdminDownloadRequestSpec struct {
	// Target is what to download (e.g. logs for a backup): its name is a
	// NonAdminBackup's (or, for restore kinds, a NonAdminRestore's) of the
	// same namespace.
	Target velerov1.DownloadTarget `json:"target"`
}

// VeleroDownloadRequest represents VeleroDownloadRequest
type VeleroDownloadRequest struct {
	// VeleroDownloadRequestStatus represents VeleroDownloadRequestStatus
	// +optional
	Status *velerov1.DownloadRequestStatus `json:"status,omitempty"`
}

// NonAdminDownloadRequestStatus defines the observed state of NonAdminDownloadRequest.
type NonAdminDownloadRequestStatus struct {
	// +optional
	VeleroDownloadRequest VeleroDownloadRequest `json:"velero,omitempty"`
	// phase is a simple one high-level summary of the lifecycle of an NonAdminDownloadRequest
	Phase NonAdminPhase `json:"phase,omitempty"`

	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NonAdminDownloadRequest is the Schema for the nonadmindownloadrequests API.
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type NonAdminDownloadRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NonAdminDownloadRequestSpec   `json:"spec,omitempty"`
	Status NonAdminDownloadRequestStatus `json:"status,omitempty"`
}

// NonAdminDownloadRequestList contains a list of NonAdminDownloadRequest.
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type NonAdminDownloadRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NonAdminDownloadRequest `json:"items"`
}
