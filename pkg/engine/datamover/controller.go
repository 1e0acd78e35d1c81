// Package datamover is the data-mover engine: it moves CSI snapshots' data
// into storage locations' kopia repositories (DataUploads), on the node
// whose CSI node service reaches the volumes, without pods (one engine per
// node, elected among that node's replicas, as the VM-host engines are).
//
// A DataUpload no node has taken is taken (Accepted, status.acceptedByNode)
// by a node that has the node service of its snapshot's driver and a free
// slot (--data-mover-concurrency). The node then runs it (run.go):
//
//   - expose (expose.go): once the VolumeSnapshot is ready, its snapshot
//     moves into the admin namespace (a VolumeSnapshotContent bound
//     statically to the same handle, as Velero's exposer does; the
//     original snapshot and content leave the claim's namespace, the
//     storage snapshot stays), a claim is made from it and, Bound, its
//     volume is published read-only in a private directory through the
//     node service (package csivolume) — Prepared;
//   - upload: its files go into the repository of the location and the
//     claim's namespace (package backuprepo, kopia), incremental over the
//     claim's previous snapshot, progress in the status — InProgress; a
//     block volume's device goes as one file, read only where its blocks
//     changed since the previous upload when the driver serves the CSI
//     SnapshotMetadata API (block.go: the storage snapshot is kept as the
//     next upload's base);
//   - clean up, whatever happened: the volume unpublished, the claim
//     deleted, the storage snapshot deleted (the data is off the cluster)
//     — then Completed with the kopia snapshot's ID, Failed with the
//     reason, or Canceled.
//
// spec.cancel stops a running upload within seconds (Canceling, then
// Canceled once cleaned up; kopia keeps nothing of it); one no node runs
// is Canceled at once. A run the engine's replica stopped in (a restart, a
// lost Lease) is run again from the start by the node's next holder (what
// kopia already holds is not uploaded again); one taken by a node that is
// no longer live fails with the reason.
package datamover

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	snapshotclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/datamover/changedblocks"
	"github.com/backstop-io/backstop/pkg/datamover/csivolume"
	"github.com/backstop-io/backstop/pkg/engine/backuprepo"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/engine/vmhost"
	"github.com/backstop-io/backstop/pkg/failpoint"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	informers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v2alpha1"
	listers "github.com/backstop-io/backstop/pkg/generated/listers/velero/v2alpha1"
)

// DefaultConcurrency is how many uploads a node runs at once (Velero's
// node-agent default).
const DefaultConcurrency = 1

// DefaultProgressInterval is how often a running upload's progress is
// written.
const DefaultProgressInterval = 5 * time.Second

// defaultOperationTimeout bounds the wait for the snapshot and the claim
// when the DataUpload sets no spec.operationTimeout (Velero's default
// csiSnapshotTimeout).
const defaultOperationTimeout = 10 * time.Minute

// Config is what the engine needs.
type Config struct {
	// Client writes the DataUploads' status (this server).
	Client        versioned.Interface
	DataUploads   informers.DataUploadInformer
	DataDownloads informers.DataDownloadInformer
	// Kube and Snapshots reach the source cluster, where the snapshots,
	// the claims and the volumes are.
	Kube      kubernetes.Interface
	Snapshots snapshotclient.Interface
	// Namespace is the admin namespace: the DataUploads' here, the
	// temporary snapshots and claims' in the source cluster.
	Namespace string
	// Node is this node's name; Hosts the live nodes (nil: this is the
	// only one).
	Node  string
	Hosts *vmhost.Hosts
	// Drivers are the CSI node services of this node, by driver name.
	Drivers map[string]*csivolume.Node
	// Repositories opens the locations' kopia repositories.
	Repositories *backuprepo.Repositories
	// ChangedBlocks asks drivers which blocks of a block volume changed
	// since its previous upload (nil: block volumes are read whole).
	ChangedBlocks *changedblocks.Client
	// WorkDir is a private directory where volumes are published.
	WorkDir string
	// Concurrency is how many uploads run at once on this node.
	Concurrency      int
	ProgressInterval time.Duration
	Clock            clock.Clock
	Observers        []status.Observer
	Crash            failpoint.Set
}

