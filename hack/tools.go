//go:build tools

/*
Copyright The Backstop Authors.

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

// Package tools pins what the build runs besides the module's own
// packages, so go.mod records their versions: the code generators
// hack/update-codegen.sh runs; kube-apiserver, kube-controller-manager,
// kube-scheduler and kubelet, which hack/install-kube.sh builds inside
// this module for the aggregated-mode tests and the harness's nodes; and
// the CSI sidecars (snapshot-controller, csi-snapshotter, csi-provisioner,
// csi-attacher), which hack/install-csi.sh builds inside it for the volume
// tests. They then share the module's versions and its compiled packages.
package tools

import (
	_ "github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher"
	_ "github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner"
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter"
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller"
	_ "k8s.io/code-generator"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
