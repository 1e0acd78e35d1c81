package datamover

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/datamover/kopiarepo"
)

// A block volume (volumeMode: Block) is uploaded by changed blocks when
// its driver serves the CSI SnapshotMetadata API: its storage snapshot is
// kept after the upload (the moved VolumeSnapshot, labelled as its claim's
// base), its kopia snapshot records the snapshot's handle, and the next
// upload of the claim asks the driver which blocks changed since that
// handle and reads only those (kopiarepo.UploadBlock). Once that upload
// has completed, the older base goes. Whatever is missing on the way (no
// API, no base, the driver's refusal) reads the whole volume, and the
// DataUpload's message says why.

// snapshotHandleTag is the tag of a block volume's kopia snapshot naming
// the CSI handle of the storage snapshot it was read from.
const snapshotHandleTag = "backstop.io/csi-snapshot-handle"

// changedBlockBaseLabel marks a moved VolumeSnapshot kept as the base of
// its claim's next upload; the value names the claim (claimKey).
const changedBlockBaseLabel = "backstop.io/changed-block-base"

// claimKey is the label value naming a claim's kopia source (a hash: the
// source path may be longer than a label value).
func claimKey(source string) string {
	sum := sha256.Sum256([]byte(source))
	return hex.EncodeToString(sum[:])[:40]
}

// blockUpload is how a block volume's upload went.
type blockUpload struct {
	result kopiarepo.BlockResult
	// keepBase: the storage snapshot is kept as the claim's next base.
	keepBase bool
	// message says how the volume was read.
	message string
}

// uploadBlock uploads the block volume published at device, by the blocks
// changed since its previous upload where it can.
func (c *Controller) uploadBlock(ctx context.Context, du *velerov2alpha1.DataUpload, rep *kopiarepo.Repository, device, source string,
	tags map[string]string, progress kopiarepo.Progress) (blockUpload, error) {
	driver := du.Spec.CSISnapshot.Driver
	handle, err := c.snapshotHandle(ctx, du.Name)
	if err != nil {
		return blockUpload{}, err
	}
	var out blockUpload
	u := kopiarepo.BlockUpload{Device: device, Source: source, Tags: tags}
	why := ""
	switch serves, err := c.servesChangedBlocks(ctx, driver); {
	case err != nil:
		why = err.Error()
	case !serves:
		why = fmt.Sprintf("CSI driver %s serves no SnapshotMetadata API", driver)
	default:
		out.keepBase = true
		u.Tags = map[string]string{snapshotHandleTag: handle}
		for k, v := range tags {
			u.Tags[k] = v
		}
		why, err = c.changesSincePrevious(ctx, du, rep, source, &u)
		if err != nil {
			return blockUpload{}, err
		}
	}
	out.result, err = rep.UploadBlock(ctx, u, progress)
	if err != nil {
		return out, err
	}
	if out.result.FullReadReason != "" {
		why = out.result.FullReadReason
	}
	switch {
	case why != "":
		out.message = "read the whole volume: " + why
	case u.Base != "":
		out.message = fmt.Sprintf("read %d of the volume's %d bytes: the blocks changed since kopia snapshot %s", out.result.HashedBytes, out.result.TotalBytes, u.Base)
	}
	return out, nil
}

// servesChangedBlocks reports whether driver serves the SnapshotMetadata
// API (and this data mover can ask it).
func (c *Controller) servesChangedBlocks(ctx context.Context, driver string) (bool, error) {
	if c.cfg.ChangedBlocks == nil {
		return false, errors.New("the data mover has no ServiceAccount to ask CSI drivers for changed blocks with (--data-mover-service-account)")
	}
	return c.cfg.ChangedBlocks.Serves(ctx, driver)
}

// changesSincePrevious sets u's base and changed ranges from the claim's
// newest kopia snapshot that records its storage snapshot (the one kept
// after its upload), or says why there are none (an error is the
// repository's: the upload cannot go on).
func (c *Controller) changesSincePrevious(ctx context.Context, du *velerov2alpha1.DataUpload, rep *kopiarepo.Repository, source string, u *kopiarepo.BlockUpload) (string, error) {
	previous, base, err := rep.LatestTagged(ctx, source, snapshotHandleTag)
	if err != nil {
		return "", err
	}
	if previous == "" {
		if earlier, _, err := rep.LatestTagged(ctx, source, kopiarepo.RequesterTag); err != nil {
			return "", err
		} else if earlier != "" {
			return "no earlier upload of the volume kept its storage snapshot to ask the changes since", nil
		}
		return "", nil
	}
	changed, err := c.cfg.ChangedBlocks.Delta(ctx, du.Spec.CSISnapshot.Driver, c.cfg.Namespace, du.Name, base)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return err.Error(), nil
	}
	u.Base, u.Changed = previous, changed
	return "", nil
}

