// Package failpoint kills the server at named points of its engines, for
// the crash-point tests: with BACKSTOP_CRASH_AT=<point> in its
// environment, the server sends itself SIGKILL the first time an engine
// reaches that point, as a power cut would stop it there. Without the
// variable every point is a no-op. The points are listed in Points, so
// that a test can check it covers each one.
package failpoint

import (
	"os"
	"syscall"
)

// EnvVar names the point to crash at.
const EnvVar = "BACKSTOP_CRASH_AT"

// The named points, in the order of the lives they cut.
const (
	// Backup.
	BackupInProgress         = "backup-in-progress"           // InProgress written, nothing collected
	BackupMidCollection      = "backup-mid-collection"        // some items in the tarball upload
	BackupBeforeUpload       = "backup-before-upload-records" // tarball uploaded, records (log, results) not yet
	BackupAfterUpload        = "backup-after-upload-records"  // records uploaded, velero-backup.json not yet
	BackupOperationStarted   = "backup-operation-started"     // an async operation started (a snapshot taken, a VM backup made), not recorded yet
	BackupWaitingForOps      = "backup-waiting-for-operations"
	BackupFinalizing         = "backup-finalizing"
	BackupFinalizingCanceled = "backup-finalizing-cancelled"
	// Restore.
	RestoreInProgress = "restore-in-progress"
	// DeleteBackupRequest.
	DeletionInProgress = "deletion-in-progress" // request InProgress, data partly deleted
	// Deletion of an object whose engine cleans up after it (finalizer).
	DeleteBeforeCleanup = "delete-before-cleanup"
	// NonAdminBackup.
	NonAdminBackupRecorded = "nonadmin-backup-recorded" // NACUUID in the status, Velero Backup not made yet
	NonAdminBackupMade     = "nonadmin-backup-made"     // Velero Backup made, phase Created not written
	NonAdminBackupDeleting = "nonadmin-backup-deleting" // DeleteBackupRequest made, not mirrored
	// NonAdminRestore.
	NonAdminRestoreMade = "nonadmin-restore-made" // Velero Restore made, phase Created not written
	// NonAdminSchedule.
	NonAdminScheduleRunAdopting = "nonadmin-schedule-run-adopting" // a run's NonAdminBackup made; its status and the backup's link not written
	// VirtualMachineBackup.
	VMBackupAfterBegin         = "vmbackup-after-begin"          // libvirt job started
	VMBackupBeforeTrackerMoves = "vmbackup-before-tracker-moves" // output written, tracker not yet moved
	VMBackupMergeJournaled     = "vmbackup-merge-journaled"      // a deleted backup's merge into the next: journal written, nothing renamed
	// DataUpload.
	DataUploadInProgress = "data-upload-in-progress" // volume published, InProgress written, nothing uploaded
)

// Points lists every point.
var Points = []string{BackupInProgress, BackupMidCollection, BackupBeforeUpload, BackupAfterUpload, BackupOperationStarted, BackupWaitingForOps,
	BackupFinalizing, BackupFinalizingCanceled, RestoreInProgress, DeletionInProgress, DeleteBeforeCleanup,
	VMBackupAfterBegin, VMBackupBeforeTrackerMoves, VMBackupMergeJournaled, NonAdminBackupRecorded, NonAdminBackupMade, NonAdminBackupDeleting,
	NonAdminRestoreMade, NonAdminScheduleRunAdopting, DataUploadInProgress}

// ClusterPoints are the points only a server with a cluster and its CSI
// stack reaches: the cluster suite's crash tests cover them, the
// standalone crash test the others.
var ClusterPoints = []string{DataUploadInProgress}

// Set is the point a server crashes at ("" for none).
type Set struct{ at string }

// FromEnv reads the point from the environment.
func FromEnv() Set { return Set{at: os.Getenv(EnvVar)} }

// Hit kills the process when point is the one to crash at.
func (s Set) Hit(point string) {
	if s.at == "" || s.at != point {
		return
	}
	os.Stderr.WriteString("failpoint: crashing at " + point + "\n")
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}
