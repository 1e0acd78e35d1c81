/*
Copyright 2026 the Backstop authors.

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

// +k8s:openapi-gen=true
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/backstop-io/backstop/pkg/apis/kubevirtbackup
// +k8s:defaulter-gen=TypeMeta
// +groupName=backup.kubevirt.io
// +k8s:openapi-model-package=io.kubevirt.backup.v1alpha1

// Package v1alpha1 is the backup.kubevirt.io/v1alpha1 API as Backstop
// serves it: VirtualMachineBackup and VirtualMachineBackupTracker.
//
// The types are derived from kubevirt.io/api v1.9.0 backup/v1alpha1
// (Apache-2.0) and keep every upstream field and JSON name. KubeVirt's
// incremental backup proposal (VEP 22, https://github.com/kubevirt/enhancements/issues/25)
// spells some fields differently; Backstop accepts both on input and
// writes both on output (docs/design.md):
//   - spec.backupTracker (the proposal's) is moved on create into spec.source
//     {apiGroup: backup.kubevirt.io, kind: VirtualMachineBackupTracker};
//   - spec.mode is accepted in any case ("push", "Push") and stored as
//     "Push" / "Pull";
//   - status.backupType (the proposal's) carries the same value as status.type;
//   - a checkpoint lists its disks both as volumes (upstream) and as
//     disks (the proposal's), and keeps its libvirt XML in checkpointXML.
package v1alpha1
