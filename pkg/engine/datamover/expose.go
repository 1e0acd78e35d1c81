package datamover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/datamover/csivolume"
	"github.com/backstop-io/backstop/pkg/datamover/kopiarepo"
)

// The temporary objects of a DataUpload in the source cluster are named
// after it, as Velero's exposer names them: the VolumeSnapshot and the
// claim in the admin namespace, and the VolumeSnapshotContent.

// operationTimeout is how long a snapshot and a claim are waited for
// (spec.operationTimeout, or the default).
func operationTimeout(d metav1.Duration) time.Duration {
	if d.Duration > 0 {
		return d.Duration
	}
	return defaultOperationTimeout
}

// exposed is a DataUpload's volume, ready to publish.
type exposed struct {
	volume csivolume.Volume
	node   *csivolume.Node
}

// expose makes the claim of the DataUpload's snapshot and returns its
// volume once Bound. Each step is idempotent: a run again after a restart
// finds what the first made.
func (c *Controller) expose(ctx context.Context, du *velerov2alpha1.DataUpload) (exposed, error) {
	node := c.cfg.Drivers[du.Spec.CSISnapshot.Driver]
	if node == nil {
		return exposed{}, fmt.Errorf("this node has no node service of CSI driver %s", du.Spec.CSISnapshot.Driver)
	}
	timeout := operationTimeout(du.Spec.OperationTimeout)
	restoreSize, err := c.moveSnapshot(ctx, du, timeout)
	if err != nil {
		return exposed{}, err
	}
	pvc, err := c.makeClaim(ctx, du, restoreSize)
	if err != nil {
		return exposed{}, err
	}
	pv, err := c.waitBound(ctx, pvc, timeout)
	if err != nil {
		return exposed{}, err
	}
	vol := csivolume.Volume{Handle: pv.Spec.CSI.VolumeHandle, FSType: pv.Spec.CSI.FSType, Attributes: pv.Spec.CSI.VolumeAttributes,
		Block: pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock}
	return exposed{volume: vol, node: node}, nil
}

// moveSnapshot moves the backup's snapshot into the admin namespace: a
// content bound statically to its handle (deletion policy Retain until
// clean-up) and a VolumeSnapshot of it, named after the DataUpload; the
// original snapshot and content are deleted, the storage snapshot kept.
// It returns the snapshot's restore size.
func (c *Controller) moveSnapshot(ctx context.Context, du *velerov2alpha1.DataUpload, timeout time.Duration) (*resource.Quantity, error) {
	snaps := c.cfg.Snapshots.SnapshotV1()
	ns, name := du.Spec.SourceNamespace, du.Spec.CSISnapshot.VolumeSnapshot
	moved, err := snaps.VolumeSnapshots(c.cfg.Namespace).Get(ctx, du.Name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading VolumeSnapshot %s/%s: %w", c.cfg.Namespace, du.Name, err)
	}
	if err != nil {
		moved = nil
	}
	if moved == nil {
		orig, content, err := c.waitReady(ctx, ns, name, timeout)
		if err != nil {
			return nil, err
		}
		if err := c.setDeletionPolicy(ctx, content.Name, snapshotv1.VolumeSnapshotContentRetain); err != nil {
			return nil, err
		}
		if err := c.makeStaticSnapshot(ctx, du, content); err != nil {
			return nil, err
		}
		// The original leaves the claim's namespace; Retain keeps the
		// storage snapshot, which is the moved one's now.
		if err := snaps.VolumeSnapshots(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &orig.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("deleting VolumeSnapshot %s/%s: %w", ns, name, err)
		}
		if err := snaps.VolumeSnapshotContents().Delete(ctx, content.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &content.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("deleting VolumeSnapshotContent %s: %w", content.Name, err)
		}
	}
	ready, _, err := c.waitReady(ctx, c.cfg.Namespace, du.Name, timeout)
	if err != nil {
		return nil, err
	}
	if ready.Status.RestoreSize == nil {
		return nil, fmt.Errorf("VolumeSnapshot %s/%s has no restore size", c.cfg.Namespace, du.Name)
	}
	return ready.Status.RestoreSize, nil
}

