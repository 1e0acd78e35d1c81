package datamover

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/datamover/kopiarepo"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/failpoint"
)

// cleanUpTimeout bounds a run's clean-up (it runs after the run's context
// has ended).
const cleanUpTimeout = 2 * time.Minute

// nodeOS is the operating system of the node's volumes (status.nodeOS).
const nodeOS = "linux"

// run is one DataUpload running on this node.
type run struct {
	key cache.ObjectName
	// download: a DataDownload's (key names one), not a DataUpload's.
	download  bool
	uid       types.UID
	stop      context.CancelFunc
	cancelled atomic.Bool
}

// cancel stops the run for spec.cancel.
func (r *run) cancel() {
	r.cancelled.Store(true)
	r.stop()
}

func (r *run) canceled() bool { return r.cancelled.Load() }

// start runs a DataUpload (a slot reserved) until it ends or the engine
// stops.
func (c *Controller) start(engineCtx context.Context, du *velerov2alpha1.DataUpload) {
	ctx, stop := context.WithCancel(engineCtx)
	r := &run{key: cache.MetaObjectToName(du), uid: du.UID, stop: stop}
	c.runs.add(r)
	go func() {
		defer c.runs.done(r)
		defer stop()
		c.execute(engineCtx, ctx, r, du)
	}()
}

// moved is what a run's upload made.
type moved struct {
	result kopiarepo.UploadResult
	source string
	repo   *kopiarepo.Repository
	// release hands repo back (nil: no repository was opened).
	release func()
	// keepBase: a block volume's storage snapshot stays, the base of its
	// claim's next upload (block.go).
	keepBase bool
	// message says how the volume was read.
	message string
}

// execute moves the data, cleans up and writes the end: Completed, Failed
// or Canceled. When the engine stops first, only the publication (this
// process's) is taken down: the next holder runs it again.
func (c *Controller) execute(engineCtx, ctx context.Context, r *run, du *velerov2alpha1.DataUpload) {
	log := klog.FromContext(ctx).WithValues("dataUpload", r.key.String())
	m, err := c.move(ctx, du)
	if m.release != nil {
		defer m.release()
	}
	cleanCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*cleanUpTimeout)
	defer cancel()
	if engineCtx.Err() != nil && !r.canceled() {
		if uerr := c.unpublish(cleanCtx, du); uerr != nil {
			log.Error(uerr, "Taking the volume down as the engine stops")
		}
		return
	}
	keep := err == nil && !r.canceled() && m.keepBase
	cerr := c.cleanUp(cleanCtx, du, keep)
	if cerr != nil {
		log.Error(cerr, "Cleaning up after the upload")
	}
	switch {
	case r.canceled():
		// An upload that ended as it was cancelled leaves nothing.
		if m.result.SnapshotID != "" && m.repo != nil {
			if ferr := m.repo.Forget(cleanCtx, m.result.SnapshotID); ferr != nil {
				log.Error(ferr, "Forgetting the snapshot of a cancelled upload")
			}
		}
		err = c.end(cleanCtx, du, velerov2alpha1.DataUploadPhaseCanceled, withCleanUp("", cerr))
	case err != nil:
		err = c.end(cleanCtx, du, velerov2alpha1.DataUploadPhaseFailed, withCleanUp(err.Error(), cerr))
	default:
		err = c.complete(cleanCtx, du, m, cerr)
		if err == nil && keep && cerr == nil {
			if derr := c.dropOldBases(cleanCtx, du, m.source); derr != nil {
				log.Error(derr, "Deleting the claim's former changed-block bases (the next upload tries again)")
			}
		}
	}
	if err != nil {
		log.Error(err, "Writing the end of the upload")
		c.requeue(r.key, time.Second)
	}
}

// withCleanUp adds a clean-up error to a message.
func withCleanUp(msg string, cerr error) string {
	if cerr == nil {
		return msg
	}
	if msg != "" {
		msg += "; "
	}
	return msg + "cleaning up: " + cerr.Error()
}

