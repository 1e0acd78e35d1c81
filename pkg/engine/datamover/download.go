package datamover

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/datamover/csivolume"
	"github.com/backstop-io/backstop/pkg/datamover/kopiarepo"
	"github.com/backstop-io/backstop/pkg/engine/status"
)

// DataDownloads, the other way (the restore makes them): the node whose
// driver provisions the target claim's class takes one, makes a claim of
// that class in the admin namespace (its volume on this node when the
// class waits for a consumer), publishes it read-write, writes the kopia
// snapshot into it (one of the repository of spec.sourceNamespace, whose
// source is a claim of that namespace), and hands its volume to the target
// claim as Velero's exposer does: the volume kept (Retain) while its claim
// is deleted, then bound to the target claim (its claimRef, and the
// target's selector label, velero.io/dynamic-pv-restore), its reclaim
// policy given back once Bound.

// selectedNodeAnnotation places the volume of a claim whose class waits for
// a consumer.
const selectedNodeAnnotation = "volume.kubernetes.io/selected-node"

// The annotations of a volume's binding the exposer removes.
const (
	boundByControllerAnnotation = "pv.kubernetes.io/bound-by-controller"
)

// syncDownload decides what a DataDownload needs from this node.
func (c *Controller) syncDownload(ctx context.Context, key cache.ObjectName) error {
	dd, err := c.downloadLister.DataDownloads(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.runs.cancelName(key, true)
		return nil
	}
	if err != nil {
		return err
	}
	if !builtIn(dd.Spec.DataMover) || dd.Status.Phase.Terminal() {
		return nil
	}
	if r := c.runs.get(dd.UID); r != nil {
		if dd.Spec.Cancel && !r.canceled() {
			if _, err := c.downloadStatus.Update(ctx, dd, func(d *velerov2alpha1.DataDownload) {
				if d.Status.Phase == velerov2alpha1.DataDownloadPhaseInProgress {
					d.Status.Phase = velerov2alpha1.DataDownloadPhaseCanceling
				}
			}); err != nil && !status.Gone(err) {
				return err
			}
			r.cancel()
		}
		return nil
	}
	owner := dd.Status.AcceptedByNode
	switch {
	case owner != "" && owner != c.cfg.Node:
		ended, err := c.ownerGone(ctx, key, owner, c.requeueDownload)
		if err != nil || !ended {
			return err
		}
		return c.endDownload(ctx, dd, velerov2alpha1.DataDownloadPhaseFailed, ownerGoneMessage(owner))
	case dd.Spec.Cancel:
		msg := ""
		if owner == c.cfg.Node {
			if err := c.cleanUpDownload(ctx, dd); err != nil {
				msg = "cleaning up: " + err.Error()
			}
		}
		return c.endDownload(ctx, dd, velerov2alpha1.DataDownloadPhaseCanceled, msg)
	case owner == "":
		reachable, err := c.reachesTarget(ctx, dd)
		if err != nil || !reachable {
			// Another node's, or none's: the restore gives it up after
			// its operation timeout, saying why.
			return err
		}
		if !c.runs.reserve() {
			c.requeueDownload(key, 2*time.Second)
			return nil
		}
		now := metav1.NewTime(c.cfg.Clock.Now())
		accepted, err := c.downloadStatus.Update(ctx, dd, func(d *velerov2alpha1.DataDownload) {
			if d.Status.AcceptedByNode != "" || (d.Status.Phase != "" && d.Status.Phase != velerov2alpha1.DataDownloadPhaseNew) {
				return
			}
			d.Status.Phase, d.Status.AcceptedByNode, d.Status.AcceptedTimestamp = velerov2alpha1.DataDownloadPhaseAccepted, c.cfg.Node, &now
		})
		if err != nil || accepted.Status.AcceptedByNode != c.cfg.Node {
			c.runs.release()
			if status.Gone(err) {
				return nil
			}
			return err
		}
		c.beginDownload(ctx, accepted)
		return nil
	default:
		if !c.runs.reserve() {
			c.requeueDownload(key, 2*time.Second)
			return nil
		}
		klog.FromContext(ctx).Info("Running a DataDownload again: the replica that ran it stopped", "dataDownload", key.String(), "phase", dd.Status.Phase)
		c.beginDownload(ctx, dd)
		return nil
	}
}

