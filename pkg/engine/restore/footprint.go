package restore

// What a restore writes, as the restore queue sees it, and which waiting
// restores may start: restores run several at once (Config.Concurrent),
// with the rule of the backup queue (package queue) applied to what they
// write. A waiting restore starts, in queue order, only if what it writes
// overlaps neither a running restore nor one waiting ahead of it: its
// target namespaces, and cluster-scoped items, which count as one more
// namespace (restores that write them run one after the other).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	"github.com/backstop-io/backstop/pkg/apis/restoreas"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/queue"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// DefaultConcurrent is Config.Concurrent's default (--concurrent-restores).
const DefaultConcurrent = 4

// clusterScoped stands for the cluster-scoped items in a footprint: not a
// namespace name (it has spaces), so it overlaps no namespace.
const clusterScoped = "(cluster-scoped items)"

// resourceListTimeout bounds the read of a backup's resource list, which
// the queue's decisions wait for.
const resourceListTimeout = 10 * time.Second

// maxResourceListBytes bounds a resource list read (uncompressed): a
// million items' names.
const maxResourceListBytes = 256 << 20

// footprint is what a restore writes.
type footprint struct {
	// all: every namespace (the restore's or its backup's filter takes
	// them all, or a pattern).
	all bool
	// namespaces are the target namespaces (namespaceMapping applied).
	namespaces []string
	// cluster: it writes cluster-scoped items other than namespaces.
	cluster bool
}

// names is the footprint as the queue's interner takes it.
func (f footprint) names() []string {
	if f.all {
		return nil // every namespace
	}
	out := append([]string(nil), f.namespaces...)
	if f.cluster {
		out = append(out, clusterScoped)
	}
	return out
}

// String is for the log.
func (f footprint) String() string {
	if f.all {
		return "every namespace"
	}
	return strings.Join(f.names(), ",")
}

// footprintOf says what r would write. A restore that cannot run (its
// backup or location is missing) or a preview writes nothing: it starts
// at once and ends (FailedValidation, or its preview). When the backup's
// resource list cannot be read, the restore is taken to write
// cluster-scoped items.
func (c *Controller) footprintOf(ctx context.Context, r *velerov1.Restore) footprint {
	if r.Spec.Preview {
		return footprint{}
	}
	backup, problems := c.validate(r)
	if len(problems) > 0 {
		return footprint{}
	}
	var f footprint
	tenant := c.tenantOf(backup)
	_, forUser, _ := restoreas.Of(r.Annotations)
	asTenant := tenant != "" && r.Annotations[oadpv1alpha1.FullRightsAnnotation] != "true"
	sources := targetable(r.Spec.IncludedNamespaces)
	if sources == nil {
		sources = targetable(backup.Spec.IncludedNamespaces)
	}
	switch {
	case asTenant && !forUser:
		// Narrowed to the tenant's namespace (asTenant).
		sources = []string{tenant}
	case sources == nil:
		f.all = true
	}
	for _, ns := range sources {
		if to := r.Spec.NamespaceMapping[ns]; to != "" {
			ns = to
		}
		f.namespaces = append(f.namespaces, ns)
	}
	noCluster := forUser || asTenant || (r.Spec.IncludeClusterResources != nil && !*r.Spec.IncludeClusterResources)
	if f.all {
		return f
	}
	cluster, err := c.writesClusterItems(ctx, backup, noCluster)
	if err != nil {
		klog.FromContext(ctx).Info("Restore taken to write cluster-scoped items: its backup's resource list was not read", "restore", r.Name, "backup", backup.Name, "err", err)
		cluster = true
	}
	f.cluster = cluster
	return f
}

// targetable is a namespace filter's names, nil when it takes every
// namespace (empty, "*" or a pattern).
func targetable(namespaces []string) []string {
	if len(namespaces) == 0 {
		return nil
	}
	for _, ns := range namespaces {
		if strings.ContainsAny(ns, "*?[") {
			return nil
		}
	}
	return namespaces
}

