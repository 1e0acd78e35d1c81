package pebble

// The upstream conformance suite run with the apiserver's watch cache
// (cacher) in front of the Pebble backend, wired like upstream
// k8s.io/apiserver/pkg/storage/cacher/cacher_test.go wires it in front of
// etcd3.
//
// Run by upstream with the cacher and run here the same way: every RunTest*
// upstream's cacher_test.go runs, except:
//   - WatchFromZero: upstream's compaction helper for it (compactWatch)
//     trims the watch cache's in-memory history through unexported fields;
//     the cacher serves that watch from its own history, so the test checks
//     the cacher rather than the backend. The backend's behaviour is checked
//     by the direct run in store_test.go.
//   - upstream leaves ListInconsistentContinuation, ListResourceVersionMatch,
//     GuaranteedUpdate, GuaranteedUpdateChecksStoredData, TransformationFailure,
//     WatchError and WatchContextCancel disabled for the cacher (TODO #109831),
//     so they are not run here either.

import (
	"context"
	"fmt"
	"testing"
	"time"

	kubernetes "go.etcd.io/etcd/client/v3/kubernetes"

	"k8s.io/apimachinery/pkg/api/apitesting"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/example"
	examplev1 "k8s.io/apiserver/pkg/apis/example/v1"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/storage"
	cacherstorage "k8s.io/apiserver/pkg/storage/cacher"
	storagetesting "k8s.io/apiserver/pkg/storage/testing"
	"k8s.io/apiserver/pkg/storage/value"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/tools/cache"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

var examplev1ProtoCodec runtime.Codec

func init() {
	pb := protobuf.NewSerializer(scheme, scheme)
	examplev1ProtoCodec = codecs.CodecForVersions(pb, pb, schema.GroupVersions{examplev1.SchemeGroupVersion}, nil)
}

func getPodAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	pod, ok := obj.(*example.Pod)
	if !ok {
		return nil, nil, fmt.Errorf("not a pod")
	}
	return labels.Set(pod.Labels), fields.Set{
		"spec.nodeName":      pod.Spec.NodeName,
		"spec.restartPolicy": string(pod.Spec.RestartPolicy),
		"status.phase":       string(pod.Status.Phase),
		"metadata.name":      pod.Name,
		"metadata.namespace": pod.Namespace,
	}, nil
}

type cacherSetupOptions struct {
	keyFunc      func(runtime.Object) (string, error)
	indexerFuncs map[string]storage.IndexerFunc
	indexers     cache.Indexers
	clock        clock.WithTicker
	codec        runtime.Codec
	transformer  value.Transformer
}

type cacherSetupOption func(*cacherSetupOptions)

func withCacherClusterScopedKeyFunc(o *cacherSetupOptions) {
	o.keyFunc = func(obj runtime.Object) (string, error) { return storage.NoNamespaceKeyFunc("/pods/", obj) }
}

// withNodeNameAndNamespaceIndex mirrors upstream's indexer configuration.
func withNodeNameAndNamespaceIndex(o *cacherSetupOptions) {
	o.indexerFuncs = map[string]storage.IndexerFunc{
		"spec.nodeName": func(obj runtime.Object) string {
			pod, ok := obj.(*example.Pod)
			if !ok {
				return ""
			}
			return pod.Spec.NodeName
		},
	}
	o.indexers = map[string]cache.IndexFunc{
		"f:spec.nodeName":      func(obj interface{}) ([]string, error) { return []string{obj.(*example.Pod).Spec.NodeName}, nil },
		"f:metadata.namespace": func(obj interface{}) ([]string, error) { return []string{obj.(*example.Pod).Namespace}, nil },
	}
}

func withCacherClock(c clock.WithTicker) cacherSetupOption {
	return func(o *cacherSetupOptions) { o.clock = c }
}
func withCacherCodec(c runtime.Codec) cacherSetupOption {
	return func(o *cacherSetupOptions) { o.codec = c }
}
func withCacherTransformer(t value.Transformer) cacherSetupOption {
	return func(o *cacherSetupOptions) { o.transformer = t }
}

// cacherEnv is a cacher in front of a Pebble store, plus what the suite's
// helpers need to reach below it.
type cacherEnv struct {
	delegator *cacherstorage.CacheDelegator
	backend   *Backend
	recorder  *storagetesting.KubernetesRecorder
	clock     *testingclock.FakeClock
}

// noopKubernetes lets storagetesting.KubernetesRecorder record the range
// reads the Pebble store reports; nothing is forwarded to an etcd client.
type noopKubernetes struct{ kubernetes.Interface }

func (noopKubernetes) List(context.Context, string, kubernetes.ListOptions) (kubernetes.ListResponse, error) {
	return kubernetes.ListResponse{}, nil
}

