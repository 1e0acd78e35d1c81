package csisnapshot

import (
	"context"
	"fmt"
	"strings"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/backup"
)

// defaultCSISnapshotTimeout is Velero's, for a backup admitted without
// spec.csiSnapshotTimeout (admission defaults it).
const defaultCSISnapshotTimeout = 10 * time.Minute

// Progress implements backup.ItemAction: the snapshot is done when its
// content is ReadyToUse. An error the snapshot or its content reports is
// taken as passing (the CSI sidecars retry) until spec.csiSnapshotTimeout
// has passed since the operation started; then the operation fails with
// it.
func (a Action) Progress(ctx context.Context, b *velerov1.Backup, id string) (backup.OperationProgress, error) {
	ns, name, started, err := parseOperationID(id)
	if err != nil {
		return backup.OperationProgress{}, err
	}
	vs, err := a.Snapshots.SnapshotV1().VolumeSnapshots(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return backup.OperationProgress{Completed: true, Err: fmt.Sprintf("VolumeSnapshot %s/%s was deleted before it was ready to use", ns, name)}, nil
	}
	if err != nil {
		return backup.OperationProgress{}, fmt.Errorf("reading VolumeSnapshot %s/%s: %w", ns, name, err)
	}
	ready, why, err := a.readiness(ctx, vs)
	if err != nil {
		return backup.OperationProgress{}, err
	}
	if ready {
		return backup.OperationProgress{Completed: true, Description: "ready to use"}, nil
	}
	timeout := b.Spec.CSISnapshotTimeout.Duration
	if timeout <= 0 {
		timeout = defaultCSISnapshotTimeout
	}
	if waited := a.Clock.Since(started); waited > timeout {
		return backup.OperationProgress{Completed: true,
			Err: fmt.Sprintf("VolumeSnapshot %s/%s was not ready to use within csiSnapshotTimeout %s: %s", ns, name, timeout, why)}, nil
	}
	return backup.OperationProgress{Description: why}, nil
}

// readiness reports whether a snapshot's content is ready to use, and if
// not, what it waits for.
func (a Action) readiness(ctx context.Context, vs *snapshotv1.VolumeSnapshot) (bool, string, error) {
	st := vs.Status
	if st == nil || st.BoundVolumeSnapshotContentName == nil {
		if st != nil && st.Error != nil && st.Error.Message != nil {
			return false, "the snapshot controller reports: " + *st.Error.Message, nil
		}
		return false, "waiting for the snapshot controller to make its content", nil
	}
	content, err := a.Snapshots.SnapshotV1().VolumeSnapshotContents().Get(ctx, *st.BoundVolumeSnapshotContentName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, fmt.Sprintf("waiting for its content %s", *st.BoundVolumeSnapshotContentName), nil
	}
	if err != nil {
		return false, "", fmt.Errorf("reading VolumeSnapshotContent %s: %w", *st.BoundVolumeSnapshotContentName, err)
	}
	cs := content.Status
	switch {
	case cs != nil && cs.ReadyToUse != nil && *cs.ReadyToUse:
		return true, "", nil
	case cs != nil && cs.Error != nil && cs.Error.Message != nil:
		return false, "the CSI driver reports: " + *cs.Error.Message, nil
	case st.Error != nil && st.Error.Message != nil:
		return false, "the snapshot controller reports: " + *st.Error.Message, nil
	}
	return false, fmt.Sprintf("waiting for the CSI driver to cut the snapshot of content %s", content.Name), nil
}

// Cancel implements backup.ItemAction: the snapshot is deleted (the CSI
// specification cannot stop a snapshot being cut; deleting it is what
// cancelling one means).
func (a Action) Cancel(ctx context.Context, b *velerov1.Backup, id string) error {
	ns, name, _, err := parseOperationID(id)
	if err != nil {
		return err
	}
	return a.discard(ctx, b, ns, name)
}

// Discard implements backup.OperationFinisher: the snapshot is deleted,
// in the driver too.
func (a Action) Discard(ctx context.Context, b *velerov1.Backup, op *backup.BackupOperation) error {
	id := op.Spec.ResourceIdentifier
	return a.discard(ctx, b, id.Namespace, id.Name)
}

