package v1

import (
	"fmt"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/backstop-io/backstop/pkg/apis/lifecycle"
)

// The lives of Backups, Restores, DeleteBackupRequests and Schedules: their
// words (phases grouped as pending, running, terminal; the reasons and
// annotations the server writes) and transition tables. Registry, engines
// and tests use these and define none of their own. docs/lifecycle.md shows
// the tables.

// Engines, by their --disable-controllers names, as the tables name them.
const (
	EngineBackupQueue    = "backup-queue"
	EngineBackup         = "backup"
	EngineBackupDeletion = "backup-deletion"
	EngineBackupSync     = "backup-sync"
	EngineRestore        = "restore"
	EngineSchedule       = "schedule"
	EngineVerification   = "backup-verification"
)

// Backup words the server writes.
const (
	// BackupCancelledReason is status.failureReason of a cancelled backup.
	BackupCancelledReason = "Backup cancelled by user"
	// BackupRestartedReason is status.failureReason of a backup the
	// server was running when it stopped.
	BackupRestartedReason = "the server stopped while the backup was in progress; its partial data was removed"
	// BackupInterruptedReason is status.failureReason of a backup whose
	// run stopped before its end was written (the storage failing for
	// long, or the server that ran it stopped while its successor's view
	// still showed the backup starting).
	BackupInterruptedReason = "the backup's run stopped before its end could be written; its partial data was removed"
	// BackupDeletedReason is status.failureReason of a backup deleted
	// while it ran.
	BackupDeletedReason = "the backup was deleted while it ran; its data was removed"

	// QueueSequenceAnnotation holds a backup's place in the queue: a
	// number the server assigns when the backup enters the Queued phase
	// (a hybrid clock: microseconds since the epoch, or one more than any
	// number seen, whichever is larger; equal numbers order by name).
	// Clients cannot set or change it.
	QueueSequenceAnnotation = "backstop.io/queue-sequence"
	// TenantOriginNamespaceAnnotation is the tenant namespace of a backup
	// made for a NonAdminBackup (OADP's oadp-nab-origin-namespace,
	// written by the server alone): the backup queue's owner of the
	// backup (QueueOwner).
	TenantOriginNamespaceAnnotation = "openshift.io/oadp-nab-origin-namespace"
	// TenantLocationNamespaceAnnotation is the tenant namespace of a
	// storage location made for a NonAdminBackupStorageLocation (OADP's
	// oadp-nabsl-origin-namespace, written by the server alone): engines
	// that wait on a location's endpoint share their workers by it.
	TenantLocationNamespaceAnnotation = "openshift.io/oadp-nabsl-origin-namespace"
	// SyncedFromLocationAnnotation marks a Backup the server created from
	// the velero-backup.json it found in a storage location (backup sync);
	// its value is the location. Only the server creates a Backup with a
	// status, and only such a one.
	SyncedFromLocationAnnotation = "backstop.io/synced-from-location"

	// KeepLastAnnotation on a Schedule keeps only its newest N Completed
	// backups (Velero's types have no field for it): once a newer one
	// completes, the older ones are deleted through DeleteBackupRequests,
	// as their TTL would. "0", or no annotation, keeps them until their
	// TTL.
	KeepLastAnnotation = "backstop.io/keep-last"
	// KeptLabel on a backup whose TTL has passed says why it is kept: a
	// schedule's newest Completed backup is not deleted while the runs
	// after it failed ("LastCompleted").
	KeptLabel = "backstop.io/kept"

	// BackupDataFinalizer holds a deleted Backup until its data is gone
	// from its storage location (with the restores made from it); the
	// backup-deletion engine removes it. The server adds it on create.
	BackupDataFinalizer = "backstop.io/backup-data"
	// RestoreDataFinalizer holds a deleted Restore until its log and
	// results are gone from the storage location; the restore engine
	// removes it. The server adds it on create.
	RestoreDataFinalizer = "backstop.io/restore-data"
)

