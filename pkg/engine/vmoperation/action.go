// Package vmoperation is the backup engine's async operation for VM disks:
// a Velero backup backs up the disks of the VMs it takes by creating a
// VirtualMachineBackup per VM and waiting for it
// (WaitingForPluginOperations) until its Complete or Failed condition is
// true. The VM backup engine runs the VirtualMachineBackup; cancelling the
// backup, or the operation timing out, cancels it through its cancel
// subresource.
//
// Which VMs: those of the namespaces the backup takes, found as libvirt
// domains "<ns>_<name>" (kubevirt.io VirtualMachines, filtered like API
// items: excludedResources: [virtualmachines] or a label selector leaves
// them out), and the VirtualMachines the source cluster serves, if any.
// A VM with a VirtualMachineBackupTracker annotated with PVCAnnotation is
// backed up through that tracker instead (the tracker is an item of the
// backup).
//
// Where: the PVC the backup's PVCAnnotation names, else DefaultPVC (its
// directory is created under the volume root).
//
// Full or incremental: backups of a series — a schedule's backups (label
// velero.io/schedule-name) or those annotated with SeriesAnnotation — share
// a tracker per VM ("<series>-<vm>", labelled SeriesLabel, created on
// first use), so each is incremental since the previous one (and the
// tracker selects the VM for changed block tracking); other backups are
// full, without a checkpoint. A series' chains are bounded: after
// backstop.io/vm-backup-full-every incrementals (the Backup's annotation,
// a Schedule's copied to its backups; default 7) the next one is full.
package vmoperation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	kvbackupv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/backup"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	"github.com/backstop-io/backstop/pkg/rootdir"
	"github.com/backstop-io/backstop/pkg/virt"
)

// PVCAnnotation names the PVC (push mode target) of VM disk backups: on a
// VirtualMachineBackupTracker, for the Velero backups that take it; on a
// Backup (or a Schedule, whose backups copy its annotations), for the VMs
// it discovers.
const PVCAnnotation = kvbackupv1alpha1.VMBackupPVCAnnotation

// DefaultPVC is the PVC of discovered VMs' disk backups when the backup
// names none.
const DefaultPVC = "vm-backups"

// SeriesAnnotation on a Backup names the series its VM disk backups are
// incremental within (a schedule's backups are the schedule's series).
const SeriesAnnotation = "backstop.io/vm-backup-series"

// SeriesLabel on a tracker the action created names its series.
const SeriesLabel = "backstop.io/vm-backup-series"

// Labels on the VirtualMachineBackups a backup starts: Velero's.
const (
	BackupNameLabel = velerov1.BackupNameLabel
	BackupUIDLabel  = velerov1.BackupUIDLabel
)

// Name is the action's name in item operation records.
const Name = "backstop.io/vm-disks"

const (
	trackerResource = "virtualmachinebackuptrackers." + kvbackupv1alpha1.GroupName
	vmGroup         = "kubevirt.io"
)

// VirtualMachines is the resource of discovered VMs.
var VirtualMachines = items.Resource{
	GVR:  schema.GroupVersionResource{Group: vmGroup, Version: "v1", Resource: "virtualmachines"},
	Kind: "VirtualMachine", Singular: "virtualmachine", ShortNames: []string{"vm", "vms"}, Namespaced: true,
}

// Action starts and follows VirtualMachineBackups.
type Action struct {
	// Client is the server's own API, which serves VirtualMachineBackups.
	Client versioned.Interface
	// Virt returns the libvirt connection VMs are discovered on (nil: no
	// discovery).
	Virt func() (virt.Hypervisor, error)
	// VolumeRoot is where DefaultPVC directories are created.
	VolumeRoot string
}

var (
	_ backup.ItemAction      = Action{}
	_ backup.ItemDiscoverer  = Action{}
	_ backup.OperationFinder = Action{}
)

// Name implements backup.ItemAction.
func (Action) Name() string { return Name }

// AppliesTo implements backup.ItemAction: trackers and VMs.
func (Action) AppliesTo(groupResource string) bool {
	return groupResource == trackerResource || groupResource == VirtualMachines.GroupResource()
}

