// Package reconcile is the loop every engine controller runs: informer
// events feed object keys into a rate-limited workqueue, and workers call
// the controller's sync function for each key, retrying with backoff on
// error.
package reconcile

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// SyncFunc brings one object (by key) to its desired state.
type SyncFunc func(ctx context.Context, key cache.ObjectName) error

// Loop is a workqueue with its workers.
type Loop struct {
	name   string
	queue  workqueue.TypedRateLimitingInterface[cache.ObjectName]
	sync   SyncFunc
	synced []cache.InformerSynced
}

// NewLoop returns a loop calling sync; name labels its queue and logs.
func NewLoop(name string, sync SyncFunc) *Loop {
	return &Loop{
		name: name,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: name}),
		sync: sync,
	}
}

// Watch enqueues the objects an informer adds or updates.
func (l *Loop) Watch(informer cache.SharedIndexInformer) error {
	enqueue := func(obj any) {
		if name, err := cache.DeletionHandlingObjectToName(obj); err == nil {
			l.queue.Add(name)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return fmt.Errorf("%s: watching: %w", l.name, err)
	}
	l.synced = append(l.synced, informer.HasSynced)
	return nil
}

// WatchDeletes enqueues the objects an informer deletes as well, for a
// sync that acts on an object's absence (it reads NotFound); the
// informer is Watched besides.
func (l *Loop) WatchDeletes(informer cache.SharedIndexInformer) error {
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if name, err := cache.DeletionHandlingObjectToName(obj); err == nil {
				l.queue.Add(name)
			}
		},
	}); err != nil {
		return fmt.Errorf("%s: watching deletions: %w", l.name, err)
	}
	return nil
}

// WatchMapped enqueues, for every object an informer adds, updates or
// deletes, the keys keysOf maps it to (another resource's objects: a
// Velero object's change syncs the tenant object it was made for).
func (l *Loop) WatchMapped(informer cache.SharedIndexInformer, keysOf func(obj any) []cache.ObjectName) error {
	enqueue := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		for _, k := range keysOf(obj) {
			l.queue.Add(k)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return fmt.Errorf("%s: watching: %w", l.name, err)
	}
	l.synced = append(l.synced, informer.HasSynced)
	return nil
}

// WaitFor makes Run wait for more informers (those the sync function reads
// through listers) to sync before it starts workers.
func (l *Loop) WaitFor(informers ...cache.SharedIndexInformer) {
	for _, i := range informers {
		l.synced = append(l.synced, i.HasSynced)
	}
}

// Add syncs key soon.
func (l *Loop) Add(key cache.ObjectName) { l.queue.Add(key) }

// Len is how many keys wait to be synced.
func (l *Loop) Len() int { return l.queue.Len() }

// AddAfter syncs key again after d.
func (l *Loop) AddAfter(key cache.ObjectName, d time.Duration) { l.queue.AddAfter(key, d) }

// Run starts workers once the informers have synced, until ctx is done.
func (l *Loop) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer l.queue.ShutDown()
	logger := klog.FromContext(ctx).WithValues("controller", l.name)
	ctx = klog.NewContext(ctx, logger)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, l.synced...) {
		return
	}
	// The workers are waited for: a replica that stops leading returns
	// from Run once nothing of its engines runs.
	var running sync.WaitGroup
	for i := 0; i < workers; i++ {
		running.Add(1)
		go func() {
			defer running.Done()
			wait.UntilWithContext(ctx, l.work, time.Second)
		}()
	}
	<-ctx.Done()
	l.queue.ShutDown()
	running.Wait()
}

func (l *Loop) work(ctx context.Context) {
	for l.next(ctx) {
	}
}

func (l *Loop) next(ctx context.Context) bool {
	key, quit := l.queue.Get()
	if quit {
		return false
	}
	defer l.queue.Done(key)
	if err := l.sync(ctx, key); err != nil {
		klog.FromContext(ctx).Error(err, "Sync failed; retrying", "key", key)
		l.queue.AddRateLimited(key)
		return true
	}
	l.queue.Forget(key)
	return true
}

// DeleteIfUnchanged deletes the object name if its UID is still uid (an
// engine deleting what it saw expire, not a newer object of the same name).
// An object already gone or replaced is not an error.
func DeleteIfUnchanged(ctx context.Context, del func(context.Context, string, metav1.DeleteOptions) error, name string, uid types.UID) error {
	err := del(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting %s: %w", name, err)
	}
	return nil
}

// objectClient is what RemoveFinalizer needs of a generated typed client.
type objectClient[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*T, error)
	Update(ctx context.Context, obj *T, opts metav1.UpdateOptions) (*T, error)
}

// RemoveFinalizer removes finalizer from the stored object of obj's name
// and UID (its cleanup is done), retrying on conflicts, as engine (the
// field manager). An object already gone, or without the finalizer, is
// left alone.
func RemoveFinalizer[T any, PT interface {
	*T
	metav1.Object
}](ctx context.Context, client objectClient[T], obj PT, finalizer, engine string) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := client.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if PT(cur).GetUID() != obj.GetUID() {
			return nil
		}
		kept := slices.DeleteFunc(slices.Clone(PT(cur).GetFinalizers()), func(f string) bool { return f == finalizer })
		if len(kept) == len(PT(cur).GetFinalizers()) {
			return nil
		}
		PT(cur).SetFinalizers(kept)
		_, err = client.Update(ctx, cur, metav1.UpdateOptions{FieldManager: engine})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: removing finalizer %s of %s: %w", engine, finalizer, obj.GetName(), err)
	}
	return nil
}

// AddFinalizer returns obj with finalizer: written as engine (the field
// manager) when it was missing, as it is otherwise.
func AddFinalizer[T any, PT interface {
	*T
	metav1.Object
	DeepCopy() *T
}](ctx context.Context, client objectClient[T], obj PT, finalizer, engine string) (PT, error) {
	if HasFinalizer(obj, finalizer) {
		return obj, nil
	}
	cur := PT(obj.DeepCopy())
	cur.SetFinalizers(append(cur.GetFinalizers(), finalizer))
	out, err := client.Update(ctx, cur, metav1.UpdateOptions{FieldManager: engine})
	if err != nil {
		return nil, fmt.Errorf("%s: adding finalizer %s to %s: %w", engine, finalizer, obj.GetName(), err)
	}
	return out, nil
}

// HasFinalizer reports whether obj carries finalizer.
func HasFinalizer(obj metav1.Object, finalizer string) bool {
	return slices.Contains(obj.GetFinalizers(), finalizer)
}