// Object lock words: a storage location on an S3 bucket made with object
// lock says in its spec.config which mode locks its backups
// (ObjectLockModeConfigKey); each backup's objects are locked when it
// completes, until its expiration, and the Locked condition says so.
const (
	// ObjectLockModeConfigKey in a BackupStorageLocation's spec.config is
	// the S3 object lock mode of the backups written there:
	// ObjectLockGovernance or ObjectLockCompliance.
	ObjectLockModeConfigKey = "objectLockMode"
	// ObjectLockGovernance: nobody deletes or rewrites a locked object
	// before its date but a bucket user allowed to bypass governance
	// (s3:BypassGovernanceRetention), which Backstop never does.
	ObjectLockGovernance = "GOVERNANCE"
	// ObjectLockCompliance: nobody deletes or rewrites a locked object
	// before its date, the bucket's root user included.
	ObjectLockCompliance = "COMPLIANCE"

	// BackupConditionLocked is True on a backup whose objects are locked
	// until its status.expiration; its reason is the mode
	// (ObjectLockGovernance, ObjectLockCompliance).
	BackupConditionLocked = "Locked"
)

// ObjectLockMode is a location's object lock mode (ObjectLockModeConfigKey
// in its spec.config): "" when it has none.
func ObjectLockMode(config map[string]string) (string, error) {
	switch v := config[ObjectLockModeConfigKey]; v {
	case "", ObjectLockGovernance, ObjectLockCompliance:
		return v, nil
	default:
		return "", fmt.Errorf("%s or %s", ObjectLockGovernance, ObjectLockCompliance)
	}
}

// ObjectLockSkew is how long after a lock's date Backstop waits before it
// deletes what was locked: the store's clock may be behind the server's.
const ObjectLockSkew = 5 * time.Second

// LockedUntil is when a backup's objects may be deleted: when its Locked
// condition is True, its expiration (the lock's date) and ObjectLockSkew;
// and the lock's mode.
func LockedUntil(b *Backup) (until time.Time, mode string, locked bool) {
	for _, c := range b.Status.Conditions {
		if c.Type == BackupConditionLocked && c.Status == metav1.ConditionTrue && b.Status.Expiration != nil {
			return b.Status.Expiration.Add(ObjectLockSkew), c.Reason, true
		}
	}
	return time.Time{}, "", false
}

// Verification words: a backup is verified on request (VerifyAnnotation)
// and, where its storage location says so (VerifyEveryConfigKey), once it
// has ended and again every period. status.verification holds the counts
// and the first problems, the Verified condition the outcome.
const (
	// VerifyAnnotation requests a verification of the backup: whenever
	// its value differs from status.verification.request (any value:
	// `kubectl annotate backup b backstop.io/verify=$(date +%s)
	// --overwrite`), the backup is verified once it has ended, and the
	// value is recorded.
	VerifyAnnotation = "backstop.io/verify"
	// VerifyEveryConfigKey in a BackupStorageLocation's spec.config is a
	// duration (Go's: "24h", "168h"): each backup of the location that
	// completes is verified, and again once that long has passed since
	// its last verification.
	VerifyEveryConfigKey = "verifyEvery"
	// MinVerifyEvery is the shortest verifyEvery.
	MinVerifyEvery = time.Minute

	// BackupConditionVerified is the condition of a verification's
	// outcome: Unknown while one runs, True when every object read back
	// as written, False otherwise.
	BackupConditionVerified = "Verified"
	// The Verified condition's reasons.
	VerificationRunningReason    = "Verifying"
	VerificationPassedReason     = "Verified"
	VerificationCorruptReason    = "Corrupt"
	VerificationNoDataReason     = "NothingToVerify"
	VerificationNoManifestReason = "NoManifest"
	VerificationUnreadableReason = "LocationUnreadable"
	// MaxVerificationProblems is how many problems status.verification
	// lists (ProblemCount counts them all).
	MaxVerificationProblems = 10
)