// DiscoveredResource implements backup.ItemDiscoverer.
func (Action) DiscoveredResource() items.Resource { return VirtualMachines }

// Discover implements backup.ItemDiscoverer: the libvirt domains named
// "<ns>_<name>" of the namespaces the backup takes.
func (a Action) Discover(ctx context.Context, b *velerov1.Backup, includesNamespace func(string) bool) ([]*unstructured.Unstructured, error) {
	if a.Virt == nil {
		return nil, nil
	}
	conn, err := a.Virt()
	if err != nil {
		// No daemon to reach: no domains here. A VirtualMachineBackup or a
		// tracker that needs one fails with its own reason.
		return nil, fmt.Errorf("%w: %v", backup.ErrNoSource, err)
	}
	names, err := conn.DomainNames()
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, domain := range names {
		ns, name, ok := strings.Cut(domain, "_")
		if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 || !includesNamespace(ns) {
			continue
		}
		vm := &unstructured.Unstructured{}
		vm.SetAPIVersion(VirtualMachines.GVR.GroupVersion().String())
		vm.SetKind(VirtualMachines.Kind)
		vm.SetNamespace(ns)
		vm.SetName(name)
		out = append(out, vm)
	}
	return out, nil
}

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
func (a Action) Start(ctx context.Context, b *velerov1.Backup, item *unstructured.Unstructured) (backup.Started, error) {
	id, err := a.start(ctx, b, item)
	return backup.Started{OperationID: id}, err
}

