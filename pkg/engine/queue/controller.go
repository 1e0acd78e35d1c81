package queue

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	informers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v1"
	listers "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
)

// ResyncPeriod: the queue is also re-examined this often, whatever happens.
const ResyncPeriod = 30 * time.Second

// Controller is the backup queue engine: it moves New backups to Queued
// (the registry numbers them) and Queued backups to ReadyToStart when
// Runnable allows, and takes cancelled backups that have not started out
// of the queue (FinalizingCancelled → Failed). Each backup is written once
// per transition.
type Controller struct {
	*reconcile.Loop
	client    versioned.Interface
	lister    listers.BackupLister
	namespace string
	limit     int

	// entries caches each backup's interned namespaces by UID.
	interner *Interner
	entries  map[types.UID]Entry
	// explained is what was last logged of why a queued backup waits.
	explained map[types.UID]string
	observers []status.Observer
}

// passBatch is how long an event waits for others to share its pass of
// the queue: under a burst of writes the queue is examined at most this
// often, not once per event.
const passBatch = 50 * time.Millisecond

// maxExplained bounds how many waiting backups, from the head of the
// queue, are explained per pass: each costs a scan of those ahead.
const maxExplained = 100

// queueKey is the one key of the loop: every event re-examines the queue.
var queueKey = cache.ObjectName{Name: "queue"}

// New returns the queue engine of namespace, starting at most limit
// backups at once.
func New(client versioned.Interface, informer informers.BackupInformer, namespace string, limit int, observers ...status.Observer) (*Controller, error) {
	if limit < 1 {
		return nil, fmt.Errorf("the number of concurrent backups must be at least 1, not %d", limit)
	}
	c := &Controller{client: client, lister: informer.Lister(), namespace: namespace, limit: limit,
		interner: NewInterner(), entries: map[types.UID]Entry{}, explained: map[types.UID]string{}, observers: observers}
	c.Loop = reconcile.NewLoop("backup-queue", c.sync)
	// A pass reads every backup: the events of passBatch share one.
	enqueue := func(any) { c.Loop.AddAfter(queueKey, passBatch) }
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(any, any) { enqueue(nil) }, DeleteFunc: enqueue,
	}); err != nil {
		return nil, fmt.Errorf("backup queue: watching backups: %w", err)
	}
	c.WaitFor(informer.Informer())
	return c, nil
}

func (c *Controller) entry(b *velerov1.Backup) Entry {
	e, ok := c.entries[b.UID]
	if !ok {
		e = c.interner.Entry(b.Name, b.Spec.IncludedNamespaces)
		c.entries[b.UID] = e
	}
	return e
}

func sequence(b *velerov1.Backup) int64 {
	n, _ := velerov1.QueueSequence(b)
	return n
}

// inTurns sorts queued backups into the queue's order, the registry
// index's (status.queuePosition): the owners (velerov1.QueueOwner) take
// turns, each owner's backups in sequence; among the backups of the same
// turn, by sequence, and equal sequences (replicas numbering at once) by
// name.
func inTurns(queued []*velerov1.Backup) {
	// Each backup's sequence read once, not at every comparison.
	type placed struct {
		turn int
		seq  int64
		b    *velerov1.Backup
	}
	order := make([]placed, len(queued))
	for i, b := range queued {
		order[i] = placed{seq: sequence(b), b: b}
	}
	before := func(a, b placed) bool {
		if a.turn != b.turn {
			return a.turn < b.turn
		}
		if a.seq != b.seq {
			return a.seq < b.seq
		}
		return a.b.Name < b.b.Name
	}
	// In sequence first: an owner's n-th is then its turn n.
	sort.Slice(order, func(i, j int) bool { return before(order[i], order[j]) })
	turns := map[string]int{}
	for i := range order {
		owner := velerov1.QueueOwner(order[i].b)
		order[i].turn = turns[owner]
		turns[owner]++
	}
	sort.SliceStable(order, func(i, j int) bool { return before(order[i], order[j]) })
	for i := range order {
		queued[i] = order[i].b
	}
}