// move exposes the snapshot, publishes its volume and uploads its files.
func (c *Controller) move(ctx context.Context, du *velerov2alpha1.DataUpload) (moved, error) {
	if du.Spec.CSISnapshot == nil {
		return moved{}, errors.New("spec.csiSnapshot is not set: only CSI snapshots are moved")
	}
	ex, err := c.expose(ctx, du)
	if err != nil {
		return moved{}, err
	}
	pub, err := ex.node.Publish(ctx, ex.volume, c.publishDir(du), true)
	if err != nil {
		return moved{}, err
	}
	if du, err = c.status.Update(ctx, du, func(d *velerov2alpha1.DataUpload) {
		if d.Status.Phase == velerov2alpha1.DataUploadPhaseAccepted {
			d.Status.Phase, d.Status.Node, d.Status.NodeOS = velerov2alpha1.DataUploadPhasePrepared, c.cfg.Node, nodeOS
		}
	}); err != nil {
		return moved{}, err
	}
	rep, release, err := c.cfg.Repositories.Open(ctx, du.Spec.BackupStorageLocation, du.Spec.SourceNamespace)
	if err != nil {
		return moved{}, fmt.Errorf("the repository of namespace %s in location %s: %w", du.Spec.SourceNamespace, du.Spec.BackupStorageLocation, err)
	}
	// Released by execute, which may still forget the snapshot.
	m := moved{repo: rep, release: release}
	now := metav1.NewTime(c.cfg.Clock.Now())
	if du, err = c.status.Update(ctx, du, func(d *velerov2alpha1.DataUpload) {
		if d.Status.Phase == velerov2alpha1.DataUploadPhasePrepared {
			d.Status.Phase, d.Status.StartTimestamp = velerov2alpha1.DataUploadPhaseInProgress, &now
		}
	}); err != nil {
		return m, err
	}
	c.cfg.Crash.Hit(failpoint.DataUploadInProgress)

	var done, total atomic.Int64
	finished := make(chan struct{})
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		status.Report(ctx, c.cfg.ProgressInterval, finished, func() velerov2alpha1.DataMoveOperationProgress {
			return velerov2alpha1.DataMoveOperationProgress{BytesDone: done.Load(), TotalBytes: total.Load()}
		}, func(p velerov2alpha1.DataMoveOperationProgress) error {
			_, err := c.status.Update(ctx, du, func(d *velerov2alpha1.DataUpload) {
				if !d.Status.Phase.Terminal() {
					d.Status.Progress = p
				}
			})
			return err
		})
	}()
	source := kopiarepo.SourcePath(du.Spec.SourceNamespace, du.Spec.SourcePVC)
	tags := map[string]string{velerov1.AsyncOperationIDLabel: du.Labels[velerov1.AsyncOperationIDLabel]}
	progress := func(d, t int64) {
		done.Store(d)
		total.Store(t)
	}
	m.source = source
	if ex.volume.Block {
		var b blockUpload
		b, err = c.uploadBlock(ctx, du, rep, pub.Path, source, tags, progress)
		m.result, m.keepBase, m.message = b.result.UploadResult, b.keepBase, b.message
	} else {
		m.result, err = rep.Upload(ctx, pub.Path, source, tags, progress)
	}
	close(finished)
	<-reported
	return m, err
}

// complete writes a completed upload's end.
func (c *Controller) complete(ctx context.Context, du *velerov2alpha1.DataUpload, m moved, cerr error) error {
	now := metav1.NewTime(c.cfg.Clock.Now())
	_, err := c.status.Update(ctx, du, func(d *velerov2alpha1.DataUpload) {
		if d.Status.Phase.Terminal() {
			return
		}
		st := &d.Status
		st.Phase, st.CompletionTimestamp = velerov2alpha1.DataUploadPhaseCompleted, &now
		st.SnapshotID, st.Path, st.IncrementalBytes = m.result.SnapshotID, m.source, m.result.HashedBytes
		st.Progress = velerov2alpha1.DataMoveOperationProgress{TotalBytes: m.result.TotalBytes, BytesDone: m.result.TotalBytes}
		st.Message = withCleanUp(m.message, cerr)
		if m.result.TotalBytes == 0 {
			st.Message = withCleanUp("volume was empty so no data was upload", cerr)
		}
	})
	if status.Gone(err) {
		return nil
	}
	return err
}
