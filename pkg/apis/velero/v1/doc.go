/*
Copyright 2017 the Velero contributors.
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
// +k8s:conversion-gen=github.com/backstop-io/backstop/pkg/apis/velero
// +k8s:defaulter-gen=TypeMeta
// +groupName=velero.io
// +k8s:openapi-model-package=io.velero.v1

// Package v1 is the velero.io/v1 API as Backstop serves it.
//
// The type files are derived from Velero v1.18.0 pkg/apis/velero/v1
// (Apache-2.0) and keep every upstream type, field and JSON name, so clients
// built on the upstream types, the velero CLI among them, work unchanged.
// Backstop adds, from the design documents it implements:
//   - Backup spec.cancel and phase FinalizingCancelled (backup cancellation);
//   - the queue phases Queued / ReadyToStart and status.queuePosition, and
//     Schedule spec.skipImmediately / status.lastSkipped, which Velero v1.18
//     already carries and Backstop implements.
//
// DataMoveOperationProgress lives upstream in pkg/apis/velero/shared; it is
// declared here with the same JSON.
package v1
