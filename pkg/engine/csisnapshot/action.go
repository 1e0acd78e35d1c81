package csisnapshot

import (
	"context"
	"fmt"
	"strings"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapshotclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/backup"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/engine/resourcepolicy"
)

// Action is the backup engine's action for claims (backup.ItemAction,
// backup.OperationFinisher), on the source cluster.
type Action struct {
	Kube      kubernetes.Interface
	Snapshots snapshotclient.Interface
	Clock     clock.Clock
	// Recorder, when set, records a Warning Event on the backup for each
	// snapshot that failed.
	Recorder record.EventRecorder
}

// FailedReason is the reason of the Event of a failed snapshot.
const FailedReason = "CSISnapshotFailed"

var (
	_ backup.OperationFinisher = Action{}
	_ backup.ResourceMaker     = Action{}
	_ backup.OperationFinder   = Action{}
)

// Resources of the items the action adds.
var (
	volumeSnapshotsResource = items.Resource{GVR: schema.GroupVersionResource{Group: SnapshotGroup, Version: "v1", Resource: VolumeSnapshots},
		Kind: "VolumeSnapshot", Namespaced: true}
	volumeSnapshotContentsResource = items.Resource{GVR: schema.GroupVersionResource{Group: SnapshotGroup, Version: "v1", Resource: VolumeSnapshotContents},
		Kind: "VolumeSnapshotContent"}
	volumeSnapshotClassesResource = items.Resource{GVR: schema.GroupVersionResource{Group: SnapshotGroup, Version: "v1", Resource: VolumeSnapshotClasses},
		Kind: "VolumeSnapshotClass"}
)

// Name implements backup.ItemAction.
func (Action) Name() string { return Name }

// AppliesTo implements backup.ItemAction: claims.
func (Action) AppliesTo(groupResource string) bool { return groupResource == "persistentvolumeclaims" }

// MadeResources implements backup.ResourceMaker: the VolumeSnapshots and
// contents in the cluster are not collected as items (a backup's own
// would be, half made); each backup adds those it took (FinalItems), as
// Velero's backups do.
func (Action) MadeResources() []string {
	return []string{volumeSnapshotsResource.GroupResource(), volumeSnapshotContentsResource.GroupResource()}
}

// Start implements backup.ItemAction: a VolumeSnapshot of the claim,
// unless the backup's volume policies (resourcepolicy.FromContext) or its
// snapshotVolumes say otherwise, or its data is moved (MoveAction takes
// those).
func (a Action) Start(ctx context.Context, b *velerov1.Backup, item *unstructured.Unstructured) (backup.Started, error) {
	if MovesData(b) {
		return backup.Started{}, nil
	}
	taken, err := a.snapshotClaim(ctx, b, item)
	if err != nil || taken.snapshot == nil {
		return taken.skipped, err
	}
	started := snapshotOperation(taken.snapshot.Namespace, taken.snapshot.Name, a.Clock.Now())
	started.Modified = true
	return started, nil
}

// MovesData reports whether a backup moves its snapshots' data into its
// storage location (spec.snapshotMoveData).
func MovesData(b *velerov1.Backup) bool {
	return b.Spec.SnapshotMoveData != nil && *b.Spec.SnapshotMoveData
}

// taken is a claim's snapshot as snapshotClaim took it: the snapshot, the
// claim and its volume, and the class; or why none was taken.
type taken struct {
	snapshot *snapshotv1.VolumeSnapshot
	pvc      *corev1.PersistentVolumeClaim
	pv       *corev1.PersistentVolume
	class    string
	skipped  backup.Started
}