func cacherSetup(t *testing.T, opts ...cacherSetupOption) (context.Context, *cacherEnv) {
	o := cacherSetupOptions{
		keyFunc:     func(obj runtime.Object) (string, error) { return storage.NamespaceKeyFunc("/pods/", obj) },
		clock:       clock.RealClock{},
		codec:       examplev1ProtoCodec,
		transformer: identity.NewEncryptCheckTransformer(),
	}
	for _, opt := range opts {
		opt(&o)
	}
	recorder := storagetesting.NewKubernetesRecorder(noopKubernetes{})
	observer := func(ctx context.Context, key string, rev, limit int64, continueKey string) {
		_, _ = recorder.List(ctx, key, kubernetes.ListOptions{Revision: rev, Limit: limit, Continue: continueKey})
	}
	backend, err := NewBackend(BackendOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = backend.Close() })
	versioner := storage.APIObjectVersioner{}
	s, err := newStore(backend.DB(), o.codec, func() runtime.Object { return &example.Pod{} },
		func() runtime.Object { return &example.PodList{} }, "/registry", "/pods/",
		schema.GroupResource{Resource: "pods"}, o.transformer, NewDefaultDecoder(o.codec, versioner), versioner,
		10*time.Minute, observer)
	if err != nil {
		t.Fatal(err)
	}
	announceProgressRequests()

	// Inject one list error, like upstream, to exercise the relist path.
	listErrors := 1
	if clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient) {
		listErrors = 0
	}
	wrapped := &storagetesting.StorageInjectingListErrors{Interface: s, Errors: listErrors}
	cacher, err := cacherstorage.NewCacherFromConfig(cacherstorage.Config{
		Storage:             wrapped,
		Versioner:           versioner,
		GroupResource:       schema.GroupResource{Resource: "pods"},
		EventsHistoryWindow: cacherstorage.DefaultEventFreshDuration,
		ResourcePrefix:      "/pods/",
		KeyFunc:             o.keyFunc,
		GetAttrsFunc:        getPodAttrs,
		NewFunc:             func() runtime.Object { return &example.Pod{} },
		NewListFunc:         func() runtime.Object { return &example.PodList{} },
		IndexerFuncs:        o.indexerFuncs,
		Indexers:            &o.indexers,
		Codec:               o.codec,
		Clock:               o.clock,
	})
	if err != nil {
		t.Fatalf("Failed to initialize cacher: %v", err)
	}
	ctx := context.Background()
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		return wrapped.ErrorsConsumed()
	}); err != nil {
		t.Fatalf("Failed to inject list errors: %v", err)
	}
	if err := cacher.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	delegator := cacherstorage.NewCacheDelegator(cacher, wrapped)
	t.Cleanup(func() {
		delegator.Stop()
		cacher.Stop()
	})
	env := &cacherEnv{delegator: delegator, backend: backend, recorder: recorder}
	if fc, ok := o.clock.(*testingclock.FakeClock); ok {
		env.clock = fc
	}
	return ctx, env
}

// acceleratedClock is a fake clock that runs 100 times faster than real
// time, so that the cacher's 15-second compaction poll and its freshness
// timeouts happen within a test.
func acceleratedClock(t *testing.T) *testingclock.FakeClock {
	fc := testingclock.NewFakeClock(time.Now())
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				fc.Step(500 * time.Millisecond)
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		<-stopped
	})
	return fc
}

// compactStore compacts the backend and, like upstream's helper, makes the
// cacher's compactor observe it (its 15s poll is driven by a fake clock).
func (e *cacherEnv) compactStore(t *testing.T) storagetesting.Compaction {
	return func(ctx context.Context, t *testing.T, resourceVersion string) {
		rv, err := storage.APIObjectVersioner{}.ParseResourceVersion(resourceVersion)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.backend.DB().Compact(int64(rv)); err != nil {
			t.Fatal(err)
		}
		if e.clock == nil || !utilfeature.DefaultFeatureGate.Enabled(features.ListFromCacheSnapshot) {
			return
		}
		// The cacher's compactor polls the store every 15 (accelerated) seconds.
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
			return e.delegator.CompactRevision() == int64(rv), nil
		}); err != nil {
			t.Fatalf("the watch cache did not observe compaction to %d: %v", rv, err)
		}
	}
}

// createWrapper waits until the cacher has observed each created object,
// like upstream's wrapper for the watch-semantics tests.
type createWrapper struct{ *cacherstorage.CacheDelegator }

func (c *createWrapper) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	if err := c.CacheDelegator.Create(ctx, key, obj, out, ttl); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(ctx context.Context) (bool, error) {
		current := &example.Pod{}
		err := c.CacheDelegator.Get(ctx, key, storage.GetOptions{ResourceVersion: "0"}, current)
		if err != nil {
			if storage.IsNotFound(err) {
				return false, nil
			}
			return false, err
		}
		return apiequality.Semantic.DeepEqual(current, out), nil
	})
}

