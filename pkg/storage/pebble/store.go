package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"reflect"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/value"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
)

// maxLimit caps one read from the database while filling a filtered page,
// like the etcd3 backend.
const maxLimit = 10000

// authenticatedDataString binds transformed (e.g. encrypted) data to its key.
type authenticatedDataString string

func (d authenticatedDataString) AuthenticatedData() []byte { return []byte(string(d)) }

var _ value.Context = authenticatedDataString("")

// ListObserver is told about every range read a recursive LIST makes
// (start key, revision, limit). Tests use it to check how a watch cache in
// front of the store reads from it; production code leaves it nil.
type ListObserver func(ctx context.Context, key string, rev, limit int64, continueKey string)

type store struct {
	db                 *DB
	codec              runtime.Codec
	versioner          storage.Versioner
	transformer        value.Transformer
	pathPrefix         string
	resourcePrefix     string
	groupResource      schema.GroupResource
	newListFunc        func() runtime.Object
	watcher            *watcher
	decoder            Decoder
	listErrAggrFactory func() listItemErrors
	listObserver       ListObserver

	sizeEstimation bool
}

var _ storage.Interface = (*store)(nil)

type objState struct {
	kv    *keyValue // the stored record, when read from storage
	obj   runtime.Object
	meta  *storage.ResponseMeta
	rev   int64
	data  []byte
	stale bool
}

// newStore builds the storage.Interface of one resource.
func newStore(db *DB, codec runtime.Codec, newFunc, newListFunc func() runtime.Object, prefix, resourcePrefix string,
	groupResource schema.GroupResource, transformer value.Transformer, decoder Decoder, versioner storage.Versioner,
	progressInterval time.Duration, observer ListObserver) (*store, error) {
	pathPrefix := path.Join("/", prefix)
	if !strings.HasSuffix(pathPrefix, "/") {
		pathPrefix += "/"
	}
	if resourcePrefix == "" {
		return nil, fmt.Errorf("resourcePrefix cannot be empty")
	}
	if resourcePrefix == "/" {
		return nil, fmt.Errorf("resourcePrefix cannot be /")
	}
	if !strings.HasPrefix(resourcePrefix, "/") {
		return nil, fmt.Errorf("resourcePrefix needs to start from /")
	}
	listErrAggrFactory := defaultListErrorAggregatorFactory
	if utilfeature.DefaultFeatureGate.Enabled(features.AllowUnsafeMalformedObjectDeletion) {
		listErrAggrFactory = corruptObjErrAggregatorFactory(maxCorruptObjErrsToAggregate)
	}
	w := &watcher{
		db:               db,
		codec:            codec,
		newFunc:          newFunc,
		groupResource:    groupResource,
		versioner:        versioner,
		transformer:      transformer,
		progressInterval: progressInterval,
	}
	s := &store{
		db:                 db,
		codec:              codec,
		versioner:          versioner,
		transformer:        transformer,
		pathPrefix:         pathPrefix,
		resourcePrefix:     resourcePrefix,
		groupResource:      groupResource,
		newListFunc:        newListFunc,
		watcher:            w,
		decoder:            decoder,
		listErrAggrFactory: listErrAggrFactory,
		listObserver:       observer,
	}
	w.getCurrentStorageRV = s.GetCurrentResourceVersion
	return s, nil
}

// Versioner implements storage.Interface.
func (s *store) Versioner() storage.Versioner { return s.versioner }

// CompactRevision implements storage.Interface.
func (s *store) CompactRevision() int64 { return s.db.CompactedRev() }

// ReadinessCheck implements storage.Interface.
func (s *store) ReadinessCheck() error {
	return s.db.usable()
}

// RequestWatchProgress implements storage.Interface: every watch reports a
// bookmark at the current revision once it has delivered everything before it.
func (s *store) RequestWatchProgress(ctx context.Context) error {
	s.db.RequestProgress()
	return nil
}

// GetCurrentResourceVersion implements storage.Interface.
func (s *store) GetCurrentResourceVersion(ctx context.Context) (uint64, error) {
	rev := s.db.Rev()
	if err := s.db.waitDurable(ctx, rev); err != nil {
		return 0, err
	}
	if rev == 0 {
		return 0, fmt.Errorf("the current resource version must be greater than 0")
	}
	return uint64(rev), nil
}