// writesClusterItems reads the backup's resource list and reports whether
// it holds cluster-scoped items other than namespaces the restore may
// write: with noCluster, only the VolumeSnapshotContents a restore for a
// user takes with its VolumeSnapshots.
func (c *Controller) writesClusterItems(ctx context.Context, backup *velerov1.Backup, noCluster bool) (bool, error) {
	bsl, err := c.locations.BackupStorageLocations(backup.Namespace).Get(backup.Spec.StorageLocation)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, resourceListTimeout)
	defer cancel()
	store, layout, err := c.cfg.Opener.Open(ctx, bsl)
	if err != nil {
		return false, err
	}
	key, _ := layout.Key(velerov1.DownloadTargetKindBackupResourceList, backup.Name)
	data, err := objectstore.GetGzip(ctx, store, key, maxResourceListBytes)
	if errors.Is(err, objectstore.ErrNotFound) {
		return false, fmt.Errorf("backup %s has no resource list", backup.Name)
	}
	if err != nil {
		return false, err
	}
	var list map[string][]string
	if err := json.Unmarshal(data, &list); err != nil {
		return false, fmt.Errorf("decoding the resource list of backup %s: %w", backup.Name, err)
	}
	return clusterItemsIn(list, noCluster), nil
}

// clusterItemsIn reports whether a resource list ("group/version/Kind" →
// "namespace/name" or "name") holds cluster-scoped items other than
// namespaces; with noCluster, only VolumeSnapshotContents count.
func clusterItemsIn(list map[string][]string, noCluster bool) bool {
	for gvk, names := range list {
		kind := gvk[strings.LastIndex(gvk, "/")+1:]
		group := ""
		if parts := strings.Split(gvk, "/"); len(parts) == 3 {
			group = parts[0]
		}
		switch {
		case group == "" && kind == "Namespace":
			continue
		case noCluster && !(group == "snapshot.storage.k8s.io" && kind == "VolumeSnapshotContent"):
			continue
		}
		for _, n := range names {
			if !strings.Contains(n, "/") {
				return true
			}
		}
	}
	return false
}

// candidate is a waiting restore, what it writes and its entry in the
// queue (computed once per restore: the footprint may read its backup's
// resource list).
type candidate struct {
	r     *velerov1.Restore
	f     footprint
	entry queue.Entry
}

// startable returns the waiting restores that may start now, in queue
// order: Config.Concurrent at most run at once, and a waiting restore
// overlaps neither a running one nor one waiting ahead of it.
func (c *Controller) startable(ctx context.Context) []candidate {
	all, err := c.restores.List(labels.Everything())
	if err != nil {
		return nil
	}
	type waitingRestore struct {
		r   *velerov1.Restore
		seq int64
	}
	var waiting []waitingRestore
	for _, r := range all {
		if r.Status.Phase.Pending() && r.DeletionTimestamp == nil {
			seq, _ := velerov1.QueueSequence(r)
			waiting = append(waiting, waitingRestore{r, seq})
		}
	}
	sort.Slice(waiting, func(i, j int) bool {
		a, b := waiting[i], waiting[j]
		if a.seq != b.seq {
			return a.seq < b.seq
		}
		if a.r.Namespace != b.r.Namespace {
			return a.r.Namespace < b.r.Namespace
		}
		return a.r.Name < b.r.Name
	})
	c.mu.Lock()
	running := make([]queue.Entry, 0, len(c.running))
	for _, run := range c.running {
		running = append(running, run.entry)
	}
	c.mu.Unlock()
	if len(running) >= c.cfg.Concurrent {
		return nil
	}
	// Candidates are kept while their restores wait.
	kept := c.candidates
	c.candidates = make(map[types.UID]candidate, len(waiting))
	queued := make([]queue.Entry, 0, len(waiting))
	for _, w := range waiting {
		cd, ok := kept[w.r.UID]
		if !ok {
			f := c.footprintOf(ctx, w.r)
			cd = candidate{f: f, entry: c.entryOf(w.r, f)}
		}
		cd.r = w.r
		c.candidates[w.r.UID] = cd
		queued = append(queued, cd.entry)
	}
	byName := make(map[string]candidate, len(waiting))
	for _, cd := range c.candidates {
		byName[cd.entry.Name] = cd
	}
	var out []candidate
	for _, name := range queue.Runnable(c.interner, running, queued, c.cfg.Concurrent) {
		out = append(out, byName[name])
	}
	return out
}

// entryOf is r's entry in the queue: named namespace/name; a footprint
// of nothing overlaps nothing.
func (c *Controller) entryOf(r *velerov1.Restore, f footprint) queue.Entry {
	name := r.Namespace + "/" + r.Name
	if !f.all && len(f.namespaces) == 0 && !f.cluster {
		return queue.Entry{Name: name}
	}
	return c.interner.Entry(name, f.names())
}
