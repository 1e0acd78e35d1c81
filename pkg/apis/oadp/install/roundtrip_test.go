package install

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
)

// TestRoundTripOADPTypes fills internal objects with random values, converts
// them to the served version, encodes and decodes them (JSON and YAML)
// and converts them back, and checks nothing was lost. The versioned
// types mirror the internal ones field for field, so the default fuzzer
// needs no functions of its own. The group has no protobuf serialization
// (its clients speak JSON, as Velero's and OADP's CRDs do), so the
// protobuf round trip is not run.
func TestRoundTripOADPTypes(t *testing.T) {
	roundtrip.RoundTripTestForAPIGroup(t, Install, func(runtimeserializer.CodecFactory) []interface{} { return nil })
}