// EnableResourceSizeEstimation implements storage.Interface. Sizes are read
// from the database itself on Stats, so the keys function is not needed.
func (s *store) EnableResourceSizeEstimation(getKeys storage.KeysFunc) error {
	if getKeys == nil {
		return errors.New("KeysFunc cannot be nil")
	}
	if s.sizeEstimation {
		return errors.New("resourceSizeEstimator already enabled")
	}
	s.sizeEstimation = true
	return nil
}

// Stats implements storage.Interface.
func (s *store) Stats(ctx context.Context) (storage.Stats, error) {
	prefix, err := s.prepareKey(s.resourcePrefix, true)
	if err != nil {
		return storage.Stats{}, err
	}
	if !s.sizeEstimation {
		res, err := s.db.Range(ctx, prefix, prefixEnd(prefix), rangeOptions{countOnly: true})
		if err != nil {
			return storage.Stats{}, err
		}
		return storage.Stats{ObjectCount: res.count}, nil
	}
	count, size, err := s.db.sizeOf(ctx, prefix, prefixEnd(prefix))
	if err != nil {
		return storage.Stats{}, err
	}
	stats := storage.Stats{ObjectCount: count}
	if count > 0 {
		stats.EstimatedAverageObjectSizeBytes = size / count
	}
	return stats, nil
}

// getKeys lists the keys of this resource (the KeysFunc of the upstream API).
func (s *store) getKeys(ctx context.Context) ([]string, error) {
	prefix, err := s.prepareKey(s.resourcePrefix, true)
	if err != nil {
		return nil, err
	}
	res, err := s.db.Range(ctx, prefix, prefixEnd(prefix), rangeOptions{keysOnly: true})
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(res.kvs))
	for _, kv := range res.kvs {
		keys = append(keys, kv.key)
	}
	return keys, nil
}

// Get implements storage.Interface.
func (s *store) Get(ctx context.Context, key string, opts storage.GetOptions, out runtime.Object) error {
	preparedKey, err := s.prepareKey(key, false)
	if err != nil {
		return err
	}
	res, err := s.db.Range(ctx, preparedKey, "", rangeOptions{})
	if err != nil {
		return err
	}
	if err := s.validateMinimumResourceVersion(opts.ResourceVersion, uint64(res.rev)); err != nil {
		return err
	}
	if len(res.kvs) == 0 {
		if opts.IgnoreNotFound {
			return runtime.SetZeroValue(out)
		}
		return storage.NewKeyNotFoundError(preparedKey, 0)
	}
	kv := res.kvs[0]
	data, _, err := s.transformer.TransformFromStorage(ctx, kv.value, authenticatedDataString(preparedKey))
	if err != nil {
		return storage.NewInternalError(err)
	}
	if err := s.decoder.Decode(data, out, kv.modRev); err != nil {
		klog.V(4).Infof("Decoding %s %q failed: %v", s.groupResource, preparedKey, err)
		return err
	}
	return nil
}

// Create implements storage.Interface. A ttl (seconds) deletes the object
// once it has passed, like an etcd lease.
func (s *store) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	preparedKey, err := s.prepareKey(key, false)
	if err != nil {
		return err
	}
	if version, err := s.versioner.ObjectResourceVersion(obj); err == nil && version != 0 {
		return storage.ErrResourceVersionSetOnCreate
	}
	if err := s.versioner.PrepareObjectForStorage(obj); err != nil {
		return fmt.Errorf("PrepareObjectForStorage failed: %w", err)
	}
	data, err := runtime.Encode(s.codec, obj)
	if err != nil {
		return err
	}
	newData, err := s.transformer.TransformToStorage(ctx, data, authenticatedDataString(preparedKey))
	if err != nil {
		return storage.NewInternalError(err)
	}
	res, err := s.db.writeTTL(ctx, preparedKey, newData, false, 0, time.Duration(ttl)*time.Second, nil)
	if err != nil {
		return err
	}
	if !res.succeeded {
		return storage.NewKeyExistsError(preparedKey, 0)
	}
	if out != nil {
		if err := s.decoder.Decode(data, out, res.rev); err != nil {
			return err
		}
	}
	return nil
}