// reachesTarget reports whether this node has the node service of the
// driver that provisions the target claim's class (a node without a
// driver reads nothing). A target claim that is not there, or of no class
// this node knows, is not this node's.
func (c *Controller) reachesTarget(ctx context.Context, dd *velerov2alpha1.DataDownload) (bool, error) {
	if len(c.cfg.Drivers) == 0 {
		return false, nil
	}
	t := dd.Spec.TargetVolume
	pvc, err := c.cfg.Kube.CoreV1().PersistentVolumeClaims(t.Namespace).Get(ctx, t.PVC, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("the target PVC %s/%s: %w", t.Namespace, t.PVC, err)
	}
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return false, nil
	}
	class, err := c.cfg.Kube.StorageV1().StorageClasses().Get(ctx, *pvc.Spec.StorageClassName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("the storage class %s of the target PVC %s/%s: %w", *pvc.Spec.StorageClassName, t.Namespace, t.PVC, err)
	}
	return c.cfg.Drivers[class.Provisioner] != nil, nil
}

// classOf reads a claim's StorageClass.
func (c *Controller) classOf(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (*storagev1.StorageClass, error) {
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return nil, fmt.Errorf("the target PVC %s/%s has no storage class: no driver provisions it", pvc.Namespace, pvc.Name)
	}
	class, err := c.cfg.Kube.StorageV1().StorageClasses().Get(ctx, *pvc.Spec.StorageClassName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("the storage class %s of the target PVC %s/%s: %w", *pvc.Spec.StorageClassName, pvc.Namespace, pvc.Name, err)
	}
	return class, nil
}