func noopKeyValidation(context.Context, *testing.T, string) {}

func noopCallsValidation(*testing.T, uint64, uint64) {}

func TestCacherCRUD(t *testing.T) {
	tests := map[string]func(ctx context.Context, t *testing.T, s storage.Interface){
		"Create": func(ctx context.Context, t *testing.T, s storage.Interface) {
			storagetesting.RunTestCreate(ctx, t, s, noopKeyValidation)
		},
		"CreateWithTTL":                              storagetesting.RunTestCreateWithTTL,
		"CreateWithKeyExist":                         storagetesting.RunTestCreateWithKeyExist,
		"Get":                                        storagetesting.RunTestGet,
		"UnconditionalDelete":                        storagetesting.RunTestUnconditionalDelete,
		"ConditionalDelete":                          storagetesting.RunTestConditionalDelete,
		"DeleteWithSuggestion":                       storagetesting.RunTestDeleteWithSuggestion,
		"DeleteWithSuggestionAndConflict":            storagetesting.RunTestDeleteWithSuggestionAndConflict,
		"DeleteWithSuggestionOfDeletedObject":        storagetesting.RunTestDeleteWithSuggestionOfDeletedObject,
		"ValidateDeletionWithSuggestion":             storagetesting.RunTestValidateDeletionWithSuggestion,
		"ValidateDeletionWithOnlySuggestionValid":    storagetesting.RunTestValidateDeletionWithOnlySuggestionValid,
		"DeleteWithConflict":                         storagetesting.RunTestDeleteWithConflict,
		"PreconditionalDeleteWithSuggestion":         storagetesting.RunTestPreconditionalDeleteWithSuggestion,
		"PreconditionalDeleteWithOnlySuggestionPass": storagetesting.RunTestPreconditionalDeleteWithOnlySuggestionPass,
		"ListPaging":                                 storagetesting.RunTestListPaging,
		"GetListRecursivePrefix":                     storagetesting.RunTestGetListRecursivePrefix,
		"GuaranteedUpdateWithTTL":                    storagetesting.RunTestGuaranteedUpdateWithTTL,
		"GuaranteedUpdateWithConflict":               storagetesting.RunTestGuaranteedUpdateWithConflict,
		"GuaranteedUpdateWithSuggestionAndConflict":  storagetesting.RunTestGuaranteedUpdateWithSuggestionAndConflict,
		"KeySchema":                                  storagetesting.RunTestKeySchema,
		"ListContinuation": func(ctx context.Context, t *testing.T, s storage.Interface) {
			storagetesting.RunTestListContinuation(ctx, t, s, noopCallsValidation)
		},
		"ListPaginationRareObject": func(ctx context.Context, t *testing.T, s storage.Interface) {
			storagetesting.RunTestListPaginationRareObject(ctx, t, s, noopCallsValidation)
		},
		"ListContinuationWithFilter": func(ctx context.Context, t *testing.T, s storage.Interface) {
			storagetesting.RunTestListContinuationWithFilter(ctx, t, s, noopCallsValidation)
		},
		"DeleteWithSuggestionAndMissingExpectedTransformOrDecodeError": func(ctx context.Context, t *testing.T, s storage.Interface) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.AllowUnsafeMalformedObjectDeletion, true)
			storagetesting.RunTestDeleteWithSuggestionAndMissingExpectedTransformOrDecodeError(ctx, t, s)
		},
	}
	for name, run := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, env := cacherSetup(t)
			run(ctx, t, env.delegator)
		})
	}
}

func TestCacherNamespaceScopedList(t *testing.T) {
	ctx, env := cacherSetup(t, withNodeNameAndNamespaceIndex)
	storagetesting.RunTestNamespaceScopedList(ctx, t, env.delegator)
}

func TestCacherCorruptObjects(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.AllowUnsafeMalformedObjectDeletion, true)
	t.Run("DeleteWithConflictAndMissingExpectedTransformOrDecodeError", func(t *testing.T) {
		transformer := &testTransformer{Transformer: identity.NewEncryptCheckTransformer()}
		ctx, env := cacherSetup(t, withCacherTransformer(transformer))
		storagetesting.RunTestDeleteWithConflictAndMissingExpectedTransformOrDecodeError(ctx, t, env.delegator, transformer.setFailing)
	})
	t.Run("DeleteWithConflictAndExpectedTransformError", func(t *testing.T) {
		transformer := &testTransformer{Transformer: identity.NewEncryptCheckTransformer()}
		ctx, env := cacherSetup(t, withCacherTransformer(transformer))
		storagetesting.RunTestDeleteExpectedTransformOrDecodeError(ctx, t, env.delegator, transformer.setFailing)
	})
	t.Run("DeleteWithConflictAndExpectedDecodeError", func(t *testing.T) {
		codec := &testCodec{Codec: apitesting.TestCodec(codecs, examplev1.SchemeGroupVersion)}
		ctx, env := cacherSetup(t, withCacherCodec(codec))
		storagetesting.RunTestDeleteExpectedTransformOrDecodeError(ctx, t, env.delegator, codec.setFailing)
	})
}

