package v1alpha1

import "github.com/backstop-io/backstop/pkg/apis/lifecycle"

// The lives of NonAdminBackups and NonAdminRestores, as the design document
// (nonadmin-backup-restore-status) gives them: a phase that only moves
// forward, New → BackingOff (the spec is refused) or Created (the Velero
// object exists), and Deleting from any of them. Registry, engines and
// tests use these tables and define none of their own; docs/lifecycle.md
// shows them.

// Engines, by their --disable-controllers names, as the tables name them.
const (
	EngineNonAdminBackup  = "nonadmin-backup"
	EngineNonAdminRestore = "nonadmin-restore"
	// EngineNonAdminPolicy writes DataProtectionApplications' status:
	// which one's spec.nonAdmin is the policy in effect.
	EngineNonAdminPolicy = "nonadmin-policy"
)

// nonAdminLifecycle is the table of a non-admin kind whose engine is by.
func nonAdminLifecycle(kind, object, by string) lifecycle.Table[NonAdminPhase] {
	return lifecycle.Table[NonAdminPhase]{
		Kind:     kind,
		Phases:   []NonAdminPhase{"", NonAdminPhaseNew, NonAdminPhaseBackingOff, NonAdminPhaseCreated, NonAdminPhaseDeleting},
		Terminal: []NonAdminPhase{NonAdminPhaseDeleting},
		Transitions: []lifecycle.Transition[NonAdminPhase]{
			{From: lifecycle.From[NonAdminPhase](""), To: NonAdminPhaseNew, By: by,
				When: "the engine takes the new object"},
			{From: lifecycle.From[NonAdminPhase]("", NonAdminPhaseNew), To: NonAdminPhaseBackingOff, By: by,
				When: "its spec is refused (condition Accepted False with the reason)"},
			{From: lifecycle.From[NonAdminPhase]("", NonAdminPhaseNew, NonAdminPhaseBackingOff), To: NonAdminPhaseCreated, By: by,
				When: "its spec is accepted and the Velero " + object + " exists"},
			{From: lifecycle.From[NonAdminPhase]("", NonAdminPhaseNew, NonAdminPhaseBackingOff, NonAdminPhaseCreated), To: NonAdminPhaseDeleting, By: by,
				When: "it is being deleted, with its Velero " + object},
		},
	}
}

// NonAdminBackupLifecycle is the life of a NonAdminBackup.
var NonAdminBackupLifecycle = nonAdminLifecycle("NonAdminBackup", "Backup", EngineNonAdminBackup)

// NonAdminRestoreLifecycle is the life of a NonAdminRestore.
var NonAdminRestoreLifecycle = nonAdminLifecycle("NonAdminRestore", "Restore", EngineNonAdminRestore)

// EngineNonAdminBSL is the engine of NonAdminBackupStorageLocations and
// their requests.
const EngineNonAdminBSL = "nonadmin-bsl"

// NonAdminBackupStorageLocationLifecycle is the life of a
// NonAdminBackupStorageLocation: Created once approved and its Velero
// location exists. An approval withdrawn later removes the location and is
// said in condition ClusterAdminApproved; the phase does not move back.
var NonAdminBackupStorageLocationLifecycle = nonAdminLifecycle("NonAdminBackupStorageLocation", "BackupStorageLocation", EngineNonAdminBSL)

// NonAdminBackupStorageLocationRequestLifecycle is the life of the admin's
// request for a NonAdminBackupStorageLocation: its phase follows the
// admin's spec.approvalDecision, which may change either way (an approval
// withdrawn revokes the location).
var NonAdminBackupStorageLocationRequestLifecycle = lifecycle.Table[NonAdminBSLRequestPhase]{
	Kind:   "NonAdminBackupStorageLocationRequest",
	Phases: []NonAdminBSLRequestPhase{"", NonAdminBSLRequestPhasePending, NonAdminBSLRequestPhaseApproved, NonAdminBSLRequestPhaseRejected},
	Transitions: []lifecycle.Transition[NonAdminBSLRequestPhase]{
		{From: lifecycle.From[NonAdminBSLRequestPhase]("", NonAdminBSLRequestPhaseApproved, NonAdminBSLRequestPhaseRejected), To: NonAdminBSLRequestPhasePending, By: EngineNonAdminBSL,
			When: "the decision is pending (or unset)"},
		{From: lifecycle.From[NonAdminBSLRequestPhase]("", NonAdminBSLRequestPhasePending, NonAdminBSLRequestPhaseRejected), To: NonAdminBSLRequestPhaseApproved, By: EngineNonAdminBSL,
			When: "the admin approves (or approval is not required)"},
		{From: lifecycle.From[NonAdminBSLRequestPhase]("", NonAdminBSLRequestPhasePending, NonAdminBSLRequestPhaseApproved), To: NonAdminBSLRequestPhaseRejected, By: EngineNonAdminBSL,
			When: "the admin rejects"},
	},
}

// EngineNonAdminDownload is the engine of NonAdminDownloadRequests.
const EngineNonAdminDownload = "nonadmin-download"

// NonAdminDownloadRequestLifecycle is the life of a NonAdminDownloadRequest:
// Created once its Velero DownloadRequest is processed (the link is in its
// status), BackingOff while what it names is not there yet. It is deleted
// when its link expires, as upstream does.
var NonAdminDownloadRequestLifecycle = nonAdminLifecycle("NonAdminDownloadRequest", "DownloadRequest", EngineNonAdminDownload)

// EngineNonAdminSchedule is the engine of NonAdminSchedules.
const EngineNonAdminSchedule = "nonadmin-schedule"

// NonAdminScheduleLifecycle is the life of a NonAdminSchedule: Created once
// its Velero Schedule exists. A spec refused later (a policy change) pauses
// that Schedule and is said in condition Accepted; the phase stays.
var NonAdminScheduleLifecycle = nonAdminLifecycle("NonAdminSchedule", "Schedule", EngineNonAdminSchedule)
