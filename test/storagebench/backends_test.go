//go:build bench

package storagebench

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/recognizer"
	"k8s.io/apiserver/pkg/apis/example"
	examplev1 "k8s.io/apiserver/pkg/apis/example/v1"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/storage"
	cacherstorage "k8s.io/apiserver/pkg/storage/cacher"
	"k8s.io/apiserver/pkg/storage/etcd3"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/utils/clock"

	"github.com/backstop-io/backstop/pkg/storage/pebble"
)

const (
	// storagePrefix and resourcePrefix are the same for both backends:
	// keys are /registry/pods/<namespace>/<name>, as in a real API server.
	storagePrefix  = "/registry"
	resourcePrefix = "/pods/"
)

// backend opens one storage.Interface for example.Pod on a fresh database;
// everything it starts is released by b.Cleanup.
type backend struct {
	name string
	open func(b *testing.B, codec runtime.Codec) storage.Interface
}

// allBackends are run in this order for every benchmark: the etcd server
// of a benchmark is stopped before the next benchmark starts.
func allBackends() []backend {
	return []backend{
		{name: "pebble", open: openPebble},
		{name: "pebble+watchcache", open: openPebbleWithWatchCache},
		{name: "etcd3", open: openEtcd3},
	}
}

// newCodec is the codec both backends store with, built the way the API
// server's storage codecs are (k8s.io/apiserver/pkg/server/storage
// NewStorageCodec, inlined here: that package pulls in modules go.mod does
// not need otherwise). example.Pod is stored as example.apiserver.k8s.io/v1
// in the media type of -storagebench.codec: protobuf by default, like the
// built-in resources of Kubernetes, or json.
func newCodec(tb testing.TB, format string) runtime.Codec {
	mediaTypes := map[string]string{
		"protobuf": runtime.ContentTypeProtobuf,
		"json":     runtime.ContentTypeJSON,
	}
	mediaType, ok := mediaTypes[format]
	if !ok {
		tb.Fatalf("unknown codec %q: want protobuf or json", format)
	}
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	if err := example.AddToScheme(scheme); err != nil {
		tb.Fatalf("registering the example types: %v", err)
	}
	if err := examplev1.AddToScheme(scheme); err != nil {
		tb.Fatalf("registering the example/v1 types: %v", err)
	}
	codecs := serializer.NewCodecFactory(scheme)
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		tb.Fatalf("no serializer for %s", mediaType)
	}
	storageGroup := schema.GroupKind{Group: examplev1.SchemeGroupVersion.Group}
	memoryGroup := schema.GroupKind{Group: example.SchemeGroupVersion.Group}
	encoder := codecs.EncoderForVersion(info.Serializer,
		runtime.NewMultiGroupVersioner(examplev1.SchemeGroupVersion, storageGroup, memoryGroup))
	decoder := codecs.DecoderToVersion(recognizer.NewDecoder(info.Serializer, codecs.UniversalDeserializer()),
		runtime.NewCoercingMultiGroupVersioner(example.SchemeGroupVersion, memoryGroup, storageGroup))
	return runtime.NewCodec(encoder, decoder)
}

func newPodFunc() runtime.Object     { return &example.Pod{} }
func newPodListFunc() runtime.Object { return &example.PodList{} }

func storageConfig(codec runtime.Codec) *storagebackend.ConfigForResource {
	return &storagebackend.ConfigForResource{
		Config: storagebackend.Config{
			Prefix:      storagePrefix,
			Codec:       codec,
			Transformer: identity.NewEncryptCheckTransformer(),
		},
		GroupResource: schema.GroupResource{Resource: "pods"},
	}
}

// openPebble opens a Pebble database on disk (the WAL is synced before a
// write returns) in a temporary directory, with the backend's defaults:
// no history compaction and no watch cache, like the etcd3 side.
func openPebble(b *testing.B, codec runtime.Codec) storage.Interface {
	be, err := pebble.NewBackend(pebble.BackendOptions{Dir: b.TempDir()})
	if err != nil {
		b.Fatalf("opening the pebble backend: %v", err)
	}
	b.Cleanup(func() {
		if err := be.Close(); err != nil {
			b.Errorf("closing the pebble backend: %v", err)
		}
	})
	s, err := be.NewStore(storageConfig(codec), newPodFunc, newPodListFunc, resourcePrefix, nil)
	if err != nil {
		b.Fatalf("creating the pebble store: %v", err)
	}
	return s
}