// StartedOperations implements backup.OperationFinder: the backup's
// VolumeSnapshots in every namespace, as Start makes them (labelled with
// its UID and name, named velero-<claim>-). A cluster that serves no
// snapshot API has none.
func (a Action) StartedOperations(ctx context.Context, b *velerov1.Backup) ([]backup.Started, error) {
	list, err := a.Snapshots.SnapshotV1().VolumeSnapshots(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		LabelSelector: velerov1.BackupUIDSelector(b.UID),
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the VolumeSnapshots of backup %s: %w", b.Name, err)
	}
	var out []backup.Started
	for _, vs := range list.Items {
		if !strings.HasPrefix(vs.Name, snapshotNamePrefix) || vs.Labels[velerov1.BackupNameLabel] != velerov1.LabelValue(b.Name) {
			continue
		}
		out = append(out, snapshotOperation(vs.Namespace, vs.Name, vs.CreationTimestamp.Time))
	}
	return out, nil
}

// discard deletes one of the backup's VolumeSnapshots with its content's
// deletion policy Delete, so that the driver deletes the snapshot. One
// the backup did not take (another UID) is left alone.
func (a Action) discard(ctx context.Context, b *velerov1.Backup, ns, name string) error {
	vs, err := a.own(ctx, b, ns, name)
	if err != nil || vs == nil {
		return err
	}
	// A VolumeSnapshot deleted before snapshot-controller has made its
	// content can still get one, whose snapshot csi-snapshotter then cuts
	// and, racing the deletion, may never delete (external-snapshotter
	// v8.7): the content is waited for first, a while.
	if st := vs.Status; st == nil || st.BoundVolumeSnapshotContentName == nil {
		if bound, err := a.waitBound(ctx, b, ns, name); err != nil {
			return err
		} else if bound != nil {
			vs = bound
		}
	}
	if st := vs.Status; st != nil && st.BoundVolumeSnapshotContentName != nil {
		if err := a.setDeletionPolicy(ctx, *st.BoundVolumeSnapshotContentName, snapshotv1.VolumeSnapshotContentDelete); err != nil {
			return err
		}
	}
	err = a.Snapshots.SnapshotV1().VolumeSnapshots(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &vs.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting VolumeSnapshot %s/%s: %w", ns, name, err)
	}
	return nil
}

// bindWait bounds how long discard waits for a VolumeSnapshot's content.
const bindWait = 15 * time.Second

// waitBound waits until snapshot-controller has bound a content to the
// VolumeSnapshot (at most bindWait), and returns it then (nil: not bound
// in time, or gone).
func (a Action) waitBound(ctx context.Context, b *velerov1.Backup, ns, name string) (*snapshotv1.VolumeSnapshot, error) {
	var bound *snapshotv1.VolumeSnapshot
	// Each read has the whole of ctx: a read cut by the wait's deadline
	// (the client's rate limiter refuses one that would not end before
	// it) is the wait's end, not an error.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, bindWait, true, func(context.Context) (bool, error) {
		vs, err := a.own(ctx, b, ns, name)
		if err != nil || vs == nil {
			return vs == nil, err
		}
		if st := vs.Status; st != nil && st.BoundVolumeSnapshotContentName != nil {
			bound = vs
			return true, nil
		}
		return false, nil
	})
	if err != nil && !wait.Interrupted(err) {
		return nil, err
	}
	return bound, nil
}

// own reads a VolumeSnapshot of the backup; nil when it is gone.
func (a Action) own(ctx context.Context, b *velerov1.Backup, ns, name string) (*snapshotv1.VolumeSnapshot, error) {
	vs, err := a.Snapshots.SnapshotV1().VolumeSnapshots(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading VolumeSnapshot %s/%s: %w", ns, name, err)
	}
	if vs.Labels[velerov1.BackupUIDLabel] != string(b.UID) {
		return nil, fmt.Errorf("VolumeSnapshot %s/%s was not taken by backup %s (UID %s)", ns, name, b.Name, b.UID)
	}
	return vs, nil
}

// setDeletionPolicy sets a content's deletion policy (a gone content has
// none to set).
func (a Action) setDeletionPolicy(ctx context.Context, content string, policy snapshotv1.DeletionPolicy) error {
	patch := fmt.Appendf(nil, `{"spec":{"deletionPolicy":%q}}`, policy)
	_, err := a.Snapshots.SnapshotV1().VolumeSnapshotContents().Patch(ctx, content, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("setting the deletion policy of VolumeSnapshotContent %s to %s: %w", content, policy, err)
	}
	return nil
}
