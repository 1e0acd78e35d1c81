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

package console

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Console is the web console of a namespace. Every namespace has one,
// named ConsoleName; nothing is stored. Its subresource static serves the
// console's pages.
type Console struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	Status ConsoleStatus
}

// ConsoleStatus says where the console is.
type ConsoleStatus struct {
	// Path is the path of the console's start page on the server, as
	// kube-apiserver and kubectl proxy serve it.
	Path string
}