// Controller is the data-mover engine of one node.
type Controller struct {
	*reconcile.Loop
	cfg    Config
	lister listers.DataUploadLister
	status *status.ResourceWriter[velerov2alpha1.DataUpload, *velerov2alpha1.DataUpload]
	// downloads is the loop of the DataDownloads (the embedded loop is
	// the DataUploads').
	downloads      *reconcile.Loop
	downloadLister listers.DataDownloadLister
	downloadStatus *status.ResourceWriter[velerov2alpha1.DataDownload, *velerov2alpha1.DataDownload]
	runs           *runs
	// begin runs a DataUpload a slot was reserved for (start; tests of
	// the decisions replace it).
	begin         func(ctx context.Context, du *velerov2alpha1.DataUpload)
	beginDownload func(ctx context.Context, dd *velerov2alpha1.DataDownload)
	// requeue syncs a key again later (the loop's AddAfter; tests record
	// it).
	requeue, requeueDownload func(key cache.ObjectName, after time.Duration)
}

// New returns the engine of cfg.
func New(cfg Config) (*Controller, error) {
	if cfg.Concurrency < 1 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = DefaultProgressInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	writer := status.Writer{Engine: velerov2alpha1.EngineDataMover, Observers: cfg.Observers}
	c := &Controller{cfg: cfg, lister: cfg.DataUploads.Lister(), downloadLister: cfg.DataDownloads.Lister(), runs: newRuns(cfg.Concurrency),
		status: writer.DataUploads(cfg.Client, cfg.Namespace), downloadStatus: writer.DataDownloads(cfg.Client, cfg.Namespace)}
	c.begin, c.beginDownload = c.start, c.startDownload
	c.Loop = reconcile.NewLoop(velerov2alpha1.EngineDataMover, c.sync)
	c.downloads = reconcile.NewLoop(velerov2alpha1.EngineDataMover+"-downloads", c.syncDownload)
	c.requeue, c.requeueDownload = c.AddAfter, c.downloads.AddAfter
	if err := c.Watch(cfg.DataUploads.Informer()); err != nil {
		return nil, err
	}
	// A DataUpload deleted stops its run and drops its kept base.
	if err := c.WatchDeletes(cfg.DataUploads.Informer()); err != nil {
		return nil, err
	}
	if err := c.downloads.Watch(cfg.DataDownloads.Informer()); err != nil {
		return nil, err
	}
	return c, nil
}

// Run runs the engine until ctx is done, then waits for its uploads to
// stop (cleaned up enough for the next holder to run them again) and
// closes the repositories.
func (c *Controller) Run(ctx context.Context, workers int) {
	for _, key := range c.keptBases(ctx) {
		c.Add(key)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.downloads.Run(ctx, workers)
	}()
	c.Loop.Run(ctx, workers)
	<-done
	c.runs.wait()
	c.cfg.Repositories.Close(context.WithoutCancel(ctx))
	for _, n := range c.cfg.Drivers {
		_ = n.Close()
	}
}

// builtIn reports whether a data mover name is this one's (Velero's
// built-in mover: "" or "velero").
func builtIn(mover string) bool { return mover == "" || mover == "velero" }

// sync decides what a DataUpload needs from this node.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	du, err := c.lister.DataUploads(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.runs.cancelName(key, false)
		// Its backup deleted, its kopia snapshot is forgotten: a storage
		// snapshot kept as the base of its claim's next upload is of no
		// use any more.
		return c.dropBase(ctx, key)
	}
	if err != nil {
		return err
	}
	if !builtIn(du.Spec.DataMover) || du.Status.Phase.Terminal() {
		return nil
	}
	if r := c.runs.get(du.UID); r != nil {
		if du.Spec.Cancel && !r.canceled() {
			if _, err := c.status.Update(ctx, du, func(d *velerov2alpha1.DataUpload) {
				if d.Status.Phase == velerov2alpha1.DataUploadPhaseInProgress {
					d.Status.Phase = velerov2alpha1.DataUploadPhaseCanceling
				}
			}); err != nil && !status.Gone(err) {
				return err
			}
			r.cancel()
		}
		return nil
	}
	owner := du.Status.AcceptedByNode
	switch {
	case owner != "" && owner != c.cfg.Node:
		return c.checkOwner(ctx, du, owner)
	case du.Spec.Cancel:
		// Nothing runs it: what a run of this node left is removed, and
		// it ends now.
		msg := ""
		if owner == c.cfg.Node {
			if err := c.cleanUp(ctx, du, false); err != nil {
				msg = "cleaning up: " + err.Error()
			}
		}
		return c.end(ctx, du, velerov2alpha1.DataUploadPhaseCanceled, msg)
	case owner == "":
		if du.Spec.CSISnapshot == nil || c.cfg.Drivers[du.Spec.CSISnapshot.Driver] == nil {
			// Another node's driver.
			return nil
		}
		if !c.runs.reserve() {
			c.requeue(key, 2*time.Second)
			return nil
		}
		now := metav1.NewTime(c.cfg.Clock.Now())
		accepted, err := c.status.Update(ctx, du, func(d *velerov2alpha1.DataUpload) {
			if d.Status.AcceptedByNode != "" || (d.Status.Phase != "" && d.Status.Phase != velerov2alpha1.DataUploadPhaseNew) {
				return
			}
			d.Status.Phase, d.Status.AcceptedByNode, d.Status.AcceptedTimestamp = velerov2alpha1.DataUploadPhaseAccepted, c.cfg.Node, &now
		})
		if err != nil || accepted.Status.AcceptedByNode != c.cfg.Node {
			c.runs.release()
			if status.Gone(err) {
				return nil
			}
			return err
		}
		c.begin(ctx, accepted)
		return nil
	default:
		// This node's, and it runs nowhere: the replica that ran it
		// stopped; this one runs it again.
		if !c.runs.reserve() {
			c.requeue(key, 2*time.Second)
			return nil
		}
		klog.FromContext(ctx).Info("Running a DataUpload again: the replica that ran it stopped", "dataUpload", key.String(), "phase", du.Status.Phase)
		c.begin(ctx, du)
		return nil
	}
}