// openPebbleWithWatchCache is openPebble behind the apiserver's watch cache
// (cacher), as Backstop serves its resources (pebble.Backend.Decorator with
// BackendOptions.WatchCache): writes go through to Pebble, watches and
// lists (consistent ones included, after a progress request) are served from
// the cache.
func openPebbleWithWatchCache(b *testing.B, codec runtime.Codec) storage.Interface {
	s := openPebble(b, codec)
	cfg := storageConfig(codec)
	cfg.EventsHistoryWindow = cacherstorage.DefaultEventFreshDuration
	keyFunc := func(obj runtime.Object) (string, error) { return storage.NamespaceKeyFunc(resourcePrefix, obj) }
	cached, destroy, err := pebble.WithCacher(s, cfg, resourcePrefix, keyFunc, newPodFunc, newPodListFunc, podAttrs, nil, nil)
	if err != nil {
		b.Fatalf("creating the watch cache: %v", err)
	}
	b.Cleanup(destroy)
	return cached
}

// podAttrs are the label and field sets of a pod the watch cache filters by.
func podAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	pod, ok := obj.(*example.Pod)
	if !ok {
		return nil, nil, fmt.Errorf("not a pod: %T", obj)
	}
	return labels.Set(pod.Labels), fields.Set{
		"metadata.name":      pod.Name,
		"metadata.namespace": pod.Namespace,
		"spec.nodeName":      pod.Spec.NodeName,
		"status.phase":       string(pod.Status.Phase),
	}, nil
}

// openEtcd3 starts an etcd server in a temporary directory and opens
// k8s.io/apiserver's etcd3 store on it, wired as
// storagebackend/factory.newETCD3Storage does (without the metrics and
// tracing gRPC interceptors and the latency tracker, which only add cost to
// the etcd3 side), with history compaction off like the Pebble side.
func openEtcd3(b *testing.B, codec runtime.Codec) storage.Interface {
	bin, err := EtcdBinary()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	srv, err := StartEtcd(ctx, bin, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			b.Errorf("stopping etcd: %v", err)
		}
	})

	// The API server's client settings (factory/etcd3.go).
	client, err := kubernetes.New(clientv3.Config{
		Endpoints:            []string{srv.ClientURL},
		DialTimeout:          20 * time.Second,
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: 10 * time.Second,
	})
	if err != nil {
		b.Fatalf("creating the etcd client for %s: %v", srv.ClientURL, err)
	}
	b.Cleanup(func() {
		if err := client.Close(); err != nil {
			b.Errorf("closing the etcd client: %v", err)
		}
	})

	compactor := etcd3.NewCompactor(client.Client, 0, clock.RealClock{}, nil)
	b.Cleanup(compactor.Stop)
	versioner := storage.APIObjectVersioner{}
	cfg := storageConfig(codec)
	transformer, decoder := cfg.Transformer, etcd3.NewDefaultDecoder(cfg.Codec, versioner)
	// As the factory does, and as pebble.Backend.NewStore does.
	unsafeDelete := utilfeature.DefaultFeatureGate.Enabled(features.AllowUnsafeMalformedObjectDeletion)
	if unsafeDelete {
		transformer = etcd3.WithCorruptObjErrorHandlingTransformer(transformer)
		decoder = etcd3.WithCorruptObjErrorHandlingDecoder(decoder)
	}
	st, err := etcd3.New(client, compactor, cfg.Codec, newPodFunc, newPodListFunc, cfg.Prefix, resourcePrefix,
		cfg.GroupResource, transformer, etcd3.NewDefaultLeaseManagerConfig(), decoder, versioner)
	if err != nil {
		b.Fatalf("creating the etcd3 store: %v", err)
	}
	b.Cleanup(st.Close)
	var s storage.Interface = st
	if unsafeDelete {
		s = etcd3.NewStoreWithUnsafeCorruptObjectDeletion(s, cfg.GroupResource)
	}
	return s
}

// forEachBackend runs f as the sub-benchmark backend=<name> for every
// backend, on a store opened for it.
func forEachBackend(b *testing.B, f func(b *testing.B, s storage.Interface)) {
	for _, be := range allBackends() {
		b.Run("backend="+be.name, func(b *testing.B) {
			s := be.open(b, newCodec(b, *codecFormat))
			f(b, s)
		})
	}
}

// podKey is the storage key of pod i (namespaces spread the keys like a
// real cluster's).
func podKey(i int) (namespace, name, key string) {
	namespace = fmt.Sprintf("ns-%02d", i%20)
	name = fmt.Sprintf("pod-%08d", i)
	return namespace, name, resourcePrefix + namespace + "/" + name
}
