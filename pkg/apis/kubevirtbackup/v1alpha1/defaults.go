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

package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
)

// addDefaultingFuncs registers the defaulters defaulter-gen writes into
// zz_generated.defaults.go. The group has no SetDefaults_ functions: the
// proposal's spellings (backupTracker, lower-case mode, backupType, disks) are
// normalized by the registry strategies, not by defaulting, so that the
// stored object is the same whichever version it was written in.
func addDefaultingFuncs(scheme *runtime.Scheme) error {
	return RegisterDefaults(scheme)
}
