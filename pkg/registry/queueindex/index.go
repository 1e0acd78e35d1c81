// Package queueindex owns the order of a queue of stored objects (queued
// backups, restores waiting to run): each object entering the queue gets a
// sequence (velerov1.QueueSequenceAnnotation), and the index keeps the
// sequences of those waiting, sorted, current through a watch of the
// storage, so that every replica sharing the storage derives the same
// positions from the same objects.
//
// Positions are not stored: they are filled in when an object is read (get,
// list, watch events as they are sent). Taking an object out of the queue
// therefore writes that object only; those behind it move up without
// being rewritten, so draining N waiting objects costs N writes, not N².
//
// The order is by turn, then by sequence, then by name. Each object has an
// owner (one for all when the index is made with New; the tenant with
// NewFair): an owner's n-th waiting object takes turn n, so that one
// owner's many waiting objects come after every other owner's first.
// Sequences come from a hybrid
// clock: the larger of the wall clock in microseconds and one more than the
// largest sequence this index has seen or handed out. One replica's
// sequences only grow; replicas that hand out sequences at once order their
// objects by their clocks, and equal sequences by name, the same on every
// replica.
package queueindex

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/tools/cache"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

// Index orders the waiting objects of one namespace by turn and sequence.
type Index[T metav1.Object] struct {
	namespace string
	// waiting says whether an object is in the queue.
	waiting func(T) bool
	// ownerOf says whose turns an object takes (nil: everyone's the
	// same).
	ownerOf func(T) string
	// now is the clock sequences start from.
	now func() time.Time

	mu     sync.Mutex
	placed map[string]placed   // waiting object → its place
	owners map[string]*[]entry // each owner's waiting objects, sorted
	next   int64
}

// placed is where a waiting object is kept: its owner and entry.
type placed struct {
	owner string
	entry entry
}

// entry is a waiting object's place: its sequence, then its name.
type entry struct {
	seq  int64
	name string
}

func (e entry) before(o entry) bool {
	if e.seq != o.seq {
		return e.seq < o.seq
	}
	return e.name < o.name
}

// New returns the index of namespace, in sequence order; waiting says
// which objects are in the queue. Run keeps it current.
func New[T metav1.Object](namespace string, waiting func(T) bool) *Index[T] {
	return NewFair(namespace, waiting, nil)
}

// NewFair returns the index of namespace whose objects take turns by
// owner (ownerOf).
func NewFair[T metav1.Object](namespace string, waiting func(T) bool, ownerOf func(T) string) *Index[T] {
	return &Index[T]{namespace: namespace, waiting: waiting, ownerOf: ownerOf, now: time.Now,
		placed: map[string]placed{}, owners: map[string]*[]entry{}, next: 1}
}

func (x *Index[T]) owner(o T) string {
	if x.ownerOf == nil {
		return ""
	}
	return x.ownerOf(o)
}

// SetSequence records seq on o.
func SetSequence(o metav1.Object, seq int64) {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[velerov1.QueueSequenceAnnotation] = strconv.FormatInt(seq, 10)
	o.SetAnnotations(a)
}

// Store is what the index watches: the registry's own store of the
// objects (internal versions).
type Store interface {
	rest.Lister
	rest.Watcher
}

// Run keeps the index current from a list and watch of the namespace's
// objects in store (example is an empty object of the kind), until ctx
// ends. It returns once the first list is in.
func (x *Index[T]) Run(ctx context.Context, store Store, example runtime.Object) error {
	internal := func(ctx context.Context, opts metav1.ListOptions) (context.Context, *metainternalversion.ListOptions, error) {
		var in metainternalversion.ListOptions
		if err := metainternalversion.Convert_v1_ListOptions_To_internalversion_ListOptions(&opts, &in, nil); err != nil {
			return nil, nil, err
		}
		return genericrequest.WithNamespace(ctx, x.namespace), &in, nil
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			ctx, in, err := internal(ctx, opts)
			if err != nil {
				return nil, err
			}
			return store.List(ctx, in)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			ctx, in, err := internal(ctx, opts)
			if err != nil {
				return nil, err
			}
			w, err := store.Watch(ctx, in)
			if err != nil {
				return nil, err
			}
			// The watch cache sends objects wrapped with their encodings.
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
				if c, ok := e.Object.(runtime.CacheableObject); ok {
					e.Object = c.GetObject()
				}
				return e, true
			}), nil
		},
	}
	informer := cache.NewSharedIndexInformerWithOptions(lw, example, cache.SharedIndexInformerOptions{})
	registration, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    x.observe,
		UpdateFunc: func(_, obj any) { x.observe(obj) },
		DeleteFunc: x.forget,
	})
	if err != nil {
		return fmt.Errorf("watching the queue of namespace %s: %w", x.namespace, err)
	}
	go informer.RunWithContext(ctx)
	// Synced once the index itself has seen the first list, not only the
	// informer's cache.
	if !cache.WaitForCacheSync(ctx.Done(), registration.HasSynced) {
		return fmt.Errorf("the queue of namespace %s: not listed before the server stopped", x.namespace)
	}
	return nil
}

