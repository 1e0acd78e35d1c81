package pebble

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/value"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	"k8s.io/klog/v2"
)

const (
	incomingBufSize = 100
	outgoingBufSize = 100
)

type watcher struct {
	db                  *DB
	codec               runtime.Codec
	newFunc             func() runtime.Object
	groupResource       schema.GroupResource
	versioner           storage.Versioner
	transformer         value.Transformer
	progressInterval    time.Duration
	getCurrentStorageRV func(context.Context) (uint64, error)
}

// event is one change as the watch pipeline sees it before decoding.
type event struct {
	key                        string
	value                      []byte
	prevValue                  []byte
	rev                        int64
	isDeleted                  bool
	isCreated                  bool
	isProgressNotify           bool
	isInitialEventsEndBookmark bool
	isInitialEvent             bool
	recordTime                 time.Time
}

func eventFromLog(e *logEvent) *event {
	ev := &event{key: e.key, rev: e.rev, recordTime: time.Now()}
	if e.prev != nil {
		ev.prevValue = e.prev.value
	}
	switch e.typ {
	case eventDelete:
		ev.isDeleted = true
	case eventPut:
		ev.value = e.value
		ev.isCreated = e.prev == nil
	}
	return ev
}

func eventFromKV(kv *keyValue) *event {
	return &event{key: kv.key, value: kv.value, rev: kv.modRev, isCreated: true, isInitialEvent: true, recordTime: time.Now()}
}

func progressNotifyEvent(rev int64) *event {
	return &event{rev: rev, isProgressNotify: true}
}

// watchChan implements watch.Interface for one Watch call.
type watchChan struct {
	watcher           *watcher
	key               string
	initialRev        int64
	recursive         bool
	progressNotify    bool
	recordTimestamps  bool
	internalPred      storage.SelectionPredicate
	ctx               context.Context
	cancel            context.CancelFunc
	incomingEventChan chan *event
	resultChan        chan watch.Event
}

// Watch starts a watch on key. rev 0 without SendInitialEvents=false
// returns the existing objects first, then changes; a non-zero rev streams
// the changes after rev.
func (w *watcher) Watch(ctx context.Context, key string, rev int64, opts storage.ListOptions) (watch.Interface, error) {
	if opts.Recursive && !strings.HasSuffix(key, "/") {
		return nil, fmt.Errorf(`recursive key needs to end with "/"`)
	}
	if opts.ProgressNotify && w.newFunc == nil {
		return nil, apierrors.NewInternalError(errors.New("progressNotify for watch is unsupported by the pebble storage because no newFunc was provided"))
	}
	startWatchRV, err := w.getStartWatchResourceVersion(ctx, rev, opts)
	if err != nil {
		return nil, err
	}
	wc := &watchChan{
		watcher:           w,
		key:               key,
		initialRev:        startWatchRV,
		recursive:         opts.Recursive,
		progressNotify:    opts.ProgressNotify,
		recordTimestamps:  opts.RecordTimestamps,
		internalPred:      opts.Predicate,
		incomingEventChan: make(chan *event, incomingBufSize),
		resultChan:        make(chan watch.Event, outgoingBufSize),
	}
	if opts.Predicate.Empty() {
		wc.internalPred = storage.Everything
	}
	wc.ctx, wc.cancel = context.WithCancel(ctx)
	go wc.run(isInitialEventsEndBookmarkRequired(opts), areInitialEventsRequired(rev, opts))
	utilflowcontrol.WatchInitialized(ctx)
	return wc, nil
}

func (w *watcher) getStartWatchResourceVersion(ctx context.Context, resourceVersion int64, opts storage.ListOptions) (int64, error) {
	if resourceVersion > 0 {
		return resourceVersion, nil
	}
	if !utilfeature.DefaultFeatureGate.Enabled(features.WatchList) {
		return 0, nil
	}
	if opts.SendInitialEvents == nil || *opts.SendInitialEvents {
		return 0, nil
	}
	current, err := w.getCurrentStorageRV(ctx)
	if err != nil {
		return 0, err
	}
	return int64(current), nil
}

func isInitialEventsEndBookmarkRequired(opts storage.ListOptions) bool {
	if !utilfeature.DefaultFeatureGate.Enabled(features.WatchList) {
		return false
	}
	return opts.SendInitialEvents != nil && *opts.SendInitialEvents && opts.Predicate.AllowWatchBookmarks
}

func areInitialEventsRequired(resourceVersion int64, opts storage.ListOptions) bool {
	if opts.SendInitialEvents == nil && resourceVersion == 0 {
		return true
	}
	if !utilfeature.DefaultFeatureGate.Enabled(features.WatchList) {
		return false
	}
	return opts.SendInitialEvents != nil && *opts.SendInitialEvents
}