// start returns the ID of the VM's operation, "" when it needs none.
func (a Action) start(ctx context.Context, b *velerov1.Backup, item *unstructured.Unstructured) (string, error) {
	ns := item.GetNamespace()
	group := kvbackupv1alpha1.GroupName
	if item.GroupVersionKind().Group == vmGroup {
		return a.startVM(ctx, b, ns, item.GetName())
	}
	pvc := item.GetAnnotations()[PVCAnnotation]
	if pvc == "" {
		return "", nil
	}
	return a.create(ctx, b, ns, objectName(b.Name, item.GetName()), pvc,
		corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VirtualMachineBackupTracker", Name: item.GetName()})
}

// startVM backs up a VM the backup takes: through the series' tracker, or
// full; not at all when an annotated tracker of the VM does it.
func (a Action) startVM(ctx context.Context, b *velerov1.Backup, ns, vm string) (string, error) {
	trackers, err := a.Client.BackupV1alpha1().VirtualMachineBackupTrackers(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("listing the trackers of namespace %s: %w", ns, err)
	}
	for _, t := range trackers.Items {
		if t.Spec.Source.Name == vm && t.Annotations[PVCAnnotation] != "" {
			return "", nil
		}
	}
	pvc := b.Annotations[PVCAnnotation]
	if pvc == "" {
		pvc = DefaultPVC
		if a.VolumeRoot != "" {
			if _, err := rootdir.Dir(a.VolumeRoot).MkdirAll(0o755, ns, pvc); err != nil {
				return "", fmt.Errorf("creating the volume of VM disk backups: %w", err)
			}
		}
	}
	vmGroupName := vmGroup
	source := corev1.TypedLocalObjectReference{APIGroup: &vmGroupName, Kind: "VirtualMachine", Name: vm}
	if series := seriesOf(b); series != "" {
		tracker, err := a.ensureTracker(ctx, ns, series, b.Labels[velerov1.ScheduleNameLabel], vm)
		if err != nil {
			return "", err
		}
		group := kvbackupv1alpha1.GroupName
		source = corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VirtualMachineBackupTracker", Name: tracker}
	}
	return a.create(ctx, b, ns, objectName(b.Name, "vm-"+vm), pvc, source)
}

// seriesOf is the series of a backup: its annotation, else its schedule.
func seriesOf(b *velerov1.Backup) string {
	if s := b.Annotations[SeriesAnnotation]; s != "" {
		return s
	}
	return b.Labels[velerov1.ScheduleNameLabel]
}

// ensureTracker returns the name of the series' tracker of a VM, creating
// it the first time; a schedule's series' tracker is labelled with the
// schedule (velero.io/schedule-name), and goes once the schedule and its
// last backup are gone (package gc).
func (a Action) ensureTracker(ctx context.Context, ns, series, schedule, vm string) (string, error) {
	name := objectName(series, vm)
	client := a.Client.BackupV1alpha1().VirtualMachineBackupTrackers(ns)
	vmGroupName := vmGroup
	trackerLabels := map[string]string{SeriesLabel: velerov1.LabelValue(series)}
	if schedule != "" && schedule == series {
		trackerLabels[velerov1.ScheduleNameLabel] = velerov1.LabelValue(schedule)
	}
	_, err := client.Create(ctx, &kvbackupv1alpha1.VirtualMachineBackupTracker{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: trackerLabels},
		Spec: kvbackupv1alpha1.VirtualMachineBackupTrackerSpec{
			Source: corev1.TypedLocalObjectReference{APIGroup: &vmGroupName, Kind: "VirtualMachine", Name: vm},
		},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		existing, getErr := client.Get(ctx, name, metav1.GetOptions{})
		if getErr != nil {
			return "", fmt.Errorf("tracker %s/%s exists: %w", ns, name, getErr)
		}
		if existing.Labels[SeriesLabel] != velerov1.LabelValue(series) || existing.Spec.Source.Name != vm {
			return "", fmt.Errorf("tracker %s/%s exists and is not series %s's tracker of VirtualMachine %s (label %s=%q, VirtualMachine %s)",
				ns, name, series, vm, SeriesLabel, existing.Labels[SeriesLabel], existing.Spec.Source.Name)
		}
		return name, nil
	}
	if err != nil {
		return "", fmt.Errorf("creating tracker %s/%s of series %s: %w", ns, name, series, err)
	}
	return name, nil
}

// create creates the backup's VirtualMachineBackup (or finds the one an
// earlier attempt of this backup run created) and returns its operation ID.
func (a Action) create(ctx context.Context, b *velerov1.Backup, ns, name, pvc string, source corev1.TypedLocalObjectReference) (string, error) {
	mode := kvbackupv1alpha1.PushMode
	vmb := &kvbackupv1alpha1.VirtualMachineBackup{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Labels: map[string]string{BackupNameLabel: velerov1.LabelValue(b.Name), BackupUIDLabel: string(b.UID)},
		},
		Spec: kvbackupv1alpha1.VirtualMachineBackupSpec{Source: source, Mode: &mode, PvcName: &pvc},
	}
	if source.Kind == "VirtualMachineBackupTracker" {
		// The chain is bounded: the backup's (or its schedule's) bound,
		// else the default.
		every, ok := b.Annotations[kvbackupv1alpha1.FullEveryAnnotation]
		if !ok {
			every = strconv.Itoa(kvbackupv1alpha1.DefaultFullEvery)
		}
		vmb.Annotations = map[string]string{kvbackupv1alpha1.FullEveryAnnotation: every}
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
	return operationID(ns, created.Name), nil
}

// operationID is the operation of VirtualMachineBackup ns/name.
func operationID(ns, name string) string { return ns + "/" + name }

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

// StartedOperations implements backup.OperationFinder: the
// VirtualMachineBackups labelled with the backup's UID, in every
// namespace.
func (a Action) StartedOperations(ctx context.Context, b *velerov1.Backup) ([]backup.Started, error) {
	list, err := a.Client.BackupV1alpha1().VirtualMachineBackups(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		LabelSelector: velerov1.BackupUIDSelector(b.UID),
	})
	if err != nil {
		return nil, fmt.Errorf("listing the VirtualMachineBackups of backup %s: %w", b.Name, err)
	}
	var out []backup.Started
	for _, vmb := range list.Items {
		out = append(out, backup.Started{
			OperationID: operationID(vmb.Namespace, vmb.Name),
			Resource:    &backup.ResourceIdentifier{Group: kvbackupv1alpha1.GroupName, Resource: "virtualmachinebackups", Namespace: vmb.Namespace, Name: vmb.Name},
		})
	}
	return out, nil
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