// Delete implements storage.Interface.
func (s *store) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, cachedExistingObject runtime.Object, opts storage.DeleteOptions) error {
	preparedKey, err := s.prepareKey(key, false)
	if err != nil {
		return err
	}
	v, err := conversion.EnforcePtr(out)
	if err != nil {
		return fmt.Errorf("unable to convert output object to pointer: %w", err)
	}
	expectTransformOrDecodeError := false
	if utilfeature.DefaultFeatureGate.Enabled(features.AllowUnsafeMalformedObjectDeletion) {
		expectTransformOrDecodeError = opts.ExpectTransformOrDecodeError
	}
	return s.conditionalDelete(ctx, preparedKey, out, v, preconditions, validateDeletion, cachedExistingObject, expectTransformOrDecodeError)
}

func (s *store) conditionalDelete(ctx context.Context, key string, out runtime.Object, v reflect.Value, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, cachedExistingObject runtime.Object, expectTransformOrDecodeError bool) error {
	getCurrentState := s.getCurrentState(ctx, key, v, false, expectTransformOrDecodeError)

	var origState *objState
	var err error
	var origStateIsCurrent bool
	if cachedExistingObject != nil && !expectTransformOrDecodeError {
		origState, err = s.getStateFromObject(cachedExistingObject)
	} else {
		origState, err = getCurrentState()
		origStateIsCurrent = true
	}
	if err != nil {
		return err
	}

	// retryWithCurrent re-reads the object after a check failed on possibly
	// stale cached data; it reports whether the caller should retry.
	retryWithCurrent := func(checkErr error) (bool, error) {
		if origStateIsCurrent {
			return false, checkErr
		}
		cachedRev := origState.rev
		origState, err = getCurrentState()
		if err != nil {
			return false, err
		}
		origStateIsCurrent = true
		if cachedRev == origState.rev {
			return false, checkErr
		}
		return true, nil
	}

	for {
		if preconditions != nil {
			if err := preconditions.Check(key, origState.obj); err != nil {
				if retry, err := retryWithCurrent(err); !retry {
					return err
				}
				continue
			}
		}
		if err := validateDeletion(ctx, origState.obj); err != nil {
			if retry, err := retryWithCurrent(err); !retry {
				return err
			}
			continue
		}

		res, err := s.db.writeTTL(ctx, key, nil, true, origState.rev, 0, origState.kv)
		if err != nil {
			return err
		}
		if !res.succeeded {
			klog.V(4).Infof("deletion of %s failed because of a conflict, going to retry", key)
			origState, err = s.getState(ctx, res.current, key, v, false, expectTransformOrDecodeError)
			if err != nil {
				return err
			}
			origStateIsCurrent = true
			continue
		}
		if !expectTransformOrDecodeError {
			if err := s.decoder.Decode(origState.data, out, res.rev); err != nil {
				return err
			}
		}
		return nil
	}
}