func (wc *watchChan) run(initialEventsEndBookmarkRequired, forceInitialEvents bool) {
	watchClosedCh := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		wc.startWatching(watchClosedCh, initialEventsEndBookmarkRequired, forceInitialEvents)
	}()
	go func() {
		defer wg.Done()
		wc.processEvents()
	}()
	select {
	case <-watchClosedCh:
	case <-wc.ctx.Done():
	}
	wc.cancel()
	wg.Wait()
	close(wc.resultChan)
}

func (wc *watchChan) Stop() { wc.cancel() }

func (wc *watchChan) ResultChan() <-chan watch.Event { return wc.resultChan }

// sync queues the current objects as ADDED events and sets initialRev to
// the revision they were read at.
func (wc *watchChan) sync() error {
	end := ""
	if wc.recursive {
		end = prefixEnd(wc.key)
	}
	res, err := wc.watcher.db.Range(wc.ctx, wc.key, end, rangeOptions{})
	if err != nil {
		return interpretListError(err, true, wc.key, wc.key)
	}
	wc.initialRev = res.rev
	for i, kv := range res.kvs {
		wc.queueEvent(eventFromKV(kv))
		res.kvs[i] = nil
	}
	return nil
}

func (wc *watchChan) startWatching(watchClosedCh chan struct{}, initialEventsEndBookmarkRequired, forceInitialEvents bool) {
	if wc.initialRev > 0 && forceInitialEvents {
		current, err := wc.watcher.getCurrentStorageRV(wc.ctx)
		if err != nil {
			wc.sendError(err)
			return
		}
		if uint64(wc.initialRev) > current {
			wc.sendError(storage.NewTooLargeResourceVersionError(uint64(wc.initialRev), current, int(wait.Jitter(1*time.Second, 3).Seconds())))
			return
		}
	}
	if forceInitialEvents {
		if err := wc.sync(); err != nil {
			klog.Errorf("failed to sync with latest state: %v", err)
			wc.sendError(err)
			return
		}
	}
	if initialEventsEndBookmarkRequired {
		e := progressNotifyEvent(wc.initialRev)
		e.isInitialEventsEndBookmark = true
		wc.queueEvent(e)
	}
	var interval time.Duration
	if wc.progressNotify {
		interval = wc.watcher.progressInterval
	}
	for resp := range wc.watcher.db.watchLog(wc.ctx, wc.key, wc.recursive, wc.initialRev+1, interval) {
		if resp.err != nil {
			if !errors.Is(resp.err, ErrCompacted) {
				klog.Errorf("watch chan error: %v", resp.err)
			}
			wc.sendError(resp.err)
			return
		}
		if resp.progressRev > 0 {
			wc.queueEvent(progressNotifyEvent(resp.progressRev))
			continue
		}
		for _, e := range resp.events {
			wc.queueEvent(eventFromLog(e))
		}
	}
	// The log watcher ends only when the watch is stopped or the database closes.
	close(watchClosedCh)
}

func (wc *watchChan) processEvents() {
	for {
		select {
		case e := <-wc.incomingEventChan:
			res, err := wc.transform(e)
			if err != nil {
				wc.sendError(err)
				return
			}
			if res == nil {
				continue
			}
			if !wc.sendEvent(res) {
				return
			}
		case <-wc.ctx.Done():
			return
		}
	}
}

func (wc *watchChan) filter(obj runtime.Object) bool {
	if wc.internalPred.Empty() {
		return true
	}
	matched, err := wc.internalPred.Matches(obj)
	return err == nil && matched
}

func (wc *watchChan) acceptAll() bool { return wc.internalPred.Empty() }