// makeStaticSnapshot makes the content bound to content's handle and its
// VolumeSnapshot in the admin namespace.
func (c *Controller) makeStaticSnapshot(ctx context.Context, du *velerov2alpha1.DataUpload, content *snapshotv1.VolumeSnapshotContent) error {
	snaps := c.cfg.Snapshots.SnapshotV1()
	if content.Status == nil || content.Status.SnapshotHandle == nil {
		return fmt.Errorf("VolumeSnapshotContent %s has no snapshot handle", content.Name)
	}
	vsc := &snapshotv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: du.Name},
		Spec: snapshotv1.VolumeSnapshotContentSpec{
			DeletionPolicy:          snapshotv1.VolumeSnapshotContentRetain,
			Driver:                  content.Spec.Driver,
			Source:                  snapshotv1.VolumeSnapshotContentSource{SnapshotHandle: content.Status.SnapshotHandle},
			VolumeSnapshotClassName: content.Spec.VolumeSnapshotClassName,
			VolumeSnapshotRef:       corev1.ObjectReference{Kind: "VolumeSnapshot", APIVersion: snapshotv1.SchemeGroupVersion.String(), Namespace: c.cfg.Namespace, Name: du.Name},
			SourceVolumeMode:        content.Spec.SourceVolumeMode,
		},
	}
	if _, err := snaps.VolumeSnapshotContents().Create(ctx, vsc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating VolumeSnapshotContent %s: %w", du.Name, err)
	}
	vs := &snapshotv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: du.Name, Namespace: c.cfg.Namespace},
		Spec: snapshotv1.VolumeSnapshotSpec{Source: snapshotv1.VolumeSnapshotSource{VolumeSnapshotContentName: ptr.To(du.Name)},
			VolumeSnapshotClassName: content.Spec.VolumeSnapshotClassName},
	}
	if _, err := snaps.VolumeSnapshots(c.cfg.Namespace).Create(ctx, vs, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating VolumeSnapshot %s/%s: %w", c.cfg.Namespace, du.Name, err)
	}
	return nil
}

// waitReady waits until a VolumeSnapshot is ready to use and returns it
// with its content.
func (c *Controller) waitReady(ctx context.Context, ns, name string, timeout time.Duration) (*snapshotv1.VolumeSnapshot, *snapshotv1.VolumeSnapshotContent, error) {
	var vs *snapshotv1.VolumeSnapshot
	var content *snapshotv1.VolumeSnapshotContent
	why := "not read yet"
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		got, err := c.cfg.Snapshots.SnapshotV1().VolumeSnapshots(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("reading VolumeSnapshot %s/%s: %w", ns, name, err)
		}
		st := got.Status
		if st == nil || st.BoundVolumeSnapshotContentName == nil || st.ReadyToUse == nil || !*st.ReadyToUse {
			why = "not ready to use"
			if st != nil && st.Error != nil && st.Error.Message != nil {
				why = *st.Error.Message
			}
			return false, nil
		}
		vsc, err := c.cfg.Snapshots.SnapshotV1().VolumeSnapshotContents().Get(ctx, *st.BoundVolumeSnapshotContentName, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("reading VolumeSnapshotContent %s: %w", *st.BoundVolumeSnapshotContentName, err)
		}
		vs, content = got, vsc
		return true, nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return nil, nil, fmt.Errorf("VolumeSnapshot %s/%s was not ready to use within %s: %s", ns, name, timeout, why)
	}
	if err != nil {
		return nil, nil, err
	}
	return vs, content, nil
}

// makeClaim makes the claim of the moved snapshot (its storage class and
// volume mode the source claim's).
func (c *Controller) makeClaim(ctx context.Context, du *velerov2alpha1.DataUpload, size *resource.Quantity) (*corev1.PersistentVolumeClaim, error) {
	claims := c.cfg.Kube.CoreV1().PersistentVolumeClaims(c.cfg.Namespace)
	if got, err := claims.Get(ctx, du.Name, metav1.GetOptions{}); err == nil {
		return got, nil
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading PVC %s/%s: %w", c.cfg.Namespace, du.Name, err)
	}
	mode := corev1.PersistentVolumeFilesystem
	if src, err := c.cfg.Kube.CoreV1().PersistentVolumeClaims(du.Spec.SourceNamespace).Get(ctx, du.Spec.SourcePVC, metav1.GetOptions{}); err == nil && src.Spec.VolumeMode != nil {
		mode = *src.Spec.VolumeMode
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: du.Name, Namespace: c.cfg.Namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(du.Spec.CSISnapshot.StorageClass),
			VolumeMode:       &mode,
			DataSource:       &corev1.TypedLocalObjectReference{APIGroup: ptr.To(snapshotv1.GroupName), Kind: "VolumeSnapshot", Name: du.Name},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *size}},
		},
	}
	created, err := claims.Create(ctx, pvc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return claims.Get(ctx, du.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("creating PVC %s/%s from the snapshot: %w", c.cfg.Namespace, du.Name, err)
	}
	return created, nil
}

// waitBound waits until the claim is Bound and returns its CSI volume.
func (c *Controller) waitBound(ctx context.Context, pvc *corev1.PersistentVolumeClaim, timeout time.Duration) (*corev1.PersistentVolume, error) {
	var pv *corev1.PersistentVolume
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		got, err := c.cfg.Kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("reading PVC %s/%s: %w", pvc.Namespace, pvc.Name, err)
		}
		if got.Status.Phase != corev1.ClaimBound || got.Spec.VolumeName == "" {
			return false, nil
		}
		v, err := c.cfg.Kube.CoreV1().PersistentVolumes().Get(ctx, got.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("reading PV %s: %w", got.Spec.VolumeName, err)
		}
		pv = v
		return true, nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return nil, fmt.Errorf("PVC %s/%s made from the snapshot was not Bound within %s", pvc.Namespace, pvc.Name, timeout)
	}
	if err != nil {
		return nil, err
	}
	if pv.Spec.CSI == nil {
		return nil, fmt.Errorf("PV %s of PVC %s/%s is not a CSI volume", pv.Name, pvc.Namespace, pvc.Name)
	}
	return pv, nil
}