// GuaranteedUpdate implements storage.Interface.
func (s *store) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	preparedKey, err := s.prepareKey(key, false)
	if err != nil {
		return err
	}
	v, err := conversion.EnforcePtr(destination)
	if err != nil {
		return fmt.Errorf("unable to convert output object to pointer: %w", err)
	}
	getCurrentState := s.getCurrentState(ctx, preparedKey, v, ignoreNotFound, false)

	var origState *objState
	var origStateIsCurrent bool
	if cachedExistingObject != nil {
		origState, err = s.getStateFromObject(cachedExistingObject)
	} else {
		origState, err = getCurrentState()
		origStateIsCurrent = true
	}
	if err != nil {
		return err
	}

	transformContext := authenticatedDataString(preparedKey)
	for {
		if err := preconditions.Check(preparedKey, origState.obj); err != nil {
			if origStateIsCurrent {
				return err
			}
			origState, err = getCurrentState()
			if err != nil {
				return err
			}
			origStateIsCurrent = true
			continue
		}

		ret, ttl, err := s.updateState(origState, tryUpdate)
		if err != nil {
			if origStateIsCurrent {
				return err
			}
			cachedRev := origState.rev
			cachedUpdateErr := err
			origState, err = getCurrentState()
			if err != nil {
				return err
			}
			origStateIsCurrent = true
			if cachedRev == origState.rev {
				return cachedUpdateErr
			}
			continue
		}

		data, err := runtime.Encode(s.codec, ret)
		if err != nil {
			return err
		}
		if !origState.stale && bytes.Equal(data, origState.data) {
			// A no-op update: do not write, do not bump the revision. If the
			// state came from a cache, confirm it against storage first.
			if !origStateIsCurrent {
				origState, err = getCurrentState()
				if err != nil {
					return err
				}
				origStateIsCurrent = true
				if !bytes.Equal(data, origState.data) {
					continue
				}
			}
			if !origState.stale {
				return s.decoder.Decode(origState.data, destination, origState.rev)
			}
		}

		newData, err := s.transformer.TransformToStorage(ctx, data, transformContext)
		if err != nil {
			return storage.NewInternalError(err)
		}
		res, err := s.db.writeTTL(ctx, preparedKey, newData, false, origState.rev, time.Duration(ttl)*time.Second, origState.kv)
		if err != nil {
			return err
		}
		if !res.succeeded {
			klog.V(4).Infof("GuaranteedUpdate of %s failed because of a conflict, going to retry", preparedKey)
			origState, err = s.getState(ctx, res.current, preparedKey, v, ignoreNotFound, false)
			if err != nil {
				return err
			}
			origStateIsCurrent = true
			continue
		}
		return s.decoder.Decode(data, destination, res.rev)
	}
}

func getNewItemFunc(listObj runtime.Object, v reflect.Value) func() runtime.Object {
	if unstructuredList, isUnstructured := listObj.(*unstructured.UnstructuredList); isUnstructured {
		if apiVersion := unstructuredList.GetAPIVersion(); len(apiVersion) > 0 {
			return func() runtime.Object {
				return &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": apiVersion}}
			}
		}
	}
	elem := v.Type().Elem()
	return func() runtime.Object {
		return reflect.New(elem).Interface().(runtime.Object)
	}
}

// GetList implements storage.Interface.
func (s *store) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	keyPrefix, err := s.prepareKey(key, opts.Recursive)
	if err != nil {
		return err
	}
	listPtr, err := meta.GetItemsPtr(listObj)
	if err != nil {
		return err
	}
	v, err := conversion.EnforcePtr(listPtr)
	if err != nil || v.Kind() != reflect.Slice {
		return fmt.Errorf("need ptr to slice: %v", err)
	}
	limit := opts.Predicate.Limit
	paging := opts.Predicate.Limit > 0
	newItemFunc := getNewItemFunc(listObj, v)
	// Typed items are decoded in place, into the list's own slice.
	_, unstructuredList := listObj.(*unstructured.UnstructuredList)
	typedItems := !unstructuredList

	withRev, continueKey, err := storage.ValidateListOptions(keyPrefix, s.versioner, opts)
	if err != nil {
		return err
	}

	aggregator := s.listErrAggrFactory()
	var lastKey string
	var hasMore bool
	var count int64
	for {
		res, err := s.readRange(ctx, keyPrefix, opts.Recursive, withRev, limit, continueKey)
		if err != nil {
			if errors.Is(err, ErrFutureRev) {
				current, _ := s.GetCurrentResourceVersion(ctx)
				return storage.NewTooLargeResourceVersionError(uint64(withRev), current, 0)
			}
			return interpretListError(err, len(opts.Predicate.Continue) > 0, continueKey, keyPrefix)
		}
		if withRev == 0 {
			if err := s.validateMinimumResourceVersion(opts.ResourceVersion, uint64(res.rev)); err != nil {
				return err
			}
			withRev = res.rev
		}
		count = res.count
		if opts.Predicate.Empty() {
			growSlice(v, len(res.kvs))
		} else {
			growSlice(v, 2048, len(res.kvs))
		}
		limitReached := false
		// Items are decoded a chunk at a time, each chunk in parallel.
		for i := 0; i < len(res.kvs); {
			if paging && int64(v.Len()) >= opts.Predicate.Limit {
				limitReached = true
				break
			}
			select {
			case <-ctx.Done():
				return storage.NewTimeoutError(res.kvs[i].key, "request did not complete within requested timeout")
			default:
			}
			n := min(listDecodeChunk, len(res.kvs)-i)
			if paging {
				// Never decode past the item that could fill the page (with
				// a filter, fewer may match: the next chunk goes on from there).
				n = min(n, int(opts.Predicate.Limit)-v.Len())
			}
			chunk := res.kvs[i : i+n]
			if err := s.appendListItems(ctx, chunk, opts.Predicate, newItemFunc, typedItems, aggregator, v); err != nil {
				return err
			}
			lastKey = chunk[n-1].key
			i += n
		}
		hasMore = res.more || limitReached
		if limitReached || !res.more {
			break
		}
		if paging && int64(v.Len()) >= opts.Predicate.Limit {
			break
		}
		continueKey = lastKey + "\x00"
		if limit < maxLimit {
			// Filters dropped items: double the page to reduce round trips.
			limit *= 2
			if limit > maxLimit {
				limit = maxLimit
			}
		}
	}

	continueValue, remainingItemCount, err := storage.PrepareContinueToken(lastKey, keyPrefix, withRev, count, hasMore, opts)
	if err != nil {
		return err
	}
	if err := aggregator.Aggregate(); err != nil {
		return err
	}
	if v.IsNil() {
		v.Set(reflect.MakeSlice(v.Type(), 0, 0))
	}
	if err := s.versioner.UpdateList(listObj, uint64(withRev), continueValue, remainingItemCount); err != nil {
		return err
	}
	if utilfeature.DefaultFeatureGate.Enabled(features.ShardedListAndWatch) {
		opts.Predicate.SetShardInfoOnList(listObj)
	}
	return nil
}