// snapshotHandle is the CSI handle of the DataUpload's moved snapshot.
func (c *Controller) snapshotHandle(ctx context.Context, name string) (string, error) {
	vsc, err := c.cfg.Snapshots.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading VolumeSnapshotContent %s: %w", name, err)
	}
	if vsc.Spec.Source.SnapshotHandle == nil {
		return "", fmt.Errorf("VolumeSnapshotContent %s has no snapshot handle", name)
	}
	return *vsc.Spec.Source.SnapshotHandle, nil
}

// keepBase keeps the DataUpload's moved snapshot as its claim's base: its
// content's deletion policy Delete (deleting the VolumeSnapshot deletes
// the storage snapshot), the VolumeSnapshot labelled.
func (c *Controller) keepBase(ctx context.Context, du *velerov2alpha1.DataUpload, source string) error {
	if err := c.setDeletionPolicy(ctx, du.Name, snapshotv1.VolumeSnapshotContentDelete); err != nil {
		return err
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, changedBlockBaseLabel, claimKey(source))
	if _, err := c.cfg.Snapshots.SnapshotV1().VolumeSnapshots(c.cfg.Namespace).Patch(ctx, du.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("keeping VolumeSnapshot %s/%s as the base of the next upload: %w", c.cfg.Namespace, du.Name, err)
	}
	return nil
}

// dropOldBases deletes the claim's bases but the DataUpload's own (their
// storage snapshots go with them).
func (c *Controller) dropOldBases(ctx context.Context, du *velerov2alpha1.DataUpload, source string) error {
	snaps := c.cfg.Snapshots.SnapshotV1().VolumeSnapshots(c.cfg.Namespace)
	list, err := snaps.List(ctx, metav1.ListOptions{LabelSelector: labels.Set{changedBlockBaseLabel: claimKey(source)}.String()})
	if err != nil {
		return fmt.Errorf("listing the kept snapshots of %s: %w", source, err)
	}
	var errs []error
	for _, vs := range list.Items {
		if vs.Name == du.Name {
			continue
		}
		if err := snaps.Delete(ctx, vs.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting the former base VolumeSnapshot %s/%s: %w", vs.Namespace, vs.Name, err))
		}
	}
	return errors.Join(errs...)
}

// dropBase deletes the VolumeSnapshot kept as a base by the DataUpload of
// key, which is gone (its storage snapshot goes with it).
func (c *Controller) dropBase(ctx context.Context, key cache.ObjectName) error {
	if key.Namespace != c.cfg.Namespace {
		return nil
	}
	snaps := c.cfg.Snapshots.SnapshotV1().VolumeSnapshots(c.cfg.Namespace)
	vs, err := snaps.Get(ctx, key.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading VolumeSnapshot %s/%s: %w", c.cfg.Namespace, key.Name, err)
	}
	if _, kept := vs.Labels[changedBlockBaseLabel]; !kept {
		return nil
	}
	err = snaps.Delete(ctx, key.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &vs.UID}})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		// Gone already, or another VolumeSnapshot of that name now.
		return nil
	case err != nil:
		return fmt.Errorf("deleting VolumeSnapshot %s/%s, the base of a deleted DataUpload: %w", c.cfg.Namespace, key.Name, err)
	}
	klog.FromContext(ctx).Info("Deleted the storage snapshot kept as a base by a deleted DataUpload", "volumeSnapshot", klog.KObj(vs))
	return nil
}

// keptBases are the DataUploads of the kept bases: queued at start, those
// deleted while no replica of this engine ran are found gone by sync.
func (c *Controller) keptBases(ctx context.Context) []cache.ObjectName {
	list, err := c.cfg.Snapshots.SnapshotV1().VolumeSnapshots(c.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: changedBlockBaseLabel})
	if err != nil {
		// The next DataUpload deleted is still seen; these wait for the
		// next start.
		klog.FromContext(ctx).Error(err, "Listing the kept bases of changed blocks")
		return nil
	}
	keys := make([]cache.ObjectName, 0, len(list.Items))
	for _, vs := range list.Items {
		keys = append(keys, cache.ObjectName{Namespace: c.cfg.Namespace, Name: vs.Name})
	}
	return keys
}