// BackupLifecycle is the life of a Backup. Velero's phases
// WaitingForPluginOperations* and Finalizing* are kept; Backstop adds
// FinalizingCancelled (docs/design.md, "Cancellation").
var BackupLifecycle = lifecycle.Table[BackupPhase]{
	Kind: "Backup",
	Phases: []BackupPhase{"", BackupPhaseNew, BackupPhaseQueued, BackupPhaseReadyToStart, BackupPhaseFailedValidation,
		BackupPhaseInProgress, BackupPhaseWaitingForPluginOperations, BackupPhaseWaitingForPluginOperationsPartiallyFailed,
		BackupPhaseFinalizing, BackupPhaseFinalizingPartiallyFailed, BackupPhaseFinalizingCancelled,
		BackupPhaseCompleted, BackupPhasePartiallyFailed, BackupPhaseFailed, BackupPhaseDeleting},
	Terminal: []BackupPhase{BackupPhaseFailedValidation, BackupPhaseCompleted, BackupPhasePartiallyFailed, BackupPhaseFailed, BackupPhaseDeleting},
	Transitions: []lifecycle.Transition[BackupPhase]{
		{From: lifecycle.From[BackupPhase]("", BackupPhaseNew), To: BackupPhaseQueued, By: EngineBackupQueue,
			When: "a new backup joins the queue (the server numbers it)"},
		{From: lifecycle.From(BackupPhaseQueued), To: BackupPhaseReadyToStart, By: EngineBackupQueue,
			When: "a slot is free and no running or earlier backup shares a namespace"},
		{From: lifecycle.From[BackupPhase]("", BackupPhaseNew, BackupPhaseQueued, BackupPhaseReadyToStart), To: BackupPhaseFinalizingCancelled, By: EngineBackupQueue,
			When: "cancelled before it started"},
		{From: lifecycle.From(BackupPhaseReadyToStart), To: BackupPhaseFailedValidation, By: EngineBackup,
			When: "its storage location is missing, read-only or unavailable"},
		{From: lifecycle.From(BackupPhaseReadyToStart), To: BackupPhaseInProgress, By: EngineBackup,
			When: "the engine starts it"},
		{From: lifecycle.From(BackupPhaseInProgress), To: BackupPhaseWaitingForPluginOperations, By: EngineBackup,
			When: "items written, async operations (VM disks) still running"},
		{From: lifecycle.From(BackupPhaseInProgress, BackupPhaseWaitingForPluginOperations), To: BackupPhaseWaitingForPluginOperationsPartiallyFailed, By: EngineBackup,
			When: "as above, with errors"},
		{From: lifecycle.From(BackupPhaseInProgress, BackupPhaseWaitingForPluginOperations, BackupPhaseWaitingForPluginOperationsPartiallyFailed), To: BackupPhaseFinalizing, By: EngineBackup,
			When: "items and operations done without errors: uploading the records"},
		{From: lifecycle.From(BackupPhaseInProgress, BackupPhaseWaitingForPluginOperations, BackupPhaseWaitingForPluginOperationsPartiallyFailed), To: BackupPhaseFinalizingPartiallyFailed, By: EngineBackup,
			When: "as above, with errors"},
		{From: lifecycle.From(BackupPhaseInProgress, BackupPhaseWaitingForPluginOperations, BackupPhaseWaitingForPluginOperationsPartiallyFailed), To: BackupPhaseFinalizingCancelled, By: EngineBackup,
			When: "cancelled while running: its data is deleted but the log"},
		{From: lifecycle.From(BackupPhaseFinalizing), To: BackupPhaseCompleted, By: EngineBackup,
			When: "velero-backup.json written"},
		{From: lifecycle.From(BackupPhaseFinalizingPartiallyFailed), To: BackupPhasePartiallyFailed, By: EngineBackup,
			When: "velero-backup.json written"},
		{From: lifecycle.From(BackupPhaseInProgress, BackupPhaseWaitingForPluginOperations, BackupPhaseWaitingForPluginOperationsPartiallyFailed,
			BackupPhaseFinalizing, BackupPhaseFinalizingPartiallyFailed), To: BackupPhaseFailed, By: EngineBackup,
			When: "the tarball or the records could not be written, it was deleted, or the server stopped while it ran"},
		{From: lifecycle.From(BackupPhaseFinalizingCancelled), To: BackupPhaseFailed, By: EngineBackup + ", " + EngineBackupQueue,
			When: "cancellation finished: failureReason " + BackupCancelledReason},
		{From: lifecycle.From[BackupPhase]("", BackupPhaseNew, BackupPhaseQueued, BackupPhaseReadyToStart,
			BackupPhaseFailedValidation, BackupPhaseCompleted, BackupPhasePartiallyFailed, BackupPhaseFailed), To: BackupPhaseDeleting, By: EngineBackupDeletion,
			When: "a DeleteBackupRequest deletes a backup that is not running"},
	},
}