// publishDirOf is where the volume of a DataUpload's or DataDownload's
// claim is published.
func (c *Controller) publishDirOf(uid types.UID) string {
	// The UID is the server's: no user string becomes a path.
	return filepath.Join(c.cfg.WorkDir, string(uid))
}

// publishDir is where a DataUpload's volume is published.
func (c *Controller) publishDir(du *velerov2alpha1.DataUpload) string { return c.publishDirOf(du.UID) }

// unpublish takes the DataUpload's volume down from its directory, if it
// is published there.
func (c *Controller) unpublish(ctx context.Context, du *velerov2alpha1.DataUpload) error {
	return c.unpublishClaim(ctx, du.Name, du.UID)
}

// unpublishClaim takes the volume of the admin namespace's claim down from
// the directory of the object uid, if it is published there (through the
// node service of the volume's driver).
func (c *Controller) unpublishClaim(ctx context.Context, claim string, uid types.UID) error {
	pvc, err := c.cfg.Kube.CoreV1().PersistentVolumeClaims(c.cfg.Namespace).Get(ctx, claim, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && pvc.Spec.VolumeName == "") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading PVC %s/%s: %w", c.cfg.Namespace, claim, err)
	}
	pv, err := c.cfg.Kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading PV %s: %w", pvc.Spec.VolumeName, err)
	}
	if pv.Spec.CSI == nil || c.cfg.Drivers[pv.Spec.CSI.Driver] == nil {
		return nil
	}
	vol := csivolume.Volume{Handle: pv.Spec.CSI.VolumeHandle, Block: pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock}
	return c.cfg.Drivers[pv.Spec.CSI.Driver].Unpublish(ctx, vol, c.publishDirOf(uid))
}

// jsonMerge encodes a merge patch.
func jsonMerge(patch map[string]any) ([]byte, error) {
	data, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("encoding a patch: %w", err)
	}
	return data, nil
}

// cleanUp removes what a DataUpload's run made: the publication, the
// claim, and the moved snapshot with its storage snapshot (deletion
// policy Delete). The claim is deleted only once its volume is
// unpublished; the snapshot goes whatever happens to the claim. What fails
// is tried again, for cleanUpTimeout.
func (c *Controller) cleanUp(ctx context.Context, du *velerov2alpha1.DataUpload, keepBase bool) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, cleanUpTimeout, true, func(ctx context.Context) (bool, error) {
		last = c.cleanUpOnce(ctx, du, keepBase)
		return last == nil, nil
	})
	if err != nil && last != nil {
		return last
	}
	return err
}

func (c *Controller) cleanUpOnce(ctx context.Context, du *velerov2alpha1.DataUpload, keepBase bool) error {
	var errs []error
	if err := c.unpublish(ctx, du); err != nil {
		errs = append(errs, err)
	} else if err := c.cfg.Kube.CoreV1().PersistentVolumeClaims(c.cfg.Namespace).Delete(ctx, du.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting PVC %s/%s: %w", c.cfg.Namespace, du.Name, err))
	}
	snaps := c.cfg.Snapshots.SnapshotV1()
	if keepBase {
		if err := c.keepBase(ctx, du, kopiarepo.SourcePath(du.Spec.SourceNamespace, du.Spec.SourcePVC)); err != nil {
			errs = append(errs, err)
		}
	} else if err := c.setDeletionPolicy(ctx, du.Name, snapshotv1.VolumeSnapshotContentDelete); err != nil {
		errs = append(errs, err)
	} else {
		if err := snaps.VolumeSnapshots(c.cfg.Namespace).Delete(ctx, du.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting VolumeSnapshot %s/%s: %w", c.cfg.Namespace, du.Name, err))
		}
		// A content whose VolumeSnapshot was never made is deleted itself.
		if err := snaps.VolumeSnapshotContents().Delete(ctx, du.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting VolumeSnapshotContent %s: %w", du.Name, err))
		}
	}
	return errors.Join(errs...)
}

// setDeletionPolicy sets a content's deletion policy (a gone content has
// none to set).
func (c *Controller) setDeletionPolicy(ctx context.Context, content string, policy snapshotv1.DeletionPolicy) error {
	patch := fmt.Appendf(nil, `{"spec":{"deletionPolicy":%q}}`, policy)
	_, err := c.cfg.Snapshots.SnapshotV1().VolumeSnapshotContents().Patch(ctx, content, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("setting the deletion policy of VolumeSnapshotContent %s to %s: %w", content, policy, err)
	}
	return nil
}
