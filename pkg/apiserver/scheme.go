package apiserver

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/backstop-io/backstop/pkg/storage/storedlist"
)

// ownSerializer is the negotiated serializer of Backstop's own groups.
//
// JSON, YAML and CBOR, not protobuf. Their types have no protobuf encoding
// (velero.io and oadp.openshift.io are CRDs in the clusters they come
// from, which serve no protobuf either; Velero's Go types use int fields,
// which protobuf cannot carry). Offering it would answer 500 to the clients
// that prefer it (kube-controller-manager's namespace deletion and garbage
// collector among them): without it, a client that accepts protobuf or
// JSON gets JSON, and one that accepts protobuf alone a 406.
//
// With lists set (Pebble, --lists-from-storage), JSON lists are written
// from the objects' stored bytes (package storedlist); pretty JSON, YAML,
// CBOR, tables and watches are encoded as usual.
type ownSerializer struct {
	runtime.NegotiatedSerializer
	infos []runtime.SerializerInfo
}

func newOwnSerializer(s runtime.NegotiatedSerializer, lists *storedlist.Sources) ownSerializer {
	var infos []runtime.SerializerInfo
	for _, info := range s.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeProtobuf {
			continue
		}
		if info.MediaType == runtime.ContentTypeJSON && lists != nil {
			info.Serializer = storedlist.NewSerializer(info.Serializer, lists)
		}
		infos = append(infos, info)
	}
	return ownSerializer{NegotiatedSerializer: s, infos: infos}
}

func (s ownSerializer) SupportedMediaTypes() []runtime.SerializerInfo { return s.infos }
