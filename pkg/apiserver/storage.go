package apiserver

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/registry/generic"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"github.com/backstop-io/backstop/pkg/storage/pebble"
)

// storagePrefix is the key prefix of every resource in the database.
const storagePrefix = "/registry"

// pebbleRESTOptionsGetter makes every genericregistry.Store persist through
// the embedded Pebble backend, encoding objects as JSON in the preferred
// version of their group.
type pebbleRESTOptionsGetter struct {
	backend *pebble.Backend
	scheme  *runtime.Scheme
	codecs  serializer.CodecFactory
	// garbageCollection is on when a kube-controller-manager garbage
	// collector watches this server (aggregated mode).
	garbageCollection bool
}

var _ generic.RESTOptionsGetter = &pebbleRESTOptionsGetter{}

func (g *pebbleRESTOptionsGetter) GetRESTOptions(resource schema.GroupResource, _ runtime.Object) (generic.RESTOptions, error) {
	versions := g.scheme.PrioritizedVersionsForGroup(resource.Group)
	if len(versions) == 0 {
		return generic.RESTOptions{}, fmt.Errorf("no storage version for %s: the group is not registered", resource)
	}
	codec, _, err := serverstorage.NewStorageCodec(serverstorage.StorageCodecConfig{
		StorageMediaType:  runtime.ContentTypeJSON,
		StorageSerializer: g.codecs,
		StorageVersion:    versions[0],
		MemoryVersion:     schema.GroupVersion{Group: resource.Group, Version: runtime.APIVersionInternal},
	})
	if err != nil {
		return generic.RESTOptions{}, fmt.Errorf("building the storage codec of %s: %w", resource, err)
	}
	return generic.RESTOptions{
		StorageConfig: &storagebackend.ConfigForResource{
			Config: storagebackend.Config{
				Type:   "pebble",
				Prefix: storagePrefix,
				Codec:  codec,
				// How far back a watch cache can serve watches from memory.
				EventsHistoryWindow: storagebackend.DefaultEventsHistoryWindow,
			},
			GroupResource: resource,
		},
		Decorator:               g.backend.Decorator(),
		EnableGarbageCollection: g.garbageCollection,
		DeleteCollectionWorkers: 1,
		ResourcePrefix:          "/" + resource.Group + "/" + resource.Resource,
		CountMetricPollPeriod:   time.Minute,
	}, nil
}
