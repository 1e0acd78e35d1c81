package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/backstop-io/backstop/pkg/archive"
	"github.com/backstop-io/backstop/pkg/engine/items"
)

// Counter is a backup's progress, read by the status writer while the
// collector runs.
type Counter struct {
	backedUp atomic.Int64
	// pending is the source's count of items still to list in the current
	// list (remainingItemCount), when it gives one.
	pending atomic.Int64
}

// Progress returns items backed up and the estimated total.
func (c *Counter) Progress() (backedUp, total int) {
	b := c.backedUp.Load()
	return int(b), int(b + c.pending.Load())
}

// collector writes the items a items.Filter selects into an archive.
type collector struct {
	source    items.Source
	filter    *items.Filter
	archive   *archive.Writer
	resources *resourceList
	log       *items.Log
	counter   *Counter
	// operations are started for the items actions apply to.
	operations *operations
	// written, if set, is told the count of items written after each.
	written func(n int64)
	// related are the cluster-scoped items the namespaced ones written
	// bring along (related.go).
	related relatedItems
}

// errFatal marks errors that end the backup (the archive cannot be
// written), as opposed to an item or resource that could not be read.
type errFatal struct{ err error }

func (e errFatal) Error() string { return e.err.Error() }
func (e errFatal) Unwrap() error { return e.err }

// run backs up every selected resource. It returns only fatal errors and
// ctx's; others are logged as the backup's errors.
func (c *collector) run(ctx context.Context, resources []items.Resource) error {
	literal, isLiteral := c.filter.LiteralNamespaces()
	for _, r := range resources {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !c.filter.IncludesResource(r) {
			continue
		}
		c.log.Info("Backing up resource", "resource", r.GroupResource(), "version", r.GVR.Version)
		var scopes []string // namespaces to list in; "" = all / cluster
		if r.Namespaced && isLiteral {
			scopes = literal
		} else {
			scopes = []string{""}
		}
		for _, ns := range scopes {
			if err := c.list(ctx, r, ns); err != nil {
				var fatal errFatal
				if errors.As(err, &fatal) || ctx.Err() != nil {
					return err
				}
				c.log.Error(ns, items.ScopeOf(r), fmt.Sprintf("listing %s: %v", r.GroupResource(), err), "resource", r.GroupResource(), "namespace", ns)
			}
		}
	}
	return c.writeRelated(ctx, resources)
}

// list pages through one resource (in one namespace, or all) and writes
// each selected item. A continue token that expired (history compacted)
// restarts the list after the last item written: lists come in key order.
func (c *collector) list(ctx context.Context, r items.Resource, namespace string) error {
	opts := metav1.ListOptions{Limit: c.source.PageSize, LabelSelector: c.filter.ServerSelector()}
	// last is the key of the last item seen; after a relist, items up to
	// resumeAfter were written already.
	last, resumeAfter := "", ""
	defer c.counter.pending.Store(0)
	for {
		page, err := c.source.ListRaw(ctx, r, namespace, opts)
		if apierrors.IsResourceExpired(err) && opts.Continue != "" {
			c.log.Info("List continuation expired; listing again after the last item", "resource", r.GroupResource(), "after", last)
			opts.Continue, resumeAfter = "", last
			continue
		}
		if err != nil {
			return err
		}
		if rem := page.RemainingItemCount; rem != nil {
			c.counter.pending.Store(*rem + int64(len(page.Items)))
		} else {
			c.counter.pending.Store(int64(len(page.Items)))
		}
		for i := range page.Items {
			if err := ctx.Err(); err != nil {
				return err
			}
			item := &page.Items[i]
			c.counter.pending.Add(-1)
			key := item.Namespace + "/" + item.Name
			if resumeAfter != "" && key <= resumeAfter {
				continue
			}
			last = key
			if err := c.item(ctx, r, item); err != nil {
				return err
			}
		}
		if page.Continue == "" {
			return nil
		}
		opts.Continue = page.Continue
	}
}

// item writes one object if the filters take it.
func (c *collector) item(ctx context.Context, r items.Resource, item *items.RawItem) error {
	if r.Namespaced && !c.filter.IncludesNamespace(item.Namespace) {
		return nil
	}
	if items.IsNamespaces(r) && !c.filter.IncludesNamespace(item.Name) {
		return nil
	}
	if !c.filter.IncludesItem(item.Labels) {
		return nil
	}
	return c.write(ctx, r, item)
}

// write puts one object in the archive and starts the async operations
// actions have for it; what it brings along is noted (related.go). Only
// the items an action or a related rule reads are decoded.
func (c *collector) write(ctx context.Context, r items.Resource, item *items.RawItem) error {
	var obj *unstructured.Unstructured
	data := item.Data
	if c.operations.appliesTo(r) || c.related.reads(r) {
		obj = &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(item.Data); err != nil {
			c.log.Error(item.Namespace, items.ScopeOf(r), fmt.Sprintf("decoding %s %s: %v", r.GroupResource(), item.Name, err))
			return nil
		}
		// Before the item is written: an action may change it (a claim
		// records its VolumeSnapshot).
		if c.operations.start(ctx, r, obj) {
			var err error
			if data, err = obj.MarshalJSON(); err != nil {
				c.log.Error(item.Namespace, items.ScopeOf(r), fmt.Sprintf("encoding %s %s: %v", r.GroupResource(), item.Name, err))
				return nil
			}
		}
	}
	if err := c.archive.AddItem(r.GroupResource(), r.GVR.Version, item.Namespace, item.Name, data); err != nil {
		return errFatal{fmt.Errorf("writing the backup tarball: %w", err)}
	}
	c.resources.add(item.APIVersion+"/"+item.Kind, item.Namespace, item.Name)
	n := c.counter.backedUp.Add(1)
	if c.written != nil {
		c.written(n)
	}
	c.related.note(r, item, obj)
	return nil
}

// writeObject writes an object read whole (a related item).
func (c *collector) writeObject(ctx context.Context, r items.Resource, obj *unstructured.Unstructured) error {
	data, err := json.Marshal(obj.Object)
	if err != nil {
		c.log.Error(obj.GetNamespace(), items.ScopeOf(r), fmt.Sprintf("encoding %s %s: %v", r.GroupResource(), obj.GetName(), err))
		return nil
	}
	apiVersion, kind := obj.GetAPIVersion(), obj.GetKind()
	if apiVersion == "" || kind == "" {
		apiVersion, kind = r.GVR.GroupVersion().String(), r.Kind
	}
	return c.write(ctx, r, &items.RawItem{Data: data, APIVersion: apiVersion, Kind: kind,
		Namespace: obj.GetNamespace(), Name: obj.GetName(), Labels: obj.GetLabels()})
}
