// Package status is the one way engines write the status of the objects
// they own: apply the engine's change to the object (as the informer has
// it, or as stored), write it through the status subresource when
// something changed, retry on conflicts from the object as stored, and tell the observers (metrics, events) about every phase
// transition. Each engine writes under its own field manager name, so the
// managed fields of an object say which engine wrote what.
package status

import (
	"context"
	"fmt"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// Client is what the writer needs of a generated typed client (for
// example VeleroV1().Backups(ns)).
type Client[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*T, error)
	UpdateStatus(ctx context.Context, obj *T, opts metav1.UpdateOptions) (*T, error)
}

// Object is a pointer to an API object.
type Object[T any] interface {
	*T
	runtime.Object
	metav1.Object
}

// Transition is a phase change the writer made.
type Transition struct {
	// Resource is the object's resource ("backups").
	Resource schema.GroupResource
	// Engine made it.
	Engine string
	// Old and New are the object before and after the write.
	Old, New runtime.Object
	// From and To are the phases.
	From, To string
}

// Observer is told about every phase transition written.
type Observer interface {
	Transition(ctx context.Context, t Transition)
}

// Writer writes statuses for one engine.
type Writer struct {
	// Engine is the engine's name: its field manager and the name
	// observers see.
	Engine string
	// Observers are told about phase transitions (metrics, events).
	Observers []Observer
	// Retry is how writes that failed transiently are sent again.
	Retry TransientRetry
}

// PhaseFunc reads an object's phase ("" for none).
type PhaseFunc[T any] func(*T) string

// For returns the writer of one resource through client.
func For[T any, PT Object[T]](w Writer, resource schema.GroupResource, client Client[T], phase PhaseFunc[T]) *ResourceWriter[T, PT] {
	return &ResourceWriter[T, PT]{w: w, resource: resource, client: client, phase: phase}
}

// ResourceWriter writes the status of one resource.
type ResourceWriter[T any, PT Object[T]] struct {
	w        Writer
	resource schema.GroupResource
	client   Client[T]
	phase    PhaseFunc[T]
}

// Update applies mutate to obj and writes it when mutate changed it; it
// returns what is stored after (the object mutate was given when nothing
// changed). obj is used as given when it has a resourceVersion (an
// informer's copy: nothing is read first, and it is not modified); a
// conflict (obj was not the newest) reads the object as stored and
// applies mutate again: mutate must decide from the object it is given. A
// different UID (deleted and created again) is NotFound. A transient
// failure (the server or its storage briefly unable to answer, as while
// etcd elects a leader) is tried again, from the object as stored, for up
// to about a minute while ctx lasts: an engine's last write of a run is
// not dropped for a hiccup of the storage. The observers are told of the
// transition once, whether the failed write had landed or not.
func (r *ResourceWriter[T, PT]) Update(ctx context.Context, obj PT, mutate func(PT)) (PT, error) {
	var out, attempted, prior PT
	var err error
	fromCache := obj.GetResourceVersion() != ""
	policy := r.w.Retry.withDefaults()
	deadline := time.Now().Add(policy.Window)
	delay := policy.First
	for {
		out, attempted, err = r.update(ctx, obj, fromCache, mutate, prior)
		if err == nil || !Transient(err) || ctx.Err() != nil || !time.Now().Before(deadline) {
			break
		}
		if prior == nil {
			// What the first failed write changed from: the transition
			// the observers are told of once a try succeeds, or finds
			// the write stored.
			prior = attempted
		}
		klog.FromContext(ctx).V(2).Info("Writing a status again after a transient failure", "object", name(obj), "err", err)
		fromCache = false // the failed write may have landed: decide on what is stored
		select {
		case <-ctx.Done():
		case <-time.After(wait.Jitter(delay, 0.1)):
		}
		delay = min(2*delay, policy.Cap)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: writing the status of %s %s: %w", r.w.Engine, r.resource, name(obj), err)
	}
	return out, nil
}

// TransientRetry is how a status write that failed transiently is sent
// again: after First, then twice as long each time up to Cap, until
// Window has passed since the first try. Zero fields take the defaults:
// 200 ms, 5 s, a minute.
type TransientRetry struct {
	First, Cap, Window time.Duration
}

func (t TransientRetry) withDefaults() TransientRetry {
	if t.First <= 0 {
		t.First = 200 * time.Millisecond
	}
	if t.Cap <= 0 {
		t.Cap = 5 * time.Second
	}
	if t.Window <= 0 {
		t.Window = time.Minute
	}
	return t
}

// Transient reports whether a request that failed with err may pass when
// sent again: the server timed out, was unavailable or overloaded, its
// storage failed (an internal error: etcd electing a leader, a member
// gone), or the connection broke.
func Transient(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}

// update is one try of Update, retrying conflicts: it returns what is
// stored after, or, failing, the object its last write changed from.
// prior, when a try before failed, is what that try's write changed from:
// the observers are told of the transition from it.
func (r *ResourceWriter[T, PT]) update(ctx context.Context, obj PT, fromCache bool, mutate func(PT), prior PT) (PT, PT, error) {
	var out, attempted PT
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		var cur PT
		if fromCache {
			cur, fromCache = obj.DeepCopyObject().(PT), false
		} else {
			stored, err := r.client.Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur = stored
		}
		if obj.GetUID() != "" && PT(cur).GetUID() != obj.GetUID() {
			return apierrors.NewNotFound(r.resource, obj.GetName())
		}
		before := PT(cur).DeepCopyObject().(PT)
		mutate(cur)
		from := before
		if prior != nil {
			from = prior
		}
		if apiequality.Semantic.DeepEqual(before, PT(cur)) {
			out = cur
			if prior != nil {
				r.observe(ctx, from, cur) // the failed write had landed
			}
			return nil
		}
		written, err := r.client.UpdateStatus(ctx, cur, metav1.UpdateOptions{FieldManager: r.w.Engine})
		if err != nil {
			attempted = before
			return err
		}
		out = written
		r.observe(ctx, from, written)
		return nil
	})
	return out, attempted, err
}

func (r *ResourceWriter[T, PT]) observe(ctx context.Context, before, after PT) {
	if r.phase == nil || len(r.w.Observers) == 0 {
		return
	}
	from, to := r.phase((*T)(before)), r.phase((*T)(after))
	if from == to {
		return
	}
	t := Transition{Resource: r.resource, Engine: r.w.Engine, Old: before, New: after, From: from, To: to}
	for _, o := range r.w.Observers {
		o.Transition(ctx, t)
	}
}

func name(obj metav1.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

// WrittenAt reports whether a stored time is the time now an engine wrote
// (a status time is stored to the second): how a write sent again after a
// transient failure finds that it had landed.
func WrittenAt(stored *metav1.Time, now metav1.Time) bool {
	if stored == nil {
		return false
	}
	a, b := stored.Rfc3339Copy(), now.Rfc3339Copy()
	return a.Equal(&b)
}

// Gone reports whether err says the object no longer exists (deleted, or
// deleted and created again): nothing is left to write.
func Gone(err error) bool { return apierrors.IsNotFound(err) }

// Report writes progress while work runs: every interval, sample is read
// and, when it differs from what was last written, handed to write; it
// returns when done is closed or ctx ends. A failed write is tried again
// at the next tick.
func Report[S comparable](ctx context.Context, interval time.Duration, done <-chan struct{}, sample func() S, write func(S) error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var last S
	written := false
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s := sample()
		if written && s == last {
			continue
		}
		if err := write(s); err != nil {
			klog.FromContext(ctx).V(2).Info("Writing progress", "err", err)
			continue
		}
		last, written = s, true
	}
}
