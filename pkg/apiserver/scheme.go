package apiserver

import (
	"k8s.io/apimachinery/pkg/runtime"
)

// withoutProtobuf is the negotiated serializer of Backstop's own groups:
// JSON, YAML and CBOR, not protobuf. Their types have no protobuf encoding
// (velero.io and oadp.openshift.io are CRDs in the clusters they come
// from, which serve no protobuf either; Velero's Go types use int fields,
// which protobuf cannot carry). Offering it would answer 500 to the clients
// that prefer it (kube-controller-manager's namespace deletion and garbage
// collector among them): without it, a client that accepts protobuf or
// JSON gets JSON, and one that accepts protobuf alone a 406.
type withoutProtobuf struct {
	runtime.NegotiatedSerializer
}

func (s withoutProtobuf) SupportedMediaTypes() []runtime.SerializerInfo {
	var out []runtime.SerializerInfo
	for _, info := range s.NegotiatedSerializer.SupportedMediaTypes() {
		if info.MediaType != runtime.ContentTypeProtobuf {
			out = append(out, info)
		}
	}
	return out
}
