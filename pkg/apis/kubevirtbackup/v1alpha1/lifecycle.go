package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/backstop-io/backstop/pkg/apis/lifecycle"
)

// The lives of VirtualMachineBackups and VirtualMachineBackupTrackers: their
// words (states, condition reasons, annotations) and transition tables.
// Registry, engines and tests use these and define none of their own.

// Engines, by their --disable-controllers names, as the tables name them.
const (
	EngineVMBackup = "vmbackup"
	EngineVMCBT    = "vmcbt"
)

// CancelAnnotation records that cancellation of a VirtualMachineBackup was
// requested (its value is when); the VM backup engine aborts the backup.
// POST virtualmachinebackups/<name>/cancel sets it. It cannot be added
// once the backup has ended (409), nor removed or changed (422).
const CancelAnnotation = "backstop.io/cancel-requested"

// CleanupFinalizer holds a deleted VirtualMachineBackup until the VM
// backup engine has aborted its libvirt job and removed its partial output
// and new checkpoint (nothing to do for one that has ended: its output is
// the user's). The server adds it on create.
const CleanupFinalizer = "backstop.io/vm-backup-cleanup"

// Condition reasons Backstop adds to the upstream ones.
const (
	// Progressing false: the backup waits.
	ReasonWaitingForVolume      = "WaitingForVolume"
	ReasonWaitingForOtherBackup = "WaitingForOtherBackup"
	ReasonWaitingForRestore     = "WaitingForRestore"
	// Failed.
	ReasonLibvirtUnavailable = "LibvirtUnavailable"
	ReasonSourceNotFound     = "SourceNotFound"
	ReasonInsufficientSpace  = "InsufficientSpace"
	ReasonAborted            = "Aborted"
	ReasonServerRestarted    = "ServerRestarted"
	// status.changedBlockTracking of a tracker (LibvirtUnavailable too).
	ReasonDomainNotFound = "DomainNotFound"
	ReasonEnableFailed   = "EnableFailed"
	ReasonDisableFailed  = "DisableFailed"
)

// BackupState is the state of a VirtualMachineBackup, which upstream
// expresses as conditions only: the state is read off them (StateOf).
type BackupState string

const (
	// BackupPending: no condition yet; nothing has looked at the backup.
	BackupPending BackupState = "Pending"
	// BackupWaiting: Progressing false; the reason says what it waits for.
	BackupWaiting BackupState = "Waiting"
	// BackupRunning: Progressing true; the libvirt job runs.
	BackupRunning BackupState = "Running"
	// BackupComplete: Complete true.
	BackupComplete BackupState = "Complete"
	// BackupFailed: Failed true.
	BackupFailed BackupState = "Failed"
)

// StateOf reads a VirtualMachineBackup's state off its conditions.
func StateOf(conds []metav1.Condition) BackupState {
	switch {
	case meta.IsStatusConditionTrue(conds, string(ConditionFailed)):
		return BackupFailed
	case meta.IsStatusConditionTrue(conds, string(ConditionComplete)):
		return BackupComplete
	}
	p := meta.FindStatusCondition(conds, string(ConditionProgressing))
	switch {
	case p == nil:
		return BackupPending
	case p.Status == metav1.ConditionTrue:
		return BackupRunning
	}
	return BackupWaiting
}

// Terminal reports whether a VirtualMachineBackup in state s has ended: it
// cannot be cancelled and its conditions do not change again.
func (s BackupState) Terminal() bool { return VirtualMachineBackupLifecycle.IsTerminal(s) }

// State is the backup's state (Pending without a status).
func (b *VirtualMachineBackup) State() BackupState {
	if b.Status == nil {
		return BackupPending
	}
	return StateOf(b.Status.Conditions)
}

// VirtualMachineBackupLifecycle is the life of a VirtualMachineBackup, its
// states read off its conditions.
var VirtualMachineBackupLifecycle = lifecycle.Table[BackupState]{
	Kind:     "VirtualMachineBackup",
	Phases:   []BackupState{BackupPending, BackupWaiting, BackupRunning, BackupComplete, BackupFailed},
	Terminal: []BackupState{BackupComplete, BackupFailed},
	Transitions: []lifecycle.Transition[BackupState]{
		{From: lifecycle.From(BackupPending), To: BackupWaiting, By: EngineVMBackup,
			When: "its volume directory does not exist yet, another backup of the VM runs, or a restore writes its disks"},
		{From: lifecycle.From(BackupPending, BackupWaiting), To: BackupRunning, By: EngineVMBackup,
			When: "the engine starts the libvirt job"},
		{From: lifecycle.From(BackupPending, BackupWaiting), To: BackupFailed, By: EngineVMBackup,
			When: "its source is missing, libvirt is unavailable, or it was cancelled before it started"},
		{From: lifecycle.From(BackupRunning), To: BackupComplete, By: EngineVMBackup,
			When: "the job ended, the manifest is written and the tracker moved"},
		{From: lifecycle.From(BackupRunning), To: BackupFailed, By: EngineVMBackup,
			When: "the job failed or was aborted (cancel, deletion), the VM stopped, space ran out, or the server stopped"},
	},
}

// ChangedBlockTrackingLifecycle is the life of a tracker's
// status.changedBlockTracking.state. The state follows the VM, which users
// and libvirt change at any time, so every state may follow every other;
// the vmcbt engine alone writes it.
var ChangedBlockTrackingLifecycle = lifecycle.Table[ChangedBlockTrackingState]{
	Kind: "VirtualMachineBackupTracker",
	Phases: []ChangedBlockTrackingState{"", ChangedBlockTrackingInitializing, ChangedBlockTrackingPendingRestart,
		ChangedBlockTrackingEnabled, ChangedBlockTrackingDisabled},
	Transitions: []lifecycle.Transition[ChangedBlockTrackingState]{
		{From: lifecycle.From[ChangedBlockTrackingState]("", ChangedBlockTrackingPendingRestart, ChangedBlockTrackingEnabled, ChangedBlockTrackingDisabled),
			To: ChangedBlockTrackingInitializing, By: EngineVMCBT, When: "a selected VM's raw disks get their overlays"},
		{From: lifecycle.From[ChangedBlockTrackingState]("", ChangedBlockTrackingInitializing, ChangedBlockTrackingEnabled, ChangedBlockTrackingDisabled),
			To: ChangedBlockTrackingPendingRestart, By: EngineVMCBT, When: "the running VM still has its old disks"},
		{From: lifecycle.From[ChangedBlockTrackingState]("", ChangedBlockTrackingInitializing, ChangedBlockTrackingPendingRestart, ChangedBlockTrackingDisabled),
			To: ChangedBlockTrackingEnabled, By: EngineVMCBT, When: "every disk keeps dirty bitmaps"},
		{From: lifecycle.From[ChangedBlockTrackingState]("", ChangedBlockTrackingInitializing, ChangedBlockTrackingPendingRestart, ChangedBlockTrackingEnabled),
			To: ChangedBlockTrackingDisabled, By: EngineVMCBT, When: "deselected, or enabling failed (the reason says why)"},
	},
}
