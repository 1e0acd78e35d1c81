package apiserver

import (
	"fmt"
	"path"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	storagevalue "k8s.io/apiserver/pkg/storage/value"

	"github.com/backstop-io/backstop/pkg/registry/resource"
	"github.com/backstop-io/backstop/pkg/storage/storedlist"
)

// storagePrefix is the key prefix of every resource in the Pebble database.
const storagePrefix = "/registry"

// Storage backends (--storage-backend).
const (
	// StoragePebble is the embedded database under the data directory.
	StoragePebble = "pebble"
	// StorageEtcd3 is an etcd cluster, through k8s.io/apiserver's own
	// etcd3 store, shared by every replica.
	StorageEtcd3 = "etcd3"
)

// restOptionsGetter makes every genericregistry.Store persist through one
// storage backend, encoding objects as JSON in the preferred version of
// their group, under /<prefix>/<group>/<resource>/ whichever the backend.
type restOptionsGetter struct {
	// config is the backend's configuration (type, prefix, and for etcd3
	// its transport and compaction); the codec is set per resource.
	config storagebackend.Config
	// decorator opens a resource's store (Pebble's, or the etcd3 store
	// behind the watch cache).
	decorator generic.StorageDecorator
	// transformers, when set (etcd3 with --encryption-provider-config),
	// encrypt what is stored.
	transformers storagevalue.ResourceTransformers
	scheme       *runtime.Scheme
	codecs       serializer.CodecFactory
	// garbageCollection is on when a kube-controller-manager garbage
	// collector watches this server (aggregated mode).
	garbageCollection bool
	// lists, when set, is where every resource's stored objects are
	// read from to write JSON lists (Pebble); stored is its reader.
	lists  *storedlist.Sources
	stored storedlist.Reader
}

var _ resource.FilledOnRead = &restOptionsGetter{}

// FilledOnRead marks the objects of a resource that lists encode rather
// than write from their stored bytes.
func (g *restOptionsGetter) FilledOnRead(resource schema.GroupResource, filled func(obj runtime.Object) bool) {
	if g.lists != nil {
		g.lists.SetFilled(resource, filled)
	}
}

// addListSource registers where a resource's objects are stored, as the
// Go type they are served as in their storage version.
func (g *restOptionsGetter) addListSource(resource schema.GroupResource, storageVersion schema.GroupVersion, example runtime.Object, prefix, resourcePrefix string) error {
	if g.lists == nil || example == nil {
		return nil
	}
	kinds, _, err := g.scheme.ObjectKinds(example)
	if err != nil {
		return fmt.Errorf("the kind of %s: %w", resource, err)
	}
	stored := storageVersion.WithKind(kinds[0].Kind)
	versioned, err := g.scheme.New(stored)
	if err != nil {
		return fmt.Errorf("the stored form of %s: %w", resource, err)
	}
	// The keys genericregistry.Store makes (NamespaceKeyFunc,
	// NoNamespaceKeyFunc) under the store's prefix, as the Pebble store
	// prefixes them.
	root := strings.TrimSuffix(path.Join("/", prefix, resourcePrefix), "/") + "/"
	g.lists.Add(versioned, storedlist.Source{
		Resource: resource,
		Reader:   g.stored,
		Stored:   stored,
		Key: func(namespace, name string) string {
			if namespace == "" {
				return root + name
			}
			return root + namespace + "/" + name
		},
	})
	return nil
}

var _ generic.RESTOptionsGetter = &restOptionsGetter{}

func (g *restOptionsGetter) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	storageVersion, err := g.storageVersion(resource, example)
	if err != nil {
		return generic.RESTOptions{}, err
	}
	config := g.config
	codec, versioner, err := serverstorage.NewStorageCodec(serverstorage.StorageCodecConfig{
		StorageMediaType:  runtime.ContentTypeJSON,
		StorageSerializer: g.codecs,
		StorageVersion:    storageVersion,
		MemoryVersion:     schema.GroupVersion{Group: resource.Group, Version: runtime.APIVersionInternal},
		Config:            config,
	})
	if err != nil {
		return generic.RESTOptions{}, fmt.Errorf("building the storage codec of %s: %w", resource, err)
	}
	config.Codec, config.EncodeVersioner = codec, versioner
	if g.transformers != nil {
		config.Transformer = g.transformers.TransformerForResource(resource)
	}
	resourcePrefix := "/" + resource.Group + "/" + resource.Resource
	if err := g.addListSource(resource, storageVersion, example, config.Prefix, resourcePrefix); err != nil {
		return generic.RESTOptions{}, err
	}
	if config.EventsHistoryWindow == 0 {
		// How far back a watch cache can serve watches from memory.
		config.EventsHistoryWindow = storagebackend.DefaultEventsHistoryWindow
	}
	return generic.RESTOptions{
		StorageConfig:           config.ForResource(resource),
		Decorator:               g.decorator,
		EnableGarbageCollection: g.garbageCollection,
		DeleteCollectionWorkers: 1,
		ResourcePrefix:          resourcePrefix,
		CountMetricPollPeriod:   time.Minute,
	}, nil
}

// storageVersion is the version a resource's objects are stored in: the
// group's most preferred version that has the resource's kind (velero.io
// stores Backups as v1, DataUploads as v2alpha1, the only version that has
// them).
func (g *restOptionsGetter) storageVersion(resource schema.GroupResource, example runtime.Object) (schema.GroupVersion, error) {
	versions := g.scheme.PrioritizedVersionsForGroup(resource.Group)
	if len(versions) == 0 {
		return schema.GroupVersion{}, fmt.Errorf("no storage version for %s: the group is not registered", resource)
	}
	if example == nil {
		return versions[0], nil
	}
	kinds, _, err := g.scheme.ObjectKinds(example)
	if err != nil {
		return schema.GroupVersion{}, fmt.Errorf("no storage version for %s: %w", resource, err)
	}
	for _, v := range versions {
		if g.scheme.Recognizes(v.WithKind(kinds[0].Kind)) {
			return v, nil
		}
	}
	return schema.GroupVersion{}, fmt.Errorf("no storage version for %s: no version of %s has kind %s", resource, resource.Group, kinds[0].Kind)
}

// etcd3Decorator is how an etcd3 store is opened: the upstream etcd3 store,
// behind the upstream watch cache when watchCache is set.
func etcd3Decorator(watchCache bool) generic.StorageDecorator {
	if watchCache {
		return genericregistry.StorageWithCacher()
	}
	return generic.UndecoratedStorage
}