// snapshotClaim takes a VolumeSnapshot of a backed-up claim, as Velero's
// CSI action does, and marks the claim in the tarball with it; or says
// why it takes none.
func (a Action) snapshotClaim(ctx context.Context, b *velerov1.Backup, item *unstructured.Unstructured) (taken, error) {
	skip := func(why string) (taken, error) { return taken{skipped: backup.Started{Skipped: why}}, nil }
	ns, name := item.GetNamespace(), item.GetName()
	var pvc corev1.PersistentVolumeClaim
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &pvc); err != nil {
		return taken{}, fmt.Errorf("decoding PVC %s/%s: %w", ns, name, err)
	}
	var pv *corev1.PersistentVolume
	if pvc.Spec.VolumeName != "" {
		var err error
		if pv, err = a.Kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{}); err != nil {
			return taken{}, fmt.Errorf("failed to get PV %s for PVC %s/%s: %w", pvc.Spec.VolumeName, ns, name, err)
		}
	}
	policy := resourcepolicy.FromContext(ctx).Match(resourcepolicy.Volume{PV: pv, PVC: &pvc})
	switch {
	case policy != nil && policy.Type == resourcepolicy.Skip:
		return skip(fmt.Sprintf("no snapshot of PVC %s/%s: a volume policy says skip", ns, name))
	case policy != nil && policy.Type == resourcepolicy.FSBackup:
		return taken{skipped: backup.Started{Warning: fmt.Sprintf("no snapshot of PVC %s/%s: a volume policy says fs-backup, which this server does not do; its data is not in the backup", ns, name)}}, nil
	case policy == nil && b.Spec.SnapshotVolumes != nil && !*b.Spec.SnapshotVolumes:
		return skip(fmt.Sprintf("no snapshot of PVC %s/%s: the backup's snapshotVolumes is false", ns, name))
	}
	// Velero fails the claim here; a claim bound to no volume has no data
	// to lose, so it is taken as it is, said in the log.
	if pv == nil || pvc.Status.Phase != corev1.ClaimBound {
		return skip(fmt.Sprintf("no snapshot of PVC %s/%s: it is in phase %v and is not bound to a volume", ns, name, pvc.Status.Phase))
	}
	// The claim may have gone since it was listed.
	if _, err := a.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return skip(fmt.Sprintf("no snapshot of PVC %s/%s: it was deleted during the backup", ns, name))
	} else if err != nil {
		return taken{}, fmt.Errorf("reading PVC %s/%s: %w", ns, name, err)
	}
	if pv.Spec.CSI == nil {
		return skip(fmt.Sprintf("Skipping PVC %s/%s, associated PV %s is not a CSI volume", ns, name, pv.Name))
	}
	// The driver is the volume's (Velero reads it from the claim's
	// StorageClass, which names the same driver, and fails a claim without
	// one: a statically provisioned CSI volume is snapshotted here too).
	class, err := a.snapshotClass(ctx, b, &pvc, pv.Spec.CSI.Driver)
	if err != nil {
		return taken{}, fmt.Errorf("failed to get VolumeSnapshotClass for PVC %s/%s: %w", ns, name, err)
	}

	labels := map[string]string{}
	for k, v := range pvc.Labels {
		labels[k] = v
	}
	labels[velerov1.BackupNameLabel] = velerov1.LabelValue(b.Name)
	labels[velerov1.BackupUIDLabel] = string(b.UID)
	vs := &snapshotv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{GenerateName: snapshotNamePrefix + name + "-", Namespace: ns, Labels: labels},
		Spec: snapshotv1.VolumeSnapshotSpec{
			Source:                  snapshotv1.VolumeSnapshotSource{PersistentVolumeClaimName: &name},
			VolumeSnapshotClassName: &class,
		},
	}
	created, err := a.Snapshots.SnapshotV1().VolumeSnapshots(ns).Create(ctx, vs, metav1.CreateOptions{})
	if err != nil {
		return taken{}, fmt.Errorf("error creating volume snapshot of PVC %s/%s: %w", ns, name, err)
	}

	// The claim in the tarball names its snapshot: a restore makes it
	// from that one.
	setLabel(item, VolumeSnapshotLabel, created.Name)
	setLabel(item, velerov1.BackupNameLabel, velerov1.LabelValue(b.Name))
	setAnnotation(item, VolumeSnapshotLabel, created.Name)
	return taken{snapshot: created, pvc: &pvc, pv: pv, class: class}, nil
}

// snapshotOperation is the operation of a VolumeSnapshot started at a
// time: its ID, and the snapshot as what it is for and what it leaves.
func snapshotOperation(ns, name string, at time.Time) backup.Started {
	snapshot := backup.ResourceIdentifier{Group: SnapshotGroup, Resource: VolumeSnapshots, Namespace: ns, Name: name}
	return backup.Started{
		OperationID:        operationID(ns, name, at),
		Resource:           &snapshot,
		PostOperationItems: []backup.ResourceIdentifier{snapshot},
	}
}

// operationID is Velero's ID of a snapshot's operation.
func operationID(ns, name string, started time.Time) string {
	return ns + "/" + name + "/" + started.UTC().Format(time.RFC3339)
}

// parseOperationID splits an operation ID.
func parseOperationID(id string) (ns, name string, started time.Time, err error) {
	parts := strings.Split(id, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return "", "", time.Time{}, fmt.Errorf("operation ID %q is not <namespace>/<volume snapshot>/<time>", id)
	}
	started, err = time.Parse(time.RFC3339, parts[2])
	if err != nil {
		return "", "", time.Time{}, fmt.Errorf("operation ID %q: %w", id, err)
	}
	return parts[0], parts[1], started, nil
}

func setLabel(item *unstructured.Unstructured, key, value string) {
	labels := item.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[key] = value
	item.SetLabels(labels)
}

func setAnnotation(item metav1.Object, key, value string) {
	annotations := item.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[key] = value
	item.SetAnnotations(annotations)
}