func TestCacherLists(t *testing.T) {
	for _, listFromCacheSnapshot := range []bool{true, false} {
		t.Run(fmt.Sprintf("ListFromCacheSnapshot=%v", listFromCacheSnapshot), func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.ListFromCacheSnapshot, listFromCacheSnapshot)
			t.Run("List", func(t *testing.T) {
				ctx, env := cacherSetup(t, withCacherClock(acceleratedClock(t)))
				storagetesting.RunTestList(ctx, t, env.delegator, env.compactStore(t), true, env.recorder)
			})
			t.Run("ConsistentList", func(t *testing.T) {
				ctx, env := cacherSetup(t)
				storagetesting.RunTestConsistentList(ctx, t, env.delegator, increaseRVFunc(env.backend.DB()), true, true, listFromCacheSnapshot)
			})
			t.Run("GetListNonRecursive", func(t *testing.T) {
				ctx, env := cacherSetup(t)
				storagetesting.RunTestGetListNonRecursive(ctx, t, increaseRVFunc(env.backend.DB()), env.delegator)
			})
		})
	}
}

func TestCacherCompactRevision(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.ListFromCacheSnapshot, true)
	ctx, env := cacherSetup(t, withCacherClock(acceleratedClock(t)))
	storagetesting.RunTestCompactRevision(ctx, t, env.delegator, increaseRVFunc(env.backend.DB()), env.compactStore(t))
}

func TestCacherStats(t *testing.T) {
	for _, sizeBased := range []bool{true, false} {
		t.Run(fmt.Sprintf("SizeBasedListCostEstimate=%v", sizeBased), func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.SizeBasedListCostEstimate, sizeBased)
			ctx, env := cacherSetup(t)
			storagetesting.RunTestStats(ctx, t, env.delegator, examplev1ProtoCodec, identity.NewEncryptCheckTransformer(), sizeBased)
		})
	}
}

func TestCacherWatch(t *testing.T) {
	plain := map[string]func(ctx context.Context, t *testing.T, s storage.Interface){
		"Watch":                              storagetesting.RunTestWatch,
		"DeleteTriggerWatch":                 storagetesting.RunTestDeleteTriggerWatch,
		"WatchFromNonZero":                   storagetesting.RunTestWatchFromNonZero,
		"DelayedWatchDelivery":               storagetesting.RunTestDelayedWatchDelivery,
		"WatcherTimeout":                     storagetesting.RunTestWatcherTimeout,
		"WatchDeleteEventObjectHaveLatestRV": storagetesting.RunTestWatchDeleteEventObjectHaveLatestRV,
		"WatchInitializationSignal":          storagetesting.RunTestWatchInitializationSignal,
		"WatchDispatchBookmarkEvents": func(ctx context.Context, t *testing.T, s storage.Interface) {
			storagetesting.RunTestWatchDispatchBookmarkEvents(ctx, t, s, true)
		},
		"WatchBookmarksWithCorrectResourceVersion": storagetesting.RunTestOptionalWatchBookmarksWithCorrectResourceVersion,
		"SendInitialEventsBackwardCompatibility":   storagetesting.RunSendInitialEventsBackwardCompatibility,
	}
	for name, run := range plain {
		t.Run(name, func(t *testing.T) {
			ctx, env := cacherSetup(t)
			run(ctx, t, env.delegator)
		})
	}
	t.Run("ClusterScopedWatch", func(t *testing.T) {
		ctx, env := cacherSetup(t, withCacherClusterScopedKeyFunc, withNodeNameAndNamespaceIndex)
		storagetesting.RunTestClusterScopedWatch(ctx, t, env.delegator)
	})
	t.Run("NamespaceScopedWatch", func(t *testing.T) {
		ctx, env := cacherSetup(t, withNodeNameAndNamespaceIndex)
		storagetesting.RunTestNamespaceScopedWatch(ctx, t, env.delegator)
	})
	semantics := map[string]func(ctx context.Context, t *testing.T, s storage.Interface){
		"WatchSemantics":                     storagetesting.RunWatchSemantics,
		"WatchSemanticInitialEventsExtended": storagetesting.RunWatchSemanticInitialEventsExtended,
		"WatchListMatchSingle":               storagetesting.RunWatchListMatchSingle,
	}
	for name, run := range semantics {
		t.Run(name, func(t *testing.T) {
			skipWindowedUnderRace(t)
			_, env := cacherSetup(t)
			run(context.TODO(), t, &createWrapper{CacheDelegator: env.delegator})
		})
	}
}