// readRange reads one page of a list: the single key, or the keys under
// keyPrefix starting at continueKey.
func (s *store) readRange(ctx context.Context, keyPrefix string, recursive bool, rev, limit int64, continueKey string) (rangeResult, error) {
	if !recursive {
		return s.db.Range(ctx, keyPrefix, "", rangeOptions{rev: rev})
	}
	if s.listObserver != nil {
		s.listObserver(ctx, keyPrefix, rev, limit, continueKey)
	}
	start := keyPrefix
	if continueKey != "" {
		start = continueKey
	}
	return s.db.Range(ctx, start, prefixEnd(keyPrefix), rangeOptions{rev: rev, limit: limit})
}

// listDecodeChunk is how many list items are decoded before they are
// appended to the list (and the request's context checked again).
const listDecodeChunk = 10000

// minItemsPerDecoder: list items are decoded in batches of this many, and a
// goroutine is added for every batch, up to GOMAXPROCS.
const minItemsPerDecoder = 32

// itemResult is the outcome of decoding one list item.
type itemResult struct {
	matched bool
	err     error // the item could not be transformed or decoded
}

// appendListItems decodes stored list items, in parallel, and appends those
// matching pred to the list slice v in key order; items that cannot be
// transformed or decoded go to the aggregator. Typed items are decoded into
// v's own elements (no copy); others into new objects from newItemFunc.
func (s *store) appendListItems(ctx context.Context, kvs []*keyValue, pred storage.SelectionPredicate, newItemFunc func() runtime.Object,
	inPlace bool, aggregator listItemErrors, v reflect.Value) error {
	results := make([]itemResult, len(kvs))
	objs := make([]runtime.Object, len(kvs))
	start := v.Len()
	if inPlace {
		if v.Cap() < start+len(kvs) {
			grown := reflect.MakeSlice(v.Type(), start, max(start+len(kvs), 2*v.Cap()))
			reflect.Copy(grown, v)
			v.Set(grown)
		}
		v.SetLen(start + len(kvs))
	}
	inParallel(len(kvs), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			kv := kvs[i]
			data, _, err := s.transformer.TransformFromStorage(ctx, kv.value, authenticatedDataString(kv.key))
			if err != nil {
				results[i].err = storage.NewInternalError(fmt.Errorf("unable to transform key %q: %w", kv.key, err))
				continue
			}
			var obj runtime.Object
			if inPlace {
				obj = v.Index(start + i).Addr().Interface().(runtime.Object)
				err = s.decoder.Decode(data, obj, kv.modRev)
			} else {
				obj, err = s.decoder.DecodeListItem(ctx, data, uint64(kv.modRev), newItemFunc)
			}
			if err != nil {
				klog.V(4).Infof("Decoding %s %q failed: %v", s.groupResource, kv.key, err)
				results[i].err = err
				continue
			}
			objs[i] = obj
			matched, err := pred.Matches(obj)
			results[i].matched = matched && err == nil
		}
	})

	// As if decoded one by one: an error that aborts the list leaves the
	// items before it in the list.
	var abortErr error
	end := start // v[start:end] holds the kept items
	for i, r := range results {
		if r.err != nil {
			if done := aggregator.Append(kvs[i].key, r.err); done {
				abortErr = aggregator.Aggregate()
				break
			}
		}
		if !r.matched {
			continue
		}
		if !inPlace {
			v.Set(reflect.Append(v, reflect.ValueOf(objs[i]).Elem()))
			continue
		}
		if end != start+i {
			v.Index(end).Set(v.Index(start + i))
		}
		end++
	}
	if inPlace {
		// Clear what was decoded but not kept, so the next chunk decodes
		// into zero values.
		for i := end; i < start+len(kvs); i++ {
			v.Index(i).SetZero()
		}
		v.SetLen(end)
	}
	return abortErr
}

