package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/backstop-io/backstop/pkg/archive"
)

// Source is the cluster whose resources are backed up.
type Source struct {
	Discovery discovery.DiscoveryInterface
	Dynamic   dynamic.Interface
	// PageSize is the limit of each list request (Velero's --client-page-size).
	PageSize int64
}

// Resources returns the source's listable resources in their preferred
// versions, sorted by group and resource. Groups whose discovery fails
// are reported to warn and skipped.
func (s Source) Resources(warn func(group, msg string)) ([]Resource, error) {
	lists, err := s.Discovery.ServerPreferredResources()
	var failed *discovery.ErrGroupDiscoveryFailed
	if errors.As(err, &failed) {
		for gv, e := range failed.Groups {
			warn(gv.String(), e.Error())
		}
	} else if err != nil {
		return nil, fmt.Errorf("discovering the source's resources: %w", err)
	}
	var out []Resource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !hasVerbs(r.Verbs, "list", "get") {
				continue
			}
			out = append(out, Resource{GVR: gv.WithResource(r.Name), Kind: r.Kind, Singular: r.SingularName,
				ShortNames: r.ShortNames, Namespaced: r.Namespaced})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		// Namespaces first (a restore creates them before their contents),
		// then by group and resource.
		if isNamespaces(a) != isNamespaces(b) {
			return isNamespaces(a)
		}
		if a.GVR.Group != b.GVR.Group {
			return a.GVR.Group < b.GVR.Group
		}
		return a.GVR.Resource < b.GVR.Resource
	})
	return out, nil
}

func hasVerbs(verbs metav1.Verbs, want ...string) bool {
	for _, w := range want {
		found := false
		for _, v := range verbs {
			if v == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

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

// collector writes the items a Filter selects into an archive.
type collector struct {
	source    Source
	filter    *Filter
	archive   *archive.Writer
	resources *resourceList
	log       *Log
	counter   *Counter
}

// errFatal marks errors that end the backup (the archive cannot be
// written), as opposed to an item or resource that could not be read.
type errFatal struct{ err error }

func (e errFatal) Error() string { return e.err.Error() }
func (e errFatal) Unwrap() error { return e.err }

// run backs up every selected resource. It returns only fatal errors and
// ctx's; others are logged as the backup's errors.
func (c *collector) run(ctx context.Context, resources []Resource) error {
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
				c.log.Error(ns, scopeOf(r), fmt.Sprintf("listing %s: %v", r.GroupResource(), err), "resource", r.GroupResource(), "namespace", ns)
			}
		}
	}
	return nil
}

// list pages through one resource (in one namespace, or all) and writes
// each selected item. A continue token that expired (history compacted)
// restarts the list after the last item written: lists come in key order.
func (c *collector) list(ctx context.Context, r Resource, namespace string) error {
	client := c.source.Dynamic.Resource(r.GVR)
	var ri dynamic.ResourceInterface = client
	if r.Namespaced && namespace != "" {
		ri = client.Namespace(namespace)
	}
	opts := metav1.ListOptions{Limit: c.source.PageSize, LabelSelector: c.filter.ServerSelector()}
	// last is the key of the last item seen; after a relist, items up to
	// resumeAfter were written already.
	last, resumeAfter := "", ""
	defer c.counter.pending.Store(0)
	for {
		page, err := ri.List(ctx, opts)
		if apierrors.IsResourceExpired(err) && opts.Continue != "" {
			c.log.Info("List continuation expired; listing again after the last item", "resource", r.GroupResource(), "after", last)
			opts.Continue, resumeAfter = "", last
			continue
		}
		if err != nil {
			return err
		}
		if rem := page.GetRemainingItemCount(); rem != nil {
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
			key := item.GetNamespace() + "/" + item.GetName()
			if resumeAfter != "" && key <= resumeAfter {
				continue
			}
			last = key
			if err := c.item(r, item); err != nil {
				return err
			}
		}
		if page.GetContinue() == "" {
			return nil
		}
		opts.Continue = page.GetContinue()
	}
}

// item writes one object if the filters take it.
func (c *collector) item(r Resource, item *unstructured.Unstructured) error {
	ns := item.GetNamespace()
	if r.Namespaced && !c.filter.IncludesNamespace(ns) {
		return nil
	}
	if isNamespaces(r) && !c.filter.IncludesNamespace(item.GetName()) {
		return nil
	}
	if !c.filter.IncludesItem(item.GetLabels()) {
		return nil
	}
	data, err := json.Marshal(item.Object)
	if err != nil {
		c.log.Error(ns, scopeOf(r), fmt.Sprintf("encoding %s %s: %v", r.GroupResource(), item.GetName(), err))
		return nil
	}
	if err := c.archive.AddItem(r.GroupResource(), r.GVR.Version, ns, item.GetName(), data); err != nil {
		return errFatal{fmt.Errorf("writing the backup tarball: %w", err)}
	}
	apiVersion := item.GetAPIVersion()
	if apiVersion == "" {
		apiVersion = r.GVR.GroupVersion().String()
	}
	kind := item.GetKind()
	if kind == "" {
		kind = r.Kind
	}
	c.resources.add(apiVersion+"/"+kind, ns, item.GetName())
	c.counter.backedUp.Add(1)
	return nil
}

func scopeOf(r Resource) string {
	if r.Namespaced {
		return ""
	}
	return scopeCluster
}
