/*
Copyright the Velero contributors.
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
// +k8s:openapi-model-package=io.velero.v2alpha1

// Package v2alpha1 is the velero.io/v2alpha1 API as Backstop serves it:
// DataUpload and DataDownload, the data mover's records of moving a
// volume snapshot's data into a storage location and back.
//
// The type files are Velero v1.18.0's pkg/apis/velero/v2alpha1
// (Apache-2.0) with every type, field and JSON name kept, so clients built
// on the upstream types work unchanged. DataMoveOperationProgress lives
// upstream in pkg/apis/velero/shared; it is declared here with the same
// JSON.
package v2alpha1