// inParallel runs f over [0, n) in batches of minItemsPerDecoder items
// taken in turn by up to GOMAXPROCS goroutines (the caller's included), and
// waits for them.
func inParallel(n int, f func(lo, hi int)) {
	workers := min(goruntime.GOMAXPROCS(0), n/minItemsPerDecoder)
	if workers <= 1 {
		f(0, n)
		return
	}
	var next atomic.Int64
	var panicked atomic.Value
	work := func() {
		defer func() {
			// A panic (a decoder, a conversion, GetAttrs) is raised again on
			// the caller's goroutine, where the server's recovery turns it
			// into a failed request instead of a crashed process.
			if r := recover(); r != nil {
				panicked.CompareAndSwap(nil, fmt.Sprint(r))
			}
		}()
		for {
			lo := int(next.Add(minItemsPerDecoder)) - minItemsPerDecoder
			if lo >= n {
				return
			}
			f(lo, min(lo+minItemsPerDecoder, n))
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
	if r := panicked.Load(); r != nil {
		panic(fmt.Sprintf("decoding list items: %v", r))
	}
}

// growSlice grows the capacity of a slice value up to the largest of sizes,
// capped at maxCapacity (same policy as the etcd3 backend).
func growSlice(v reflect.Value, maxCapacity int, sizes ...int) {
	cap := v.Cap()
	max := cap
	for _, size := range sizes {
		if size > max {
			max = size
		}
	}
	if len(sizes) == 0 || max > maxCapacity {
		max = maxCapacity
	}
	if max <= cap {
		return
	}
	extra := reflect.MakeSlice(v.Type(), v.Len(), max)
	reflect.Copy(extra, v)
	v.Set(extra)
}

// Watch implements storage.Interface.
func (s *store) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	preparedKey, err := s.prepareKey(key, opts.Recursive)
	if err != nil {
		return nil, err
	}
	rev, err := s.versioner.ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	return s.watcher.Watch(ctx, preparedKey, int64(rev), opts)
}

func (s *store) getCurrentState(ctx context.Context, key string, v reflect.Value, ignoreNotFound bool, expectTransformOrDecodeError bool) func() (*objState, error) {
	return func() (*objState, error) {
		res, err := s.db.Range(ctx, key, "", rangeOptions{})
		if err != nil {
			return nil, err
		}
		var kv *keyValue
		if len(res.kvs) > 0 {
			kv = res.kvs[0]
		}
		return s.getState(ctx, kv, key, v, ignoreNotFound, expectTransformOrDecodeError)
	}
}

// getState builds an objState from a stored value. With
// expectTransformOrDecodeError, success to transform and decode is an error
// (unsafe deletion applies only to corrupt objects).
func (s *store) getState(ctx context.Context, kv *keyValue, key string, v reflect.Value, ignoreNotFound bool, expectTransformOrDecodeError bool) (*objState, error) {
	state := &objState{meta: &storage.ResponseMeta{}}
	if u, ok := v.Addr().Interface().(runtime.Unstructured); ok {
		state.obj = u.NewEmptyInstance()
	} else {
		state.obj = reflect.New(v.Type()).Interface().(runtime.Object)
	}
	if kv == nil {
		if !ignoreNotFound {
			return nil, storage.NewKeyNotFoundError(key, 0)
		}
		if err := runtime.SetZeroValue(state.obj); err != nil {
			return nil, err
		}
		return state, nil
	}
	state.kv = kv
	state.rev = kv.modRev
	state.meta.ResourceVersion = uint64(state.rev)

	data, stale, err := s.transformer.TransformFromStorage(ctx, kv.value, authenticatedDataString(key))
	if err != nil {
		if !expectTransformOrDecodeError {
			return nil, storage.NewInternalError(err)
		}
		state.obj = nil
		state.stale = true
		return state, nil
	}
	state.data = data
	state.stale = stale
	if err := s.decoder.Decode(state.data, state.obj, state.rev); err != nil {
		if !expectTransformOrDecodeError {
			return nil, err
		}
		state.obj = nil
		return state, nil
	}
	if expectTransformOrDecodeError {
		return nil, storage.NewInvalidObjError(key, "unsafe deletion is not allowed because the object is decodable from storage")
	}
	return state, nil
}

func (s *store) getStateFromObject(obj runtime.Object) (*objState, error) {
	state := &objState{obj: obj, meta: &storage.ResponseMeta{}}
	rv, err := s.versioner.ObjectResourceVersion(obj)
	if err != nil {
		return nil, fmt.Errorf("couldn't get resource version: %w", err)
	}
	state.rev = int64(rv)
	state.meta.ResourceVersion = uint64(state.rev)
	// The stored form has no resourceVersion: clear it to encode, then restore.
	if err := s.versioner.PrepareObjectForStorage(obj); err != nil {
		return nil, fmt.Errorf("PrepareObjectForStorage failed: %w", err)
	}
	state.data, err = runtime.Encode(s.codec, obj)
	if err != nil {
		return nil, err
	}
	if err := s.versioner.UpdateObject(state.obj, rv); err != nil {
		klog.Errorf("failed to update object version: %v", err)
	}
	return state, nil
}

func (s *store) updateState(st *objState, userUpdate storage.UpdateFunc) (runtime.Object, uint64, error) {
	ret, ttlPtr, err := userUpdate(st.obj, *st.meta)
	if err != nil {
		return nil, 0, err
	}
	if err := s.versioner.PrepareObjectForStorage(ret); err != nil {
		return nil, 0, fmt.Errorf("PrepareObjectForStorage failed: %w", err)
	}
	var ttl uint64
	if ttlPtr != nil {
		ttl = *ttlPtr
	}
	return ret, ttl, nil
}

// validateMinimumResourceVersion returns a "too large resource version" error
// when the requested minimum is newer than what storage has.
func (s *store) validateMinimumResourceVersion(minimumResourceVersion string, actualRevision uint64) error {
	if minimumResourceVersion == "" {
		return nil
	}
	minimumRV, err := s.versioner.ParseResourceVersion(minimumResourceVersion)
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %v", err))
	}
	if minimumRV > actualRevision {
		return storage.NewTooLargeResourceVersionError(minimumRV, actualRevision, 0)
	}
	return nil
}

func (s *store) prepareKey(key string, recursive bool) (string, error) {
	key, err := storage.PrepareKey(s.resourcePrefix, key, recursive)
	if err != nil {
		return "", err
	}
	startIndex := 0
	if key[0] == '/' {
		startIndex = 1
	}
	return s.pathPrefix + key[startIndex:], nil
}

// prefixEnd is the smallest key greater than every key with the prefix.
func prefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return "\xff\xff\xff\xff"
}