// endDownload writes a final phase (with a message, if any).
func (c *Controller) endDownload(ctx context.Context, dd *velerov2alpha1.DataDownload, phase velerov2alpha1.DataDownloadPhase, message string) error {
	now := metav1.NewTime(c.cfg.Clock.Now())
	_, err := c.downloadStatus.Update(ctx, dd, func(d *velerov2alpha1.DataDownload) {
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

// startDownload runs a DataDownload (a slot reserved) until it ends or
// the engine stops.
func (c *Controller) startDownload(engineCtx context.Context, dd *velerov2alpha1.DataDownload) {
	ctx, stop := context.WithCancel(engineCtx)
	r := &run{key: cache.MetaObjectToName(dd), download: true, uid: dd.UID, stop: stop}
	c.runs.add(r)
	go func() {
		defer c.runs.done(r)
		defer stop()
		c.executeDownload(engineCtx, ctx, r, dd)
	}()
}

// executeDownload writes the data, hands the volume over, cleans up and
// writes the end.
func (c *Controller) executeDownload(engineCtx, ctx context.Context, r *run, dd *velerov2alpha1.DataDownload) {
	log := klog.FromContext(ctx).WithValues("dataDownload", r.key.String())
	written, err := c.download(ctx, dd)
	cleanCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanUpTimeout)
	defer cancel()
	if engineCtx.Err() != nil && !r.canceled() {
		if uerr := c.unpublishClaim(cleanCtx, dd.Name, dd.UID); uerr != nil {
			log.Error(uerr, "Taking the volume down as the engine stops")
		}
		return
	}
	var cerr error
	if err != nil || r.canceled() {
		cerr = c.cleanUpDownload(cleanCtx, dd)
		if cerr != nil {
			log.Error(cerr, "Cleaning up after the download")
		}
	}
	switch {
	case r.canceled():
		err = c.endDownload(cleanCtx, dd, velerov2alpha1.DataDownloadPhaseCanceled, withCleanUp("", cerr))
	case err != nil:
		err = c.endDownload(cleanCtx, dd, velerov2alpha1.DataDownloadPhaseFailed, withCleanUp(err.Error(), cerr))
	default:
		now := metav1.NewTime(c.cfg.Clock.Now())
		_, err = c.downloadStatus.Update(cleanCtx, dd, func(d *velerov2alpha1.DataDownload) {
			if d.Status.Phase.Terminal() {
				return
			}
			d.Status.Phase, d.Status.CompletionTimestamp = velerov2alpha1.DataDownloadPhaseCompleted, &now
			d.Status.Progress = velerov2alpha1.DataMoveOperationProgress{TotalBytes: written, BytesDone: written}
		})
		if status.Gone(err) {
			err = nil
		}
	}
	if err != nil {
		log.Error(err, "Writing the end of the download")
		c.requeueDownload(r.key, time.Second)
	}
}

// download writes the snapshot into a new volume and hands it to the
// target claim; it returns the bytes the snapshot holds.
func (c *Controller) download(ctx context.Context, dd *velerov2alpha1.DataDownload) (int64, error) {
	t := dd.Spec.TargetVolume
	target, err := c.cfg.Kube.CoreV1().PersistentVolumeClaims(t.Namespace).Get(ctx, t.PVC, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("the target PVC %s/%s: %w", t.Namespace, t.PVC, err)
	}
	if target.Status.Phase == corev1.ClaimBound {
		if _, handed := c.handedOver(ctx, dd, target); handed {
			// A restart after the volume was handed over.
			return dd.Spec.SnapshotSize, nil
		}
		return 0, fmt.Errorf("the target PVC %s/%s is already bound to volume %s", t.Namespace, t.PVC, target.Spec.VolumeName)
	}
	selector := target.Spec.Selector
	if selector == nil || selector.MatchLabels[velerov1.DynamicPVRestoreLabel] == "" {
		return 0, fmt.Errorf("the target PVC %s/%s does not select its volume by %s: it would bind to another volume", t.Namespace, t.PVC, velerov1.DynamicPVRestoreLabel)
	}
	class, err := c.classOf(ctx, target)
	if err != nil {
		return 0, err
	}
	node := c.cfg.Drivers[class.Provisioner]
	if node == nil {
		return 0, fmt.Errorf("this node has no node service of CSI driver %s", class.Provisioner)
	}
	pvc, err := c.makeRestoreClaim(ctx, dd, target, class)
	if err != nil {
		return 0, err
	}
	pv, err := c.waitBound(ctx, pvc, operationTimeout(dd.Spec.OperationTimeout))
	if err != nil {
		return 0, err
	}
	vol := csivolume.Volume{Handle: pv.Spec.CSI.VolumeHandle, FSType: pv.Spec.CSI.FSType, Attributes: pv.Spec.CSI.VolumeAttributes,
		Block: pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock}
	pub, err := node.Publish(ctx, vol, c.publishDirOf(dd.UID), false)
	if err != nil {
		return 0, err
	}
	if dd, err = c.downloadStatus.Update(ctx, dd, func(d *velerov2alpha1.DataDownload) {
		if d.Status.Phase == velerov2alpha1.DataDownloadPhaseAccepted {
			d.Status.Phase, d.Status.Node = velerov2alpha1.DataDownloadPhasePrepared, c.cfg.Node
		}
	}); err != nil {
		return 0, err
	}
	rep, release, err := c.cfg.Repositories.Open(ctx, dd.Spec.BackupStorageLocation, dd.Spec.SourceNamespace)
	if err != nil {
		return 0, fmt.Errorf("the repository of namespace %s in location %s: %w", dd.Spec.SourceNamespace, dd.Spec.BackupStorageLocation, err)
	}
	defer release()
	// The repository is the source namespace's; the snapshot must be
	// one of a claim of it.
	source, err := rep.SourceOf(ctx, dd.Spec.SnapshotID)
	if err != nil {
		return 0, err
	}
	if want := kopiarepo.SourcePath(dd.Spec.SourceNamespace, "") + "/"; !strings.HasPrefix(source, want) {
		return 0, fmt.Errorf("snapshot %s is of %s, not of a claim of namespace %s", dd.Spec.SnapshotID, source, dd.Spec.SourceNamespace)
	}
	now := metav1.NewTime(c.cfg.Clock.Now())
	if dd, err = c.downloadStatus.Update(ctx, dd, func(d *velerov2alpha1.DataDownload) {
		if d.Status.Phase == velerov2alpha1.DataDownloadPhasePrepared {
			d.Status.Phase, d.Status.StartTimestamp = velerov2alpha1.DataDownloadPhaseInProgress, &now
		}
	}); err != nil {
		return 0, err
	}
	var done, total atomic.Int64
	finished, reported := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(reported)
		status.Report(ctx, c.cfg.ProgressInterval, finished, func() velerov2alpha1.DataMoveOperationProgress {
			return velerov2alpha1.DataMoveOperationProgress{BytesDone: done.Load(), TotalBytes: total.Load()}
		}, func(p velerov2alpha1.DataMoveOperationProgress) error {
			_, err := c.downloadStatus.Update(ctx, dd, func(d *velerov2alpha1.DataDownload) {
				if !d.Status.Phase.Terminal() {
					d.Status.Progress = p
				}
			})
			return err
		})
	}()
	progress := func(d, t int64) {
		done.Store(d)
		total.Store(t)
	}
	var written int64
	if vol.Block {
		written, err = rep.RestoreBlock(ctx, dd.Spec.SnapshotID, pub.Path, progress)
	} else {
		var res kopiarepo.RestoreResult
		res, err = rep.Restore(ctx, dd.Spec.SnapshotID, pub.Path, progress)
		written = res.Bytes
		if res.SetIDFiles > 0 {
			klog.FromContext(ctx).Info("Restored files without their set-user-ID and set-group-ID bits", "dataDownload", dd.Name, "files", res.SetIDFiles)
		}
	}
	close(finished)
	<-reported
	if err != nil {
		return 0, err
	}
	if err := node.Unpublish(ctx, vol, c.publishDirOf(dd.UID)); err != nil {
		return 0, err
	}
	if err := c.handOver(ctx, dd, pvc, pv, target); err != nil {
		return 0, err
	}
	return written, nil
}

// makeRestoreClaim makes the claim the data is written into: the target's
// class, size, access modes and volume mode, in the admin namespace.
func (c *Controller) makeRestoreClaim(ctx context.Context, dd *velerov2alpha1.DataDownload, target *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) (*corev1.PersistentVolumeClaim, error) {
	claims := c.cfg.Kube.CoreV1().PersistentVolumeClaims(c.cfg.Namespace)
	if got, err := claims.Get(ctx, dd.Name, metav1.GetOptions{}); err == nil {
		return got, nil
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading PVC %s/%s: %w", c.cfg.Namespace, dd.Name, err)
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: dd.Name, Namespace: c.cfg.Namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      target.Spec.AccessModes,
			StorageClassName: target.Spec.StorageClassName,
			VolumeMode:       target.Spec.VolumeMode,
			Resources:        corev1.VolumeResourceRequirements{Requests: target.Spec.Resources.Requests},
		},
	}
	if len(pvc.Spec.AccessModes) == 0 {
		pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	if class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer {
		pvc.Annotations = map[string]string{selectedNodeAnnotation: c.cfg.Node}
	}
	created, err := claims.Create(ctx, pvc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return claims.Get(ctx, dd.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("creating PVC %s/%s: %w", c.cfg.Namespace, dd.Name, err)
	}
	return created, nil
}

// handOver gives the written volume to the target claim: kept while its
// claim goes, bound to the target (claimRef, the target's selector
// labels), its reclaim policy back once the target is Bound.
func (c *Controller) handOver(ctx context.Context, dd *velerov2alpha1.DataDownload, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, target *corev1.PersistentVolumeClaim) error {
	pvs := c.cfg.Kube.CoreV1().PersistentVolumes()
	policy := pv.Spec.PersistentVolumeReclaimPolicy
	if err := c.setReclaimPolicy(ctx, pv.Name, corev1.PersistentVolumeReclaimRetain); err != nil {
		return err
	}
	if err := c.cfg.Kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting PVC %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	timeout := operationTimeout(dd.Spec.OperationTimeout)
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := pvs.Get(ctx, pv.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.Phase == corev1.VolumeReleased || got.Spec.ClaimRef == nil || got.Spec.ClaimRef.UID != pvc.UID, nil
	}); err != nil {
		return fmt.Errorf("PV %s released by PVC %s/%s: %w", pv.Name, pvc.Namespace, pvc.Name, err)
	}
	labels := map[string]string{}
	for k, v := range target.Spec.Selector.MatchLabels {
		labels[k] = v
	}
	patch, err := jsonMerge(map[string]any{
		"metadata": map[string]any{"labels": labels, "annotations": map[string]any{boundByControllerAnnotation: nil}},
		"spec": map[string]any{"claimRef": map[string]any{"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": target.Namespace,
			"name": target.Name, "uid": string(target.UID), "resourceVersion": nil}},
	})
	if err != nil {
		return err
	}
	if _, err := pvs.Patch(ctx, pv.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("binding PV %s to PVC %s/%s: %w", pv.Name, target.Namespace, target.Name, err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := c.cfg.Kube.CoreV1().PersistentVolumeClaims(target.Namespace).Get(ctx, target.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.Phase == corev1.ClaimBound && got.Spec.VolumeName == pv.Name, nil
	}); err != nil {
		return fmt.Errorf("PVC %s/%s bound to PV %s: %w", target.Namespace, target.Name, pv.Name, err)
	}
	return c.setReclaimPolicy(ctx, pv.Name, policy)
}

// handedOver reports whether the target claim is bound to a volume this
// DataDownload wrote (a restart after the hand-over), and the volume.
func (c *Controller) handedOver(ctx context.Context, dd *velerov2alpha1.DataDownload, target *corev1.PersistentVolumeClaim) (*corev1.PersistentVolume, bool) {
	if target.Spec.VolumeName == "" || target.Spec.Selector == nil {
		return nil, false
	}
	pv, err := c.cfg.Kube.CoreV1().PersistentVolumes().Get(ctx, target.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return nil, false
	}
	want := target.Spec.Selector.MatchLabels[velerov1.DynamicPVRestoreLabel]
	return pv, want != "" && pv.Labels[velerov1.DynamicPVRestoreLabel] == want
}

// setReclaimPolicy sets a volume's reclaim policy.
func (c *Controller) setReclaimPolicy(ctx context.Context, pv string, policy corev1.PersistentVolumeReclaimPolicy) error {
	patch := fmt.Appendf(nil, `{"spec":{"persistentVolumeReclaimPolicy":%q}}`, policy)
	if _, err := c.cfg.Kube.CoreV1().PersistentVolumes().Patch(ctx, pv, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("setting the reclaim policy of PV %s to %s: %w", pv, policy, err)
	}
	return nil
}

// cleanUpDownload removes what a DataDownload's run made and did not hand
// over: the publication and the claim (whose volume goes with it: its
// reclaim policy is made Delete again).
func (c *Controller) cleanUpDownload(ctx context.Context, dd *velerov2alpha1.DataDownload) error {
	if err := c.unpublishClaim(ctx, dd.Name, dd.UID); err != nil {
		return err
	}
	claims := c.cfg.Kube.CoreV1().PersistentVolumeClaims(c.cfg.Namespace)
	pvc, err := claims.Get(ctx, dd.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading PVC %s/%s: %w", c.cfg.Namespace, dd.Name, err)
	}
	if pvc.Spec.VolumeName != "" {
		if err := c.setReclaimPolicy(ctx, pvc.Spec.VolumeName, corev1.PersistentVolumeReclaimDelete); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if err := claims.Delete(ctx, dd.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(pvc.UID)}}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting PVC %s/%s: %w", c.cfg.Namespace, dd.Name, err)
	}
	return nil
}
