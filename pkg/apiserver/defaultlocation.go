package apiserver

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/klog/v2"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	"github.com/backstop-io/backstop/pkg/registry/velero/backup"
)

// lastWrite is the resourceVersion of the latest write of a resource made
// through this server (0 before the first): a read from the watch cache
// that is not older than it sees every write this server acknowledged.
type lastWrite struct{ rv atomic.Uint64 }

// note records the resourceVersion of a written object (kept if newer).
func (w *lastWrite) note(obj runtime.Object) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	rv, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	if err != nil {
		return
	}
	for {
		cur := w.rv.Load()
		if rv <= cur || w.rv.CompareAndSwap(cur, rv) {
			return
		}
	}
}

// trackWrites records in the returned lastWrite every create, update and
// delete made through store (its main resource: a location's spec.default
// changes there, never through status), dry runs aside (their object is
// not stored and may carry any resourceVersion its sender wrote). Hooks
// the store had run first.
func trackWrites(store *genericregistry.Store) *lastWrite {
	w := &lastWrite{}
	afterCreate, afterUpdate, afterDelete := store.AfterCreate, store.AfterUpdate, store.AfterDelete
	store.AfterCreate = func(obj runtime.Object, opts *metav1.CreateOptions) {
		if afterCreate != nil {
			afterCreate(obj, opts)
		}
		if opts == nil || len(opts.DryRun) == 0 {
			w.note(obj)
		}
	}
	store.AfterUpdate = func(obj runtime.Object, opts *metav1.UpdateOptions) {
		if afterUpdate != nil {
			afterUpdate(obj, opts)
		}
		if opts == nil || len(opts.DryRun) == 0 {
			w.note(obj)
		}
	}
	store.AfterDelete = func(obj runtime.Object, opts *metav1.DeleteOptions) {
		if afterDelete != nil {
			afterDelete(obj, opts)
		}
		if opts == nil || len(opts.DryRun) == 0 {
			w.note(obj)
		}
	}
	return w
}

// defaultLocationFrom finds the default BackupStorageLocation of a
// namespace by listing the locations in-process from the watch cache, not
// older than the latest location write of this server: a backup created
// right after a new default location goes to that one (the cache as it
// is may not have it yet and answer the older default: CI saw a backup
// sent there on etcd3). When no location was written since the start,
// the cache as it is ("0") answers. Only when that shows no default is
// the list read as stored: a consistent list waits for the cache to catch
// up with the latest write of any resource (up to the cacher's 100 ms
// progress period), which on every Backup create was most of its latency.
//
// A location written through another replica (etcd3, scaled out) is seen
// once this replica's watch delivers it, as any read of its cache.
func defaultLocationFrom(bsls rest.Lister, written *lastWrite) backup.DefaultLocationFunc {
	return func(ctx context.Context, namespace string) (string, error) {
		ctx = genericrequest.WithNamespace(ctx, namespace)
		fresh := &metainternalversion.ListOptions{ResourceVersion: "0"}
		if rv := written.rv.Load(); rv > 0 {
			fresh = &metainternalversion.ListOptions{ResourceVersion: strconv.FormatUint(rv, 10), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}
		}
		for _, opts := range []*metainternalversion.ListOptions{fresh, {}} {
			obj, err := bsls.List(ctx, opts)
			if err != nil && opts != fresh {
				return "", fmt.Errorf("listing backup storage locations: %w", err)
			}
			if err != nil {
				// The cache did not catch up in time (it waits up to
				// 3 s): read as stored.
				klog.FromContext(ctx).V(2).Info("The watch cache of storage locations is behind: reading them as stored", "resourceVersion", opts.ResourceVersion, "err", err)
				continue
			}
			if name := newestDefault(obj.(*velero.BackupStorageLocationList).Items); name != "" {
				return name, nil
			}
		}
		return "", nil
	}
}

// newestDefault is the location marked default, the newest one until the
// location engine has unmarked older defaults (as that engine will
// decide); "" when none is.
func newestDefault(locations []velero.BackupStorageLocation) string {
	var newest *velero.BackupStorageLocation
	for i := range locations {
		l := &locations[i]
		if !l.Spec.Default {
			continue
		}
		if newest == nil || l.CreationTimestamp.After(newest.CreationTimestamp.Time) ||
			(l.CreationTimestamp.Equal(&newest.CreationTimestamp) && l.Name > newest.Name) {
			newest = l
		}
	}
	if newest == nil {
		return ""
	}
	return newest.Name
}
