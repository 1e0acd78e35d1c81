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
// +k8s:conversion-gen=github.com/backstop-io/backstop/pkg/apis/console
// +groupName=console.backstop.io
// +k8s:openapi-model-package=io.backstop.console.v1

// Package v1 is the console.backstop.io/v1 API: Console, the web console
// of a namespace, which its users open through kubectl proxy at
// /apis/console.backstop.io/v1/namespaces/<namespace>/consoles/ui/static/
// with their own rights.
package v1
