// Package queueindex owns the order of a queue of stored objects (queued
// backups, restores waiting to run): each object entering the queue gets a
// sequence (velerov1.QueueSequenceAnnotation), and the index keeps the
// sequences of those waiting, sorted, current through the store's
// after-write hooks, so that a read that starts after a write returned
// sees the new positions.
//
// Positions are not stored: they are filled in when an object is read (get,
// list, watch events as they are sent). Taking an object out of the queue
// therefore writes that object only; those behind it move up without
// being rewritten, so draining N waiting objects costs N writes, not N².
package queueindex

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

// Index orders the waiting objects of one namespace by sequence.
type Index[T metav1.Object] struct {
	namespace string
	// Load lists the namespace's objects (set before the first use).
	Load func(ctx context.Context) ([]T, error)
	// waiting says whether an object is in the queue.
	waiting func(T) bool

	mu     sync.Mutex
	loaded bool
	seqOf  map[string]int64 // waiting object → sequence
	order  []int64          // the sequences of waiting objects, sorted
	next   int64
}

// New returns the index of namespace; waiting says which objects are in
// the queue.
func New[T metav1.Object](namespace string, load func(ctx context.Context) ([]T, error), waiting func(T) bool) *Index[T] {
	return &Index[T]{namespace: namespace, Load: load, waiting: waiting, seqOf: map[string]int64{}, next: 1}
}

// Sequence is an object's sequence, if it has one.
func Sequence(o metav1.Object) (int64, bool) {
	s, ok := o.GetAnnotations()[velerov1.QueueSequenceAnnotation]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
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

// ensureLoaded fills the index from storage once. Called with mu held.
func (x *Index[T]) ensureLoaded() error {
	if x.loaded {
		return nil
	}
	list, err := x.Load(genericrequest.WithNamespace(context.Background(), x.namespace))
	if err != nil {
		return fmt.Errorf("loading the queue of namespace %s: %w", x.namespace, err)
	}
	for _, o := range list {
		x.observeLocked(o)
	}
	x.loaded = true
	return nil
}

// observeLocked records o's current state.
func (x *Index[T]) observeLocked(o T) {
	if o.GetNamespace() != x.namespace {
		return
	}
	x.forgetLocked(o.GetName())
	seq, ok := Sequence(o)
	if ok && seq >= x.next {
		x.next = seq + 1
	}
	if !ok || !x.waiting(o) || o.GetDeletionTimestamp() != nil {
		return
	}
	x.seqOf[o.GetName()] = seq
	i := sort.Search(len(x.order), func(i int) bool { return x.order[i] >= seq })
	x.order = append(x.order, 0)
	copy(x.order[i+1:], x.order[i:])
	x.order[i] = seq
}

func (x *Index[T]) forgetLocked(name string) {
	seq, ok := x.seqOf[name]
	if !ok {
		return
	}
	delete(x.seqOf, name)
	i := sort.Search(len(x.order), func(i int) bool { return x.order[i] >= seq })
	if i < len(x.order) && x.order[i] == seq {
		x.order = append(x.order[:i], x.order[i+1:]...)
	}
}

// Observe records a written object (the store's after-write hooks).
func (x *Index[T]) Observe(obj runtime.Object) {
	o, ok := obj.(T)
	if !ok {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ensureLoaded() == nil {
		x.observeLocked(o)
	}
}

// Forget drops a deleted object.
func (x *Index[T]) Forget(obj runtime.Object) {
	o, ok := obj.(T)
	if !ok {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.forgetLocked(o.GetName())
}

// NextSequence hands out the sequence of an object entering the queue.
func (x *Index[T]) NextSequence() (int64, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.ensureLoaded(); err != nil {
		return 0, err
	}
	seq := x.next
	x.next++
	return seq, nil
}

// PositionOf is o's place in the queue (1 for the next one), 0 when it is
// not waiting. o's own sequence comes from the object read, so a read
// racing with the hook that indexes this very write is still exact.
func (x *Index[T]) PositionOf(o T) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ensureLoaded() != nil || o.GetNamespace() != x.namespace || !x.waiting(o) {
		return 0
	}
	seq, ok := Sequence(o)
	if !ok {
		return 0
	}
	return sort.Search(len(x.order), func(i int) bool { return x.order[i] >= seq }) + 1
}

// Position is the place in the queue of the object name of the index's
// namespace: 0 when it is not waiting.
func (x *Index[T]) Position(name string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ensureLoaded() != nil {
		return 0
	}
	seq, ok := x.seqOf[name]
	if !ok {
		return 0
	}
	return sort.Search(len(x.order), func(i int) bool { return x.order[i] >= seq }) + 1
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
