// Package vmoperation is the backup engine's async operation for VM disks.
// A Velero backup that takes a VirtualMachineBackupTracker annotated with
// the PVC its VM's disk backups go to (PVCAnnotation) creates a
// VirtualMachineBackup of that tracker (incremental against the tracker's
// last checkpoint, full without one) and waits for it
// (WaitingForPluginOperations) until its Complete or Failed condition is
// true. The VM backup engine runs the VirtualMachineBackup; cancelling the
// backup, or the operation timing out, cancels it through its cancel
// subresource.
package vmoperation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kvbackupv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/backup"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
)

// PVCAnnotation on a VirtualMachineBackupTracker names the PVC (push
// mode target) of the VM disk backups Velero backups run for it.
const PVCAnnotation = "backstop.io/vm-backup-pvc"

// Labels on the VirtualMachineBackups a backup starts.
const (
	BackupNameLabel = "velero.io/backup-name"
	BackupUIDLabel  = "velero.io/backup-uid"
)

// Name is the action's name in item operation records.
const Name = "backstop.io/vm-disks"

const trackerResource = "virtualmachinebackuptrackers." + kvbackupv1alpha1.GroupName

// Action starts and follows VirtualMachineBackups.
type Action struct {
	// Client is the server's own API, which serves VirtualMachineBackups.
	Client versioned.Interface
}

var _ backup.ItemAction = Action{}

// Name implements backup.ItemAction.
func (Action) Name() string { return Name }

// AppliesTo implements backup.ItemAction: trackers.
func (Action) AppliesTo(groupResource string) bool { return groupResource == trackerResource }

// objectName is the VirtualMachineBackup of a backup and tracker:
// "<backup>-<tracker>", shortened with a hash when too long for a name.
func objectName(backupName, tracker string) string {
	name := backupName + "-" + tracker
	if len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return strings.TrimRight(name[:240], "-.") + "-" + hex.EncodeToString(sum[:])[:12]
}

// Start implements backup.ItemAction.
func (a Action) Start(ctx context.Context, b *velerov1.Backup, item *unstructured.Unstructured) (string, error) {
	pvc := item.GetAnnotations()[PVCAnnotation]
	if pvc == "" {
		return "", nil
	}
	ns := item.GetNamespace()
	mode := kvbackupv1alpha1.PushMode
	group := kvbackupv1alpha1.GroupName
	vmb := &kvbackupv1alpha1.VirtualMachineBackup{
		ObjectMeta: metav1.ObjectMeta{
			Name: objectName(b.Name, item.GetName()), Namespace: ns,
			Labels: map[string]string{BackupNameLabel: labelValue(b.Name), BackupUIDLabel: string(b.UID)},
		},
		Spec: kvbackupv1alpha1.VirtualMachineBackupSpec{
			Source:  corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VirtualMachineBackupTracker", Name: item.GetName()},
			Mode:    &mode,
			PvcName: &pvc,
		},
	}
	client := a.Client.BackupV1alpha1().VirtualMachineBackups(ns)
	created, err := client.Create(ctx, vmb, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		existing, getErr := client.Get(ctx, vmb.Name, metav1.GetOptions{})
		if getErr != nil {
			return "", fmt.Errorf("VirtualMachineBackup %s/%s exists: %w", ns, vmb.Name, getErr)
		}
		if existing.Labels[BackupUIDLabel] != string(b.UID) {
			return "", fmt.Errorf("VirtualMachineBackup %s/%s exists and belongs to no run of this backup", ns, vmb.Name)
		}
		created, err = existing, nil
	}
	if err != nil {
		return "", fmt.Errorf("creating VirtualMachineBackup %s/%s: %w", ns, vmb.Name, err)
	}
	return ns + "/" + created.Name, nil
}

func labelValue(s string) string {
	if len(s) <= 63 {
		return s
	}
	return s[:63]
}

func split(operationID string) (string, string, error) {
	ns, name, ok := strings.Cut(operationID, "/")
	if !ok || ns == "" || name == "" {
		return "", "", fmt.Errorf("operation ID %q is not <namespace>/<name>", operationID)
	}
	return ns, name, nil
}

// Progress implements backup.ItemAction from the VirtualMachineBackup's
// conditions and byte progress.
func (a Action) Progress(ctx context.Context, b *velerov1.Backup, operationID string) (backup.OperationProgress, error) {
	ns, name, err := split(operationID)
	if err != nil {
		return backup.OperationProgress{}, err
	}
	vmb, err := a.Client.BackupV1alpha1().VirtualMachineBackups(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return backup.OperationProgress{Completed: true, Err: fmt.Sprintf("VirtualMachineBackup %s was deleted before it completed", operationID)}, nil
	}
	if err != nil {
		return backup.OperationProgress{}, err
	}
	p := backup.OperationProgress{OperationUnits: "Bytes"}
	if vmb.Status != nil {
		if pr := vmb.Status.Progress; pr != nil {
			p.NCompleted, p.NTotal = pr.BytesDone, pr.TotalBytes
		}
		conds := vmb.Status.Conditions
		if c := meta.FindStatusCondition(conds, string(kvbackupv1alpha1.ConditionFailed)); c != nil && c.Status == metav1.ConditionTrue {
			p.Completed, p.Err = true, fmt.Sprintf("VirtualMachineBackup %s failed: %s: %s", operationID, c.Reason, c.Message)
			return p, nil
		}
		if c := meta.FindStatusCondition(conds, string(kvbackupv1alpha1.ConditionComplete)); c != nil && c.Status == metav1.ConditionTrue {
			p.Completed, p.Description = true, c.Message
			return p, nil
		}
		if c := meta.FindStatusCondition(conds, string(kvbackupv1alpha1.ConditionProgressing)); c != nil {
			p.Description = c.Reason + ": " + c.Message
		}
	}
	return p, nil
}

// Cancel implements backup.ItemAction through the VirtualMachineBackup's
// cancel subresource (the VM backup engine aborts it); one that has ended
// or is gone needs nothing.
func (a Action) Cancel(ctx context.Context, b *velerov1.Backup, operationID string) error {
	ns, name, err := split(operationID)
	if err != nil {
		return err
	}
	err = a.Client.BackupV1alpha1().RESTClient().Post().Namespace(ns).Resource("virtualmachinebackups").Name(name).SubResource("cancel").Do(ctx).Error()
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("cancelling VirtualMachineBackup %s: %w", operationID, err)
	}
	return nil
}