// Pending reports whether a backup has not started: nothing of it is
// written yet.
func (p BackupPhase) Pending() bool {
	return p == "" || p == BackupPhaseNew || p == BackupPhaseQueued || p == BackupPhaseReadyToStart
}

// Terminal reports whether a backup has finished (or is being deleted): it
// will not run again and can no longer be cancelled.
func (p BackupPhase) Terminal() bool { return BackupLifecycle.IsTerminal(p) }

// Running reports whether the backup engine owns the backup: neither
// pending nor terminal.
func (p BackupPhase) Running() bool { return !p.Pending() && !p.Terminal() }

// Restorable reports whether a backup in phase p can be restored from.
func (p BackupPhase) Restorable() bool {
	return p == BackupPhaseCompleted || p == BackupPhasePartiallyFailed
}

// RestoreRestartedReason is status.failureReason of a restore the server
// was running when it stopped.
const RestoreRestartedReason = "the server stopped while the restore was in progress"

// RestoreInterruptedReason is status.failureReason of a restore whose run
// stopped before its end was written, or whose start was written though
// it answered an error and no run took it (the storage failing for long,
// or the server that ran it stopped while its successor's view still
// showed it starting).
const RestoreInterruptedReason = "the restore's run stopped before its end could be written"

// RestoreDeletedReason is status.failureReason of a restore deleted while
// it ran: the run stops, and what it wrote stays.
const RestoreDeletedReason = "the restore was deleted while it ran; it stopped, and the items it had written stay"

// RestoreLifecycle is the life of a Restore. Velero's phases
// WaitingForPluginOperations* and Finalizing* are not entered: the one kind
// of restore item operation, a VM's disks restored from its chain, runs
// within InProgress, after the items (status.restoreItemOperations*).
var RestoreLifecycle = lifecycle.Table[RestorePhase]{
	Kind: "Restore",
	Phases: []RestorePhase{"", RestorePhaseNew, RestorePhaseFailedValidation, RestorePhaseInProgress,
		RestorePhaseWaitingForPluginOperations, RestorePhaseWaitingForPluginOperationsPartiallyFailed,
		RestorePhaseFinalizing, RestorePhaseFinalizingPartiallyFailed,
		RestorePhaseCompleted, RestorePhasePartiallyFailed, RestorePhaseFailed},
	Terminal: []RestorePhase{RestorePhaseFailedValidation, RestorePhaseCompleted, RestorePhasePartiallyFailed, RestorePhaseFailed},
	Transitions: []lifecycle.Transition[RestorePhase]{
		{From: lifecycle.From[RestorePhase]("", RestorePhaseNew), To: RestorePhaseFailedValidation, By: EngineRestore,
			When: "its backup is not restorable or its storage location is missing or unavailable"},
		{From: lifecycle.From[RestorePhase]("", RestorePhaseNew), To: RestorePhaseInProgress, By: EngineRestore,
			When: "the engine starts it"},
		{From: lifecycle.From(RestorePhaseInProgress), To: RestorePhaseCompleted, By: EngineRestore,
			When: "every item restored"},
		{From: lifecycle.From(RestorePhaseInProgress), To: RestorePhasePartiallyFailed, By: EngineRestore,
			When: "some items or VMs' disks could not be restored"},
		{From: lifecycle.From(RestorePhaseInProgress), To: RestorePhaseFailed, By: EngineRestore,
			When: "the tarball could not be read, a limit was passed, it was deleted, the server stopped while it ran, or no run has it"},
	},
}

// Terminal reports whether a restore has finished.
func (p RestorePhase) Terminal() bool { return RestoreLifecycle.IsTerminal(p) }

// Pending reports whether a restore has not started: it waits in the
// restore queue.
func (p RestorePhase) Pending() bool { return p == "" || p == RestorePhaseNew }