// checkOwner fails a DataUpload taken by a node that is no longer live.
func (c *Controller) checkOwner(ctx context.Context, du *velerov2alpha1.DataUpload, owner string) error {
	gone, err := c.ownerGone(ctx, cache.MetaObjectToName(du), owner, c.requeue)
	if err != nil || !gone {
		return err
	}
	return c.end(ctx, du, velerov2alpha1.DataUploadPhaseFailed, ownerGoneMessage(owner)+"; the snapshot's data was not moved")
}

// ownerGone reports whether the node that took an object is no longer
// live; one that is, is looked at again later (requeue: it may stop).
func (c *Controller) ownerGone(ctx context.Context, key cache.ObjectName, owner string, requeue func(cache.ObjectName, time.Duration)) (bool, error) {
	if c.cfg.Hosts == nil {
		return false, nil
	}
	live, err := c.cfg.Hosts.Live(ctx)
	if err != nil {
		return false, fmt.Errorf("listing the live nodes: %w", err)
	}
	if slices.Contains(live, owner) {
		requeue(key, time.Minute)
		return false, nil
	}
	return true, nil
}

// ownerGoneMessage says why an object a gone node took failed.
func ownerGoneMessage(owner string) string {
	return fmt.Sprintf("the data mover of node %s, which took it, no longer runs", owner)
}

// end writes a final phase (with a message, if any).
func (c *Controller) end(ctx context.Context, du *velerov2alpha1.DataUpload, phase velerov2alpha1.DataUploadPhase, message string) error {
	now := metav1.NewTime(c.cfg.Clock.Now())
	_, err := c.status.Update(ctx, du, func(d *velerov2alpha1.DataUpload) {
		if d.Status.Phase.Terminal() {
			return
		}
		d.Status.Phase, d.Status.CompletionTimestamp = phase, &now
		if d.Status.StartTimestamp == nil {
			d.Status.StartTimestamp = &now
		}
		if message != "" {
			d.Status.Message = message
		}
	})
	if status.Gone(err) {
		return nil
	}
	return err
}

// runs are the uploads running on this node, at most limit of them.
type runs struct {
	mu      sync.Mutex
	limit   int
	used    int
	byUID   map[types.UID]*run
	running sync.WaitGroup
}

func newRuns(limit int) *runs { return &runs{limit: limit, byUID: map[types.UID]*run{}} }

// reserve takes a slot, if one is free.
func (r *runs) reserve() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.used >= r.limit {
		return false
	}
	r.used++
	return true
}

// release gives a slot back.
func (r *runs) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.used--
}

func (r *runs) get(uid types.UID) *run {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byUID[uid]
}

// cancelName cancels the run of a deleted DataUpload (or DataDownload).
func (r *runs) cancelName(key cache.ObjectName, download bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, run := range r.byUID {
		if run.key == key && run.download == download {
			run.cancel()
		}
	}
}

func (r *runs) add(run *run) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byUID[run.uid] = run
	r.running.Add(1)
}

// done removes a run and gives its slot back.
func (r *runs) done(run *run) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byUID, run.uid)
	r.used--
	r.running.Done()
}

// wait waits until every run has returned.
func (r *runs) wait() { r.running.Wait() }
