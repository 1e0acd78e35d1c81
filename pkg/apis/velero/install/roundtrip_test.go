package install

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"

	"github.com/backstop-io/backstop/pkg/apis/velero"
)

// TestRoundTripVeleroTypes fills internal objects with random values, converts
// them to the served version, encodes and decodes them (JSON and YAML)
// and converts them back, and checks nothing was lost. The versioned
// types mirror the internal ones field for field, so the default fuzzer
// needs one function only: a DataUpload's status.dataMoverResult (a
// pointer to a map, as upstream has it) pointing at an empty map encodes
// as nothing, as upstream's does. The group has no protobuf serialization
// (its clients speak JSON, as Velero's and OADP's CRDs do), so the
// protobuf round trip is not run.
func TestRoundTripVeleroTypes(t *testing.T) {
	roundtrip.RoundTripTestForAPIGroup(t, Install, func(runtimeserializer.CodecFactory) []interface{} {
		return []interface{}{
			func(s *velero.DataUploadStatus, c randfill.Continue) {
				c.FillNoCustom(s)
				if s.DataMoverResult != nil && len(*s.DataMoverResult) == 0 {
					s.DataMoverResult = nil
				}
			},
		}
	})
}