// DeleteBackupRequestLifecycle is the life of a DeleteBackupRequest.
var DeleteBackupRequestLifecycle = lifecycle.Table[DeleteBackupRequestPhase]{
	Kind:     "DeleteBackupRequest",
	Phases:   []DeleteBackupRequestPhase{"", DeleteBackupRequestPhaseNew, DeleteBackupRequestPhaseInProgress, DeleteBackupRequestPhaseProcessed},
	Terminal: []DeleteBackupRequestPhase{DeleteBackupRequestPhaseProcessed},
	Transitions: []lifecycle.Transition[DeleteBackupRequestPhase]{
		{From: lifecycle.From[DeleteBackupRequestPhase]("", DeleteBackupRequestPhaseNew), To: DeleteBackupRequestPhaseInProgress, By: EngineBackupDeletion,
			When: "the engine takes the request"},
		{From: lifecycle.From[DeleteBackupRequestPhase]("", DeleteBackupRequestPhaseNew, DeleteBackupRequestPhaseInProgress), To: DeleteBackupRequestPhaseProcessed, By: EngineBackupDeletion,
			When: "done, with status.errors saying what could not be deleted (a request for a backup another request is deleting ends at once)"},
	},
}

// Terminal reports whether a deletion request has been processed.
func (p DeleteBackupRequestPhase) Terminal() bool { return DeleteBackupRequestLifecycle.IsTerminal(p) }

// ScheduleLifecycle is the life of a Schedule: its phase follows the
// validity of its spec, which users may change at any time.
var ScheduleLifecycle = lifecycle.Table[SchedulePhase]{
	Kind:   "Schedule",
	Phases: []SchedulePhase{"", SchedulePhaseNew, SchedulePhaseEnabled, SchedulePhaseFailedValidation},
	Transitions: []lifecycle.Transition[SchedulePhase]{
		{From: lifecycle.From[SchedulePhase]("", SchedulePhaseNew, SchedulePhaseFailedValidation), To: SchedulePhaseEnabled, By: EngineSchedule,
			When: "its cron expression parses"},
		{From: lifecycle.From[SchedulePhase]("", SchedulePhaseNew, SchedulePhaseEnabled), To: SchedulePhaseFailedValidation, By: EngineSchedule,
			When: "its cron expression does not parse (the API refuses such specs; stored ones may predate a rule)"},
	},
}

// QueueSequence is o's place in its queue (QueueSequenceAnnotation), and
// whether it has a valid one.
func QueueSequence(o metav1.Object) (int64, bool) {
	s, ok := o.GetAnnotations()[QueueSequenceAnnotation]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// QueueOwner is whose turn a queued backup takes: the tenant namespace
// of a backup made for a NonAdminBackup, "" (the admin) for any other. The
// queue takes each owner's backups in sequence and the owners in turns:
// the n-th waiting backup of every owner comes before the (n+1)-th of any
// (by sequence among those of the same turn), so that a tenant's thousand
// queued backups delay another tenant's, or the admin's, by one.
func QueueOwner(o metav1.Object) string {
	return o.GetAnnotations()[TenantOriginNamespaceAnnotation]
}

// VerifyEvery is a location's verification period (VerifyEveryConfigKey in
// its spec.config): 0 when it has none.
func VerifyEvery(config map[string]string) (time.Duration, error) {
	v, ok := config[VerifyEveryConfigKey]
	if !ok {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < MinVerifyEvery {
		return 0, fmt.Errorf("a duration of at least %s (e.g. 24h, 168h)", MinVerifyEvery)
	}
	return d, nil
}

// Preview words (RestoreStatus.Preview): what a restore would do with each
// item, and the bounds of one preview's answer.
const (
	PreviewCreate = "Create"
	PreviewUpdate = "Update"
	PreviewSkip   = "Skip"
	PreviewRefuse = "Refuse"

	// MaxPreviewItems is how many items a preview lists (its summary
	// counts them all).
	MaxPreviewItems = 1000
	// MaxPreviewObjectBytes bounds the objects a preview shows, together.
	MaxPreviewObjectBytes = 1 << 20
	// MaxPreviewMessages bounds its errors and warnings.
	MaxPreviewMessages = 100
)
