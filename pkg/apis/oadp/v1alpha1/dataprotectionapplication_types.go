/*
Copyright 2021 the OADP operator authors (github.com/openshift/oadp-operator api/v1alpha1).

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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// DataProtectionApplicationSpec is the OADP operator's DPA spec. Backstop
// acts on nonAdmin, the tenants' policy; the operator's other fields are
// kept as sent (the JSON is upstream's) and the DPA's status names those
// set that Backstop does not act on.
type DataProtectionApplicationSpec struct {
	// backupLocations: kept, not acted on.
	// +optional
	BackupLocations []runtime.RawExtension `json:"backupLocations,omitempty"`
	// snapshotLocations: kept, not acted on.
	// +optional
	SnapshotLocations []runtime.RawExtension `json:"snapshotLocations,omitempty"`
	// unsupportedOverrides: kept, not acted on.
	// +optional
	UnsupportedOverrides map[string]string `json:"unsupportedOverrides,omitempty"`
	// podAnnotations: kept, not acted on.
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`
	// podDnsPolicy: kept, not acted on.
	// +optional
	PodDnsPolicy corev1.DNSPolicy `json:"podDnsPolicy,omitempty"`
	// podDnsConfig: kept, not acted on.
	// +optional
	PodDnsConfig *runtime.RawExtension `json:"podDnsConfig,omitempty"`
	// backupImages: kept, not acted on.
	// +optional
	BackupImages *bool `json:"backupImages,omitempty"`
	// configuration: kept, not acted on.
	// +optional
	Configuration *runtime.RawExtension `json:"configuration,omitempty"`
	// features: kept, not acted on.
	// +optional
	Features *runtime.RawExtension `json:"features,omitempty"`
	// imagePullPolicy: kept, not acted on.
	// +optional
	ImagePullPolicy *corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// nonAdmin is the policy for tenants' backups and restores, acted on
	// as soon as it is written.
	// +optional
	NonAdmin *NonAdmin `json:"nonAdmin,omitempty"`
	// logFormat: kept, not acted on.
	// +optional
	LogFormat string `json:"logFormat,omitempty"`
}

// NonAdmin is the policy for tenants' backups and restores.
type NonAdmin struct {
	// enable: tenants' backups and restores run unless it is false
	// (Backstop's default is on; upstream deploys no controller unless
	// it is true).
	// +optional
	Enable *bool `json:"enable,omitempty"`

	// enforceBackupSpec: each field set here fills the field of a tenant's
	// backup spec left empty, and a different value is refused.
	// +optional
	EnforceBackupSpec *velerov1.BackupSpec `json:"enforceBackupSpec,omitempty"`

	// enforceRestoreSpec: the same for restores.
	// +optional
	EnforceRestoreSpec *velerov1.RestoreSpec `json:"enforceRestoreSpec,omitempty"`

	// enforceBSLSpec: the same for tenants' storage locations.
	// +optional
	EnforceBSLSpec *EnforceBackupStorageLocationSpec `json:"enforceBSLSpec,omitempty"`

	// requireApprovalForBSL: tenants' storage locations need the admin's
	// approval. Defaults to false.
	// +optional
	RequireApprovalForBSL *bool `json:"requireApprovalForBSL,omitempty"`

	// garbageCollectionPeriod: how often leftover admin-side objects are
	// looked for. 0 disables it; default 24h.
	// +optional
	GarbageCollectionPeriod *metav1.Duration `json:"garbageCollectionPeriod,omitempty"`

	// backupSyncPeriod: how often backups are synchronized into tenants'
	// namespaces. 0 disables it; default 2m.
	// +optional
	BackupSyncPeriod *metav1.Duration `json:"backupSyncPeriod,omitempty"`

	// allowedLocationEndpoints (Backstop): host names, IP addresses and
	// CIDRs that tenants' storage locations may reach although the server
	// refuses them to tenants otherwise: loopback, link-local, the
	// server's own addresses and the networks given to
	// --tenant-denied-networks (the cluster's service network). A host
	// name is matched against the s3Url's host; an address or CIDR
	// against the address connected to.
	// +optional
	// +listType=atomic
	AllowedLocationEndpoints []string `json:"allowedLocationEndpoints,omitempty"`

	// tenantLimits (Backstop): what one tenant may ask of the server, so
	// that no tenant floods it; unset fields take Backstop's defaults.
	// +optional
	TenantLimits *TenantLimits `json:"tenantLimits,omitempty"`
}

// TenantLimits bound what each tenant namespace may ask of the server.
type TenantLimits struct {
	// minValidationFrequency: the shortest spec.validationFrequency a
	// tenant's storage location may ask for (default 1m; 0 asks for the
	// location's default; 0 here: no minimum).
	// +optional
	MinValidationFrequency *metav1.Duration `json:"minValidationFrequency,omitempty"`
	// minScheduleInterval: the shortest time between two runs of a
	// tenant's schedule (default 15m; 0: no minimum).
	// +optional
	MinScheduleInterval *metav1.Duration `json:"minScheduleInterval,omitempty"`
	// maxBackupsPerNamespace: the most NonAdminBackups a namespace may
	// hold (default 1000; 0: no limit). Those a schedule makes count, but
	// are always made: minScheduleInterval and their TTL bound them; those
	// a sync finds in the tenant's bucket count, and are not made past it.
	// +optional
	MaxBackupsPerNamespace *int32 `json:"maxBackupsPerNamespace,omitempty"`
	// maxRestoresPerNamespace: the most NonAdminRestores a namespace may
	// hold (default 100; 0: no limit).
	// +optional
	MaxRestoresPerNamespace *int32 `json:"maxRestoresPerNamespace,omitempty"`
	// maxSchedulesPerNamespace: the most NonAdminSchedules a namespace
	// may hold (default 10; 0: no limit).
	// +optional
	MaxSchedulesPerNamespace *int32 `json:"maxSchedulesPerNamespace,omitempty"`
	// maxLocationsPerNamespace: the most NonAdminBackupStorageLocations a
	// namespace may hold (default 5; 0: no limit): each is checked and
	// synced at an endpoint of the tenant's choosing.
	// +optional
	MaxLocationsPerNamespace *int32 `json:"maxLocationsPerNamespace,omitempty"`
	// maxDownloadRequestsPerNamespace: the most NonAdminDownloadRequests a
	// namespace may hold (default 100; 0: no limit; each goes when its
	// link expires).
	// +optional
	MaxDownloadRequestsPerNamespace *int32 `json:"maxDownloadRequestsPerNamespace,omitempty"`
	// maxVirtualMachineBackupsPerNamespace: the most
	// VirtualMachineBackups (backup.kubevirt.io) a namespace may hold
	// (default 1000; 0: no limit). Those a Velero backup makes count, but
	// are always made.
	// +optional
	MaxVirtualMachineBackupsPerNamespace *int32 `json:"maxVirtualMachineBackupsPerNamespace,omitempty"`
	// maxVirtualMachineBackupTrackersPerNamespace: the most
	// VirtualMachineBackupTrackers a namespace may hold (default 200; 0:
	// no limit): each keeps a VM's checkpoints on its host.
	// +optional
	MaxVirtualMachineBackupTrackersPerNamespace *int32 `json:"maxVirtualMachineBackupTrackersPerNamespace,omitempty"`
}

// EnforceBackupStorageLocationSpec is what the admin may enforce on
// tenants' storage locations.
type EnforceBackupStorageLocationSpec struct {
	// +optional
	Provider string `json:"provider,omitempty"`
	// +optional
	Config map[string]string `json:"config,omitempty"`
	// +optional
	Credential *corev1.SecretKeySelector `json:"credential,omitempty"`
	// +optional
	ObjectStorage *velerov1.ObjectStorageLocation `json:"objectStorage,omitempty"`
	// +optional
	AccessMode velerov1.BackupStorageLocationAccessMode `json:"accessMode,omitempty"`
	// +optional
	BackupSyncPeriod *metav1.Duration `json:"backupSyncPeriod,omitempty"`
	// +optional
	ValidationFrequency *metav1.Duration `json:"validationFrequency,omitempty"`
}

// DataProtectionApplicationStatus is the DPA's observed state.
type DataProtectionApplicationStatus struct {
	// conditions: Reconciled (the policy is in effect, or why not), and
	// NotActedOn (the spec fields set that Backstop does not act on).
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DataProtectionApplication carries the admin's policy for tenants in its
// spec.nonAdmin. Backstop acts on the oldest DPA of the admin namespace
// that has one.
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type DataProtectionApplication struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DataProtectionApplicationSpec   `json:"spec,omitempty"`
	Status DataProtectionApplicationStatus `json:"status,omitempty"`
}

// DataProtectionApplicationList contains a list of DataProtectionApplication
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type DataProtectionApplicationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DataProtectionApplication `json:"items"`
}
