package resource

import (
	"context"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/rest"
)

// DecoratedREST is a main resource's storage whose objects get fields that
// are not stored filled in as they are returned (a backup's queue
// position): by get, list, create, update and watch. Fill gets an object
// or a list of the resource; it must set the fields whatever they held,
// and only on the object itself: what the object points to may be shared
// with the storage's watch cache (a list from it is a shallow copy of
// the cached objects), so a pointed-to struct is replaced by a filled-in
// copy, never changed.
type DecoratedREST struct {
	*REST
	Fill func(obj runtime.Object)
}

// Get returns the object, filled in.
func (r *DecoratedREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return r.decorate(r.REST.Get(ctx, name, options))
}

// List returns the objects, filled in.
func (r *DecoratedREST) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	return r.decorate(r.REST.List(ctx, options))
}

// Create returns the created object, filled in.
func (r *DecoratedREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	return r.decorate(r.REST.Create(ctx, obj, createValidation, options))
}

// Update returns the updated object, filled in.
func (r *DecoratedREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	out, created, err := r.REST.Update(ctx, name, objInfo, createValidation, updateValidation, forceAllowCreate, options)
	out, err = r.decorate(out, err)
	return out, created, err
}

// Watch sends each object filled in at the time its event is sent. Watch
// objects are shared between watchers, so they are copied before they
// are changed.
func (r *DecoratedREST) Watch(ctx context.Context, options *metainternalversion.ListOptions) (watch.Interface, error) {
	w, err := r.REST.Watch(ctx, options)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
		if ev.Type == watch.Deleted || ev.Type == watch.Bookmark || ev.Type == watch.Error {
			return ev, true
		}
		var obj runtime.Object
		if c, ok := ev.Object.(runtime.CacheableObject); ok {
			// The watch cache wraps event objects to share their encoding;
			// GetObject returns a copy.
			obj = c.GetObject()
		} else {
			obj = ev.Object.DeepCopyObject()
		}
		r.Fill(obj)
		ev.Object = obj
		return ev, true
	}), nil
}

func (r *DecoratedREST) decorate(obj runtime.Object, err error) (runtime.Object, error) {
	if err == nil && obj != nil {
		r.Fill(obj)
	}
	return obj, err
}