// observe records an object's current state (a watch event).
func (x *Index[T]) observe(obj any) {
	o, ok := obj.(T)
	if !ok || o.GetNamespace() != x.namespace {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.forgetLocked(o.GetName())
	seq, ok := velerov1.QueueSequence(o)
	if ok && seq >= x.next {
		x.next = seq + 1
	}
	if !ok || !x.waiting(o) || o.GetDeletionTimestamp() != nil {
		return
	}
	owner, e := x.owner(o), entry{seq, o.GetName()}
	x.placed[o.GetName()] = placed{owner, e}
	list := x.owners[owner]
	if list == nil {
		list = &[]entry{}
		x.owners[owner] = list
	}
	i := search(*list, e)
	*list = append(*list, entry{})
	copy((*list)[i+1:], (*list)[i:])
	(*list)[i] = e
}

// search is the number of entries of a sorted list before e.
func search(list []entry, e entry) int {
	return sort.Search(len(list), func(i int) bool { return !list[i].before(e) })
}

// forget drops a deleted object (a watch event).
func (x *Index[T]) forget(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	o, ok := obj.(T)
	if !ok || o.GetNamespace() != x.namespace {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.forgetLocked(o.GetName())
}

func (x *Index[T]) forgetLocked(name string) {
	p, ok := x.placed[name]
	if !ok {
		return
	}
	delete(x.placed, name)
	list := x.owners[p.owner]
	i := search(*list, p.entry)
	if i < len(*list) && (*list)[i] == p.entry {
		*list = append((*list)[:i], (*list)[i+1:]...)
	}
	if len(*list) == 0 {
		delete(x.owners, p.owner)
	}
}

// NextSequence hands out the sequence of an object entering the queue.
func (x *Index[T]) NextSequence() int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	seq := max(x.next, x.now().UnixMicro())
	x.next = seq + 1
	return seq
}

// PositionOf is o's place in the queue (1 for the next one), 0 when it is
// not waiting. o's own sequence comes from the object read, so a read
// racing with the watch event of this very write is still exact.
func (x *Index[T]) PositionOf(o T) int {
	if o.GetNamespace() != x.namespace || !x.waiting(o) {
		return 0
	}
	seq, ok := velerov1.QueueSequence(o)
	if !ok {
		return 0
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.positionLocked(x.owner(o), entry{seq, o.GetName()})
}

// Position is the place in the queue of the object name of the index's
// namespace: 0 when it is not waiting.
func (x *Index[T]) Position(name string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	p, ok := x.placed[name]
	if !ok {
		return 0
	}
	return x.positionLocked(p.owner, p.entry)
}

// positionLocked is one more than the number of waiting objects before
// owner's e: its turn is the number of owner's before it; of every other
// owner, those of an earlier turn come before it, and the one of the same
// turn if its sequence is earlier. (A cost in the number of owners, which
// the one-owner index does not pay beyond a search.)
func (x *Index[T]) positionLocked(owner string, e entry) int {
	var own []entry
	if list := x.owners[owner]; list != nil {
		own = *list
	}
	turn := search(own, e)
	before := turn
	for o, list := range x.owners {
		if o == owner {
			continue
		}
		n := len(*list)
		before += min(n, turn)
		if n > turn && (*list)[turn].before(e) {
			before++
		}
	}
	return before + 1
}

// KeepSequence carries the stored sequence of old over to o (only the
// registry sets it).
func KeepSequence(o, old metav1.Object) {
	a := o.GetAnnotations()
	seq, ok := old.GetAnnotations()[velerov1.QueueSequenceAnnotation]
	if !ok {
		delete(a, velerov1.QueueSequenceAnnotation)
		return
	}
	if a == nil {
		a = map[string]string{}
	}
	a[velerov1.QueueSequenceAnnotation] = seq
	o.SetAnnotations(a)
}
