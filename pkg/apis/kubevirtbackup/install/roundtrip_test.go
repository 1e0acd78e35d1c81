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

package install

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"

	kvbackupfuzzer "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/fuzzer"
)

// TestRoundTripKubeVirtBackupTypes fills internal objects with random values, converts
// them to v1alpha1, encodes and decodes them (JSON and YAML) and converts
// them back, and checks nothing was lost. The group has no protobuf
// serialization, so the protobuf round trip is not run.
func TestRoundTripKubeVirtBackupTypes(t *testing.T) {
	roundtrip.RoundTripTestForAPIGroup(t, Install, kvbackupfuzzer.Funcs)
}