// sync queues new backups and starts what may start.
func (c *Controller) sync(ctx context.Context, _ cache.ObjectName) error {
	defer c.AddAfter(queueKey, ResyncPeriod)
	all, err := c.lister.Backups(c.namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	live := make(map[types.UID]bool, len(all))
	var fresh, queued, running []*velerov1.Backup
	for _, b := range all {
		live[b.UID] = true
		if b.DeletionTimestamp != nil && b.Status.Phase != velerov1.BackupPhaseReadyToStart && b.Status.Phase != velerov1.BackupPhaseInProgress {
			continue // being deleted: neither queued nor started
		}
		if b.Spec.Cancel && b.Status.Phase.Pending() {
			// A cancelled backup that has not started leaves the queue:
			// nothing was written, so there is nothing to finalize.
			if err := c.cancel(ctx, b); err != nil {
				return err
			}
			continue
		}
		switch b.Status.Phase {
		case "", velerov1.BackupPhaseNew:
			fresh = append(fresh, b)
		case velerov1.BackupPhaseQueued:
			queued = append(queued, b)
		case velerov1.BackupPhaseReadyToStart, velerov1.BackupPhaseInProgress:
			running = append(running, b)
		}
	}
	for uid := range c.entries {
		if !live[uid] {
			delete(c.entries, uid)
		}
	}
	for uid := range c.explained {
		if !live[uid] {
			delete(c.explained, uid)
		}
	}

	// New backups join the queue in creation order.
	sort.Slice(fresh, func(i, j int) bool {
		if !fresh[i].CreationTimestamp.Equal(&fresh[j].CreationTimestamp) {
			return fresh[i].CreationTimestamp.Before(&fresh[j].CreationTimestamp)
		}
		return fresh[i].Name < fresh[j].Name
	})
	for _, b := range fresh {
		if err := c.setPhase(ctx, b, velerov1.BackupPhaseQueued); err != nil {
			return err
		}
	}
	if len(fresh) > 0 {
		// The next pass sees them queued, numbered by the registry.
		c.Loop.Add(queueKey)
		return nil
	}

	inTurns(queued)
	runningEntries := make([]Entry, 0, len(running))
	for _, b := range running {
		runningEntries = append(runningEntries, c.entry(b))
	}
	queuedEntries := make([]Entry, 0, len(queued))
	byName := make(map[string]*velerov1.Backup, len(queued))
	for _, b := range queued {
		queuedEntries = append(queuedEntries, c.entry(b))
		byName[b.Name] = b
	}
	runnable := Runnable(c.interner, runningEntries, queuedEntries, c.limit)
	c.explain(ctx, queued, runningEntries, queuedEntries, sets.New(runnable...))
	for _, name := range runnable {
		klog.FromContext(ctx).Info("Backup may start", "backup", name)
		if err := c.setPhase(ctx, byName[name], velerov1.BackupPhaseReadyToStart); err != nil {
			return err
		}
	}
	return nil
}

// explain logs why queued backups wait (the backups and namespaces in
// their way, or the concurrency limit) when that changed since it was
// last logged, for the first maxExplained waiting backups.
func (c *Controller) explain(ctx context.Context, queued []*velerov1.Backup, running, queuedEntries []Entry, starting sets.Set[string]) {
	logger := klog.FromContext(ctx)
	explained := 0
	for i, e := range queuedEntries {
		if starting.Has(e.Name) {
			delete(c.explained, queued[i].UID)
			continue
		}
		if explained == maxExplained {
			return
		}
		explained++
		blockers := Blockers(c.interner, running, queuedEntries[:i], e)
		why := make([]string, 0, len(blockers))
		for _, b := range blockers {
			why = append(why, b.String())
		}
		summary := strings.Join(why, "; ")
		if prev, ok := c.explained[queued[i].UID]; ok && prev == summary {
			continue
		}
		c.explained[queued[i].UID] = summary
		if len(why) == 0 {
			logger.Info("Backup waits for a free slot", "backup", e.Name, "position", i+1, "concurrentBackups", c.limit)
			continue
		}
		logger.Info("Backup waits: its namespaces are in use", "backup", e.Name, "position", i+1, "blockedBy", why)
	}
}

// cancel takes a backup that has not started out of the queue, through
// FinalizingCancelled to Failed, as the cancellation design's phases go.
// Each step is decided on the stored backup.
func (c *Controller) cancel(ctx context.Context, b *velerov1.Backup) error {
	w := c.statusOf(b.Namespace)
	out, err := w.Update(ctx, b, func(cur *velerov1.Backup) {
		if cur.Spec.Cancel && cur.Status.Phase.Pending() {
			cur.Status.Phase = velerov1.BackupPhaseFinalizingCancelled
			cur.Status.FailureReason = velerov1.BackupCancelledReason
		}
	})
	if err == nil {
		now := metav1.Now()
		out, err = w.Update(ctx, out, func(cur *velerov1.Backup) {
			if cur.Status.Phase == velerov1.BackupPhaseFinalizingCancelled && cur.Status.StartTimestamp == nil {
				cur.Status.Phase = velerov1.BackupPhaseFailed
				cur.Status.CompletionTimestamp = &now
			}
		})
	}
	if status.Gone(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if out.Status.Phase == velerov1.BackupPhaseFailed {
		klog.FromContext(ctx).Info("Backup cancelled before it started", "backup", out.Name)
	}
	return nil
}

// setPhase moves a backup to phase if it is still in the phase this pass
// saw; otherwise the next pass decides.
func (c *Controller) setPhase(ctx context.Context, b *velerov1.Backup, phase velerov1.BackupPhase) error {
	_, err := c.statusOf(b.Namespace).Update(ctx, b, func(cur *velerov1.Backup) {
		if cur.Status.Phase == b.Status.Phase && !cur.Spec.Cancel && cur.DeletionTimestamp == nil {
			cur.Status.Phase = phase
		}
	})
	if status.Gone(err) {
		return nil
	}
	return err
}

// statusOf is the engine's status writer for the backups of a namespace.
func (c *Controller) statusOf(namespace string) *status.ResourceWriter[velerov1.Backup, *velerov1.Backup] {
	return status.Writer{Engine: velerov1.EngineBackupQueue, Observers: c.observers}.Backups(c.client, namespace)
}
