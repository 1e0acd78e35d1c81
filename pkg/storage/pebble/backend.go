package pebble

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	cacherstorage "k8s.io/apiserver/pkg/storage/cacher"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// BackendOptions configures the embedded storage of a server.
type BackendOptions struct {
	// Dir holds the Pebble database (the server's --data-dir/pebble).
	Dir string
	// InMemory runs without a directory (tests only: nothing is durable).
	InMemory bool
	// CompactionInterval: every interval, history older than the revision
	// seen one interval ago is dropped. 0 disables compaction.
	CompactionInterval time.Duration
	// ProgressNotifyInterval: how often watches that asked for progress
	// notifications get a bookmark. Default 10 minutes, like etcd.
	ProgressNotifyInterval time.Duration
	// RecentEvents is the size of the in-memory event window (default 8192).
	RecentEvents int
	// WatchCache puts the apiserver's watch cache (cacher) in front of every
	// resource store made by Decorator.
	WatchCache bool
}

// Backend is one opened database plus its compactor; it makes the
// storage.Interface of every resource.
type Backend struct {
	db      *DB
	opts    BackendOptions
	stopCh  chan struct{}
	stopped sync.WaitGroup
	once    sync.Once
}

// NewBackend opens the database and starts the compactor.
func NewBackend(opts BackendOptions) (*Backend, error) {
	if opts.ProgressNotifyInterval <= 0 {
		opts.ProgressNotifyInterval = 10 * time.Minute
	}
	db, err := Open(Options{Dir: opts.Dir, InMemory: opts.InMemory, RecentEvents: opts.RecentEvents})
	if err != nil {
		return nil, err
	}
	b := &Backend{db: db, opts: opts, stopCh: make(chan struct{})}
	if opts.CompactionInterval > 0 {
		b.stopped.Add(1)
		go b.compactLoop(opts.CompactionInterval)
	}
	return b, nil
}

// DB exposes the underlying database (tests, benchmarks, tools).
func (b *Backend) DB() *DB { return b.db }

// Close stops the compactor and closes the database.
func (b *Backend) Close() error {
	var err error
	b.once.Do(func() {
		close(b.stopCh)
		b.stopped.Wait()
		err = b.db.Close()
	})
	return err
}

// compactLoop compacts, at each tick, to the revision seen at the previous
// tick: a watcher or paginated list has at least one interval to resume.
func (b *Backend) compactLoop(interval time.Duration) {
	defer b.stopped.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	var last int64
	for {
		select {
		case <-b.stopCh:
			return
		case <-t.C:
		}
		if last > 0 {
			if err := b.db.Compact(last); err != nil {
				klog.ErrorS(err, "Compacting the pebble storage failed", "revision", last)
			} else {
				klog.V(4).InfoS("Compacted the pebble storage", "revision", last)
			}
		}
		last = b.db.Rev()
	}
}

// NewStore returns the storage.Interface of one resource on this backend.
func (b *Backend) NewStore(config *storagebackend.ConfigForResource, newFunc, newListFunc func() runtime.Object, resourcePrefix string, observer ListObserver) (storage.Interface, error) {
	transformer := config.Transformer
	if transformer == nil {
		transformer = identity.NewEncryptCheckTransformer()
	}
	versioner := storage.APIObjectVersioner{}
	decoder := NewDefaultDecoder(config.Codec, versioner)
	unsafeDelete := utilfeature.DefaultFeatureGate.Enabled(features.AllowUnsafeMalformedObjectDeletion)
	if unsafeDelete {
		transformer = &corruptObjErrorInterpretingTransformer{Transformer: transformer}
		decoder = &corruptObjErrorInterpretingDecoder{Decoder: decoder}
	}
	s, err := newStore(b.db, config.Codec, newFunc, newListFunc, config.Prefix, resourcePrefix, config.GroupResource,
		transformer, decoder, versioner, b.opts.ProgressNotifyInterval, observer)
	if err != nil {
		return nil, err
	}
	announceProgressRequests()
	var si storage.Interface = s
	if unsafeDelete {
		si = NewStoreWithUnsafeCorruptObjectDeletion(si, config.GroupResource)
	}
	return si, nil
}

// Decorator is the generic.StorageDecorator that makes every
// genericregistry.Store persist through this backend, behind the watch
// cache when BackendOptions.WatchCache is set.
func (b *Backend) Decorator() generic.StorageDecorator {
	return func(config *storagebackend.ConfigForResource, resourcePrefix string, keyFunc func(obj runtime.Object) (string, error),
		newFunc, newListFunc func() runtime.Object, getAttrsFunc storage.AttrFunc, triggerFuncs storage.IndexerFuncs,
		indexers *cache.Indexers) (storage.Interface, factory.DestroyFunc, error) {
		s, err := b.NewStore(config, newFunc, newListFunc, resourcePrefix, nil)
		if err != nil {
			return nil, nil, err
		}
		if !b.opts.WatchCache {
			return s, func() {}, nil
		}
		return WithCacher(s, config, resourcePrefix, keyFunc, newFunc, newListFunc, getAttrsFunc, triggerFuncs, indexers)
	}
}

// WithCacher puts the apiserver's watch cache in front of a store, exactly
// as genericregistry.StorageWithCacher does for etcd3.
func WithCacher(s storage.Interface, config *storagebackend.ConfigForResource, resourcePrefix string, keyFunc func(obj runtime.Object) (string, error),
	newFunc, newListFunc func() runtime.Object, getAttrsFunc storage.AttrFunc, triggerFuncs storage.IndexerFuncs,
	indexers *cache.Indexers) (storage.Interface, factory.DestroyFunc, error) {
	cacher, err := cacherstorage.NewCacherFromConfig(cacherstorage.Config{
		Storage:             s,
		Versioner:           storage.APIObjectVersioner{},
		GroupResource:       config.GroupResource,
		EventsHistoryWindow: config.EventsHistoryWindow,
		ResourcePrefix:      resourcePrefix,
		KeyFunc:             keyFunc,
		NewFunc:             newFunc,
		NewListFunc:         newListFunc,
		GetAttrsFunc:        getAttrsFunc,
		IndexerFuncs:        triggerFuncs,
		Indexers:            indexers,
		Codec:               config.Codec,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("creating watch cache for %s: %w", config.GroupResource, err)
	}
	delegator := cacherstorage.NewCacheDelegator(cacher, s)
	var once sync.Once
	return delegator, func() {
		once.Do(func() {
			delegator.Stop()
			cacher.Stop()
		})
	}, nil
}

// Healthy returns nil while the database serves reads and writes, and the
// error that stopped it otherwise (e.g. a failed WAL sync).
func (b *Backend) Healthy() error { return b.db.usable() }
