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
// +k8s:conversion-gen=github.com/backstop-io/backstop/pkg/apis/oadp
// +k8s:defaulter-gen=TypeMeta
// +groupName=oadp.openshift.io
// +k8s:openapi-model-package=io.openshift.oadp.v1alpha1

// Package v1alpha1 is the oadp.openshift.io/v1alpha1 non-admin API as
// Backstop serves it: NonAdminBackup and NonAdminRestore. The type files are
// derived from github.com/migtools/oadp-non-admin api/v1alpha1 (Apache-2.0)
// and keep every upstream field and JSON name; the embedded Velero specs and
// statuses are Backstop's velero.io/v1 types, which are a JSON superset of
// Velero's.
package v1alpha1