// transform turns an event into what the user sees, or nil if filtered out.
func (wc *watchChan) transform(e *event) (*watch.Event, error) {
	curObj, oldObj, err := wc.prepareObjs(e)
	if err != nil {
		klog.Errorf("failed to prepare current and previous objects: %v", err)
		return nil, err
	}
	var res *watch.Event
	switch {
	case e.isProgressNotify:
		object := wc.watcher.newFunc()
		if err := wc.watcher.versioner.UpdateObject(object, uint64(e.rev)); err != nil {
			return nil, fmt.Errorf("failed to propagate object resource version: %w", err)
		}
		if e.isInitialEventsEndBookmark {
			if err := storage.AnnotateInitialEventsEndBookmark(object); err != nil {
				return nil, fmt.Errorf("error while accessing object's metadata gr: %v, obj: %#v, err: %w", wc.watcher.groupResource, object, err)
			}
		}
		res = &watch.Event{Type: watch.Bookmark, Object: object}
	case e.isDeleted:
		if !wc.filter(oldObj) {
			return nil, nil
		}
		res = &watch.Event{Type: watch.Deleted, Object: oldObj}
	case e.isCreated:
		if !wc.filter(curObj) {
			return nil, nil
		}
		res = &watch.Event{Type: watch.Added, Object: curObj}
	default:
		if wc.acceptAll() {
			res = &watch.Event{Type: watch.Modified, Object: curObj}
			break
		}
		curPasses, oldPasses := wc.filter(curObj), wc.filter(oldObj)
		switch {
		case curPasses && oldPasses:
			res = &watch.Event{Type: watch.Modified, Object: curObj}
		case curPasses && !oldPasses:
			res = &watch.Event{Type: watch.Added, Object: curObj}
		case !curPasses && oldPasses:
			res = &watch.Event{Type: watch.Deleted, Object: oldObj}
		}
	}
	if res != nil && wc.recordTimestamps && !e.isInitialEvent && !e.isProgressNotify {
		res.Object = &timedWatchEvent{Object: res.Object, recordTime: e.recordTime}
	}
	return res, nil
}

// timedWatchEvent carries the time the backend produced an event, for the
// watch cache's latency metrics (ListOptions.RecordTimestamps).
type timedWatchEvent struct {
	runtime.Object
	recordTime time.Time
}

var _ storage.WatchEventWithRecordTime = &timedWatchEvent{}

func (t *timedWatchEvent) GetObjectMeta() metav1.Object {
	m, _ := meta.Accessor(t.Object)
	return m
}

func (t *timedWatchEvent) DeepCopyObject() runtime.Object {
	return &timedWatchEvent{Object: t.Object.DeepCopyObject(), recordTime: t.recordTime}
}

func (t *timedWatchEvent) RecordTime() time.Time  { return t.recordTime }
func (t *timedWatchEvent) Unwrap() runtime.Object { return t.Object }

func transformErrorToEvent(err error) *watch.Event {
	err = interpretWatchError(err)
	if _, ok := err.(apierrors.APIStatus); !ok {
		err = apierrors.NewInternalError(err)
	}
	status := err.(apierrors.APIStatus).Status()
	return &watch.Event{Type: watch.Error, Object: &status}
}

// sendError delivers an error event (unless the watch was stopped) and ends
// the watch; no event after the error reaches the user.
func (wc *watchChan) sendError(err error) {
	defer wc.cancel()
	if errors.Is(err, context.Canceled) || errors.Is(err, ErrClosed) {
		return
	}
	errResult := transformErrorToEvent(err)
	select {
	case wc.resultChan <- *errResult:
	case <-wc.ctx.Done():
	}
}

func (wc *watchChan) sendEvent(e *watch.Event) bool {
	select {
	case wc.resultChan <- *e:
		return true
	case <-wc.ctx.Done():
		return false
	}
}

func (wc *watchChan) queueEvent(e *event) {
	select {
	case wc.incomingEventChan <- e:
	case <-wc.ctx.Done():
	}
}

func (wc *watchChan) prepareObjs(e *event) (curObj, oldObj runtime.Object, err error) {
	if e.isProgressNotify {
		return nil, nil, nil
	}
	w := wc.watcher
	if !e.isDeleted {
		data, _, err := w.transformer.TransformFromStorage(wc.ctx, e.value, authenticatedDataString(e.key))
		if err != nil {
			return nil, nil, err
		}
		curObj, err = decodeObj(w.codec, w.versioner, data, e.rev)
		if err != nil {
			return nil, nil, err
		}
	}
	// The previous object is needed for deletes and to evaluate filters.
	if len(e.prevValue) > 0 && (e.isDeleted || !wc.acceptAll()) {
		data, _, err := w.transformer.TransformFromStorage(wc.ctx, e.prevValue, authenticatedDataString(e.key))
		if err != nil {
			return nil, nil, transformIfCorruptObjectError(e, err)
		}
		// The old object carries the revision of the deletion.
		oldObj, err = decodeObj(w.codec, w.versioner, data, e.rev)
		if err != nil {
			return nil, nil, transformIfCorruptObjectError(e, err)
		}
	}
	return curObj, oldObj, nil
}

func transformIfCorruptObjectError(e *event, err error) error {
	var corruptObjErr *corruptObjectError
	if !e.isDeleted || !errors.As(err, &corruptObjErr) {
		return err
	}
	return &corruptObjectDeletedError{err: corruptObjErr}
}
