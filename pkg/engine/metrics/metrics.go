// Package metrics turns the phase transitions the engines write into
// Prometheus metrics with Velero's names and labels (Velero's
// pkg/metrics: velero_backup_attempt_total{schedule}, ...), so that
// dashboards and alerts written for Velero work against Backstop, and
// VirtualMachineBackups into backstop_vm_backup_* metrics, and backups'
// verifications into backstop_backup_verification_*. It is a
// status.Observer: every transition goes through the engines' one status
// writer, so no transition is counted twice or missed. What Velero reads
// from the objects rather than counts (the totals, the locations' status,
// the last success of each schedule, the series of each schedule at 0)
// and Backstop's queue and tenant gauges are set by a Resyncer from the
// engines' listers.
package metrics

import (
	"context"
	"sync"
	"time"

	"k8s.io/component-base/metrics"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/engine/status"
)

const (
	locationLabel   = "backup_location_name"
	nodeLabel       = "node"
	repositoryLabel = "repository_name"
	phaseLabel      = "phase"
	scheduleLabel   = "schedule"
	namespaceLabel  = "namespace"
	backupNameLabel = "backupName"
	resultLabel     = "result"
)

// Velero's duration buckets: one minute to four hours.
var durationBuckets = []float64{60, 300, 600, 900, 1800, 3600, 7200, 10800, 14400}

// Waits in the queues: a second to four hours.
var waitBuckets = []float64{1, 5, 15, 30, 60, 300, 900, 1800, 3600, 14400}

// Verifications' buckets: a second to four hours.
var verificationBuckets = []float64{1, 10, 60, 300, 900, 1800, 3600, 7200, 14400}

// Recorder holds the metrics.
type Recorder struct {
	mu sync.Mutex
	// deleting: the schedule of each backup marked Deleting, by
	// namespace/name, until its deletion request is processed.
	deleting map[string]string

	backupAttempt, backupSuccess, backupPartialFailure, backupFailure, backupValidationFailure *metrics.CounterVec
	backupWarnings                                                                             *metrics.CounterVec
	backupDuration                                                                             *metrics.HistogramVec
	backupItems, backupItemErrors, backupLastSuccess, backupLastStatus, backupTarballSize      *metrics.GaugeVec
	deletionAttempt, deletionSuccess, deletionFailure                                          *metrics.CounterVec
	// CSI snapshots of backups, by schedule and backup (Velero's).
	csiAttempt, csiSuccess, csiFailure *metrics.CounterVec

	// Native volume snapshots (Velero's VolumeSnapshotters): Backstop
	// takes none, the series exist at 0 for the dashboards and alerts that
	// read them.
	volumeSnapshotAttempt, volumeSnapshotSuccess, volumeSnapshotFailure *metrics.CounterVec

	restoreAttempt, restoreSuccess, restorePartialFailure, restoreFailed, restoreValidationFailed *metrics.CounterVec

	// Repository maintenance, by repository (Velero's).
	repoMaintenanceSuccess, repoMaintenanceFailure *metrics.CounterVec
	repoMaintenanceDuration                        *metrics.HistogramVec
	// The data mover's uploads and downloads that ended, by node (Velero's
	// node agent's, podVolume_*).
	uploadSuccess, uploadFailure, uploadCancel       *metrics.CounterVec
	downloadSuccess, downloadFailure, downloadCancel *metrics.CounterVec

	// What Velero reads from the objects, not counts (Resync).
	backupTotal, restoreTotal *metrics.Gauge
	locationStatus            *metrics.GaugeVec

	// The queues (Backstop's): waiting backups and restores, how long the
	// oldest has waited, and how long each waited before it started.
	backupQueueLength, restoreQueueLength *metrics.Gauge
	backupQueueOldest, restoreQueueOldest *metrics.Gauge
	backupQueueWait, restoreQueueWait     *metrics.HistogramVec
	nonAdminBackups, nonAdminRestores     *metrics.GaugeVec

	vmAttempt, vmSuccess, vmFailure *metrics.CounterVec
	vmDuration                      *metrics.HistogramVec

	// Backups' verifications (package verify), by schedule and result
	// (the Verified condition's reason).
	verification, verificationBytes, verificationProblems *metrics.CounterVec
	verificationDuration                                  *metrics.HistogramVec
}

func counter(namespace, name, help string, labels ...string) *metrics.CounterVec {
	return metrics.NewCounterVec(&metrics.CounterOpts{Namespace: namespace, Name: name, Help: help, StabilityLevel: metrics.ALPHA}, labels)
}

func gauge(name, help string) *metrics.GaugeVec {
	return metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: "velero", Name: name, Help: help, StabilityLevel: metrics.ALPHA}, []string{scheduleLabel})
}

// New returns the recorder, its metrics registered by register (the
// server's: legacyregistry.MustRegister, served at /metrics).
func New(register func(...metrics.Registerable)) *Recorder {
	r := &Recorder{
		deleting:                map[string]string{},
		backupAttempt:           counter("velero", "backup_attempt_total", "Total number of attempted backups", scheduleLabel),
		backupSuccess:           counter("velero", "backup_success_total", "Total number of successful backups", scheduleLabel),
		backupPartialFailure:    counter("velero", "backup_partial_failure_total", "Total number of partially failed backups", scheduleLabel),
		backupFailure:           counter("velero", "backup_failure_total", "Total number of failed backups", scheduleLabel),
		backupValidationFailure: counter("velero", "backup_validation_failure_total", "Total number of validation failed backups", scheduleLabel),
		backupWarnings:          counter("velero", "backup_warning_total", "Total number of warned backups", scheduleLabel),
		backupDuration: metrics.NewHistogramVec(&metrics.HistogramOpts{Namespace: "velero", Name: "backup_duration_seconds",
			Help: "Time taken to complete backup, in seconds", Buckets: durationBuckets, StabilityLevel: metrics.ALPHA}, []string{scheduleLabel}),
		backupItems:       gauge("backup_items_total", "Total number of items backed up"),
		backupItemErrors:  gauge("backup_items_errors", "Total number of errors encountered during backup"),
		backupLastSuccess: gauge("backup_last_successful_timestamp", "Last time a backup ran successfully, Unix timestamp in seconds"),
		backupLastStatus:  gauge("backup_last_status", "Last status of the backup. A value of 1 is success, 0 is failure"),
		backupTarballSize: gauge("backup_tarball_size_bytes", "Size, in bytes, of a backup"),
		deletionAttempt:   counter("velero", "backup_deletion_attempt_total", "Total number of attempted backup deletions", scheduleLabel),
		deletionSuccess:   counter("velero", "backup_deletion_success_total", "Total number of successful backup deletions", scheduleLabel),
		deletionFailure:   counter("velero", "backup_deletion_failure_total", "Total number of failed backup deletions", scheduleLabel),
		csiAttempt:        counter("velero", "csi_snapshot_attempt_total", "Total number of CSI attempted volume snapshots", scheduleLabel, backupNameLabel),
		csiSuccess:        counter("velero", "csi_snapshot_success_total", "Total number of CSI successful volume snapshots", scheduleLabel, backupNameLabel),
		csiFailure:        counter("velero", "csi_snapshot_failure_total", "Total number of CSI failed volume snapshots", scheduleLabel, backupNameLabel),

		volumeSnapshotAttempt: counter("velero", "volume_snapshot_attempt_total", "Total number of attempted volume snapshots", scheduleLabel),
		volumeSnapshotSuccess: counter("velero", "volume_snapshot_success_total", "Total number of successful volume snapshots", scheduleLabel),
		volumeSnapshotFailure: counter("velero", "volume_snapshot_failure_total", "Total number of failed volume snapshots", scheduleLabel),

		repoMaintenanceSuccess: counter("velero", "repo_maintenance_success_total", "Total number of successful repo maintenance", repositoryLabel),
		repoMaintenanceFailure: counter("velero", "repo_maintenance_failure_total", "Total number of failed repo maintenance", repositoryLabel),
		repoMaintenanceDuration: metrics.NewHistogramVec(&metrics.HistogramOpts{Namespace: "velero", Name: "repo_maintenance_duration_seconds",
			Help: "Time taken to complete repo maintenance, in seconds", Buckets: durationBuckets, StabilityLevel: metrics.ALPHA}, []string{repositoryLabel}),
		uploadSuccess:   counter("podVolume", "data_upload_success_total", "Total number of successful uploaded snapshots", nodeLabel),
		uploadFailure:   counter("podVolume", "data_upload_failure_total", "Total number of failed uploaded snapshots", nodeLabel),
		uploadCancel:    counter("podVolume", "data_upload_cancel_total", "Total number of canceled uploaded snapshots", nodeLabel),
		downloadSuccess: counter("podVolume", "data_download_success_total", "Total number of successful downloaded snapshots", nodeLabel),
		downloadFailure: counter("podVolume", "data_download_failure_total", "Total number of failed downloaded snapshots", nodeLabel),
		downloadCancel:  counter("podVolume", "data_download_cancel_total", "Total number of canceled downloaded snapshots", nodeLabel),

		backupTotal:    metrics.NewGauge(&metrics.GaugeOpts{Namespace: "velero", Name: "backup_total", Help: "Current number of existent backups", StabilityLevel: metrics.ALPHA}),
		restoreTotal:   metrics.NewGauge(&metrics.GaugeOpts{Namespace: "velero", Name: "restore_total", Help: "Current number of existent restores", StabilityLevel: metrics.ALPHA}),
		locationStatus: metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: "velero", Name: "backup_location_status_gauge", Help: "The status of backup storage locations. 1 is Available, 0 is Unavailable", StabilityLevel: metrics.ALPHA}, []string{locationLabel}),

		backupQueueLength:  metrics.NewGauge(&metrics.GaugeOpts{Namespace: "backstop", Name: "backup_queue_length", Help: "Backups waiting to start (New, Queued, ReadyToStart)", StabilityLevel: metrics.ALPHA}),
		restoreQueueLength: metrics.NewGauge(&metrics.GaugeOpts{Namespace: "backstop", Name: "restore_queue_length", Help: "Restores waiting to start (New)", StabilityLevel: metrics.ALPHA}),
		backupQueueOldest:  metrics.NewGauge(&metrics.GaugeOpts{Namespace: "backstop", Name: "backup_queue_oldest_seconds", Help: "How long the backup waiting longest has waited, in seconds (0: none waits)", StabilityLevel: metrics.ALPHA}),
		restoreQueueOldest: metrics.NewGauge(&metrics.GaugeOpts{Namespace: "backstop", Name: "restore_queue_oldest_seconds", Help: "How long the restore waiting longest has waited, in seconds (0: none waits)", StabilityLevel: metrics.ALPHA}),
		backupQueueWait: metrics.NewHistogramVec(&metrics.HistogramOpts{Namespace: "backstop", Name: "backup_queue_wait_seconds",
			Help: "Time a backup waited from its creation to its start, in seconds", Buckets: waitBuckets, StabilityLevel: metrics.ALPHA}, []string{scheduleLabel}),
		restoreQueueWait: metrics.NewHistogramVec(&metrics.HistogramOpts{Namespace: "backstop", Name: "restore_queue_wait_seconds",
			Help: "Time a restore waited from its creation to its start, in seconds", Buckets: waitBuckets, StabilityLevel: metrics.ALPHA}, []string{scheduleLabel}),
		nonAdminBackups:  metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: "backstop", Name: "nonadmin_backups", Help: "Tenants' NonAdminBackups, by namespace and phase", StabilityLevel: metrics.ALPHA}, []string{namespaceLabel, phaseLabel}),
		nonAdminRestores: metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: "backstop", Name: "nonadmin_restores", Help: "Tenants' NonAdminRestores, by namespace and phase", StabilityLevel: metrics.ALPHA}, []string{namespaceLabel, phaseLabel}),

		restoreAttempt:          counter("velero", "restore_attempt_total", "Total number of attempted restores", scheduleLabel),
		restoreSuccess:          counter("velero", "restore_success_total", "Total number of successful restores", scheduleLabel),
		restorePartialFailure:   counter("velero", "restore_partial_failure_total", "Total number of partially failed restores", scheduleLabel),
		restoreFailed:           counter("velero", "restore_failed_total", "Total number of failed restores", scheduleLabel),
		restoreValidationFailed: counter("velero", "restore_validation_failed_total", "Total number of failed restores failing validations", scheduleLabel),

		vmAttempt: counter("backstop", "vm_backup_attempt_total", "Total number of attempted VirtualMachineBackups", namespaceLabel),
		vmSuccess: counter("backstop", "vm_backup_success_total", "Total number of completed VirtualMachineBackups", namespaceLabel),
		vmFailure: counter("backstop", "vm_backup_failure_total", "Total number of failed VirtualMachineBackups", namespaceLabel),
		vmDuration: metrics.NewHistogramVec(&metrics.HistogramOpts{Namespace: "backstop", Name: "vm_backup_duration_seconds",
			Help: "Time taken to complete a VirtualMachineBackup, in seconds", Buckets: durationBuckets, StabilityLevel: metrics.ALPHA}, []string{namespaceLabel}),

		verification:         counter("backstop", "backup_verification_total", "Total number of backup verifications, by result (Verified, Corrupt, NothingToVerify, LocationUnreadable)", scheduleLabel, resultLabel),
		verificationBytes:    counter("backstop", "backup_verification_bytes_total", "Total number of bytes read back by backup verifications", scheduleLabel),
		verificationProblems: counter("backstop", "backup_verification_problems_total", "Total number of problems backup verifications found", scheduleLabel),
		verificationDuration: metrics.NewHistogramVec(&metrics.HistogramOpts{Namespace: "backstop", Name: "backup_verification_duration_seconds",
			Help: "Time taken to verify a backup, in seconds", Buckets: verificationBuckets, StabilityLevel: metrics.ALPHA}, []string{scheduleLabel}),
	}
	for _, c := range []metrics.Registerable{r.backupAttempt, r.backupSuccess, r.backupPartialFailure, r.backupFailure,
		r.backupValidationFailure, r.backupWarnings, r.backupDuration, r.backupItems, r.backupItemErrors, r.backupLastSuccess,
		r.backupLastStatus, r.backupTarballSize, r.deletionAttempt, r.deletionSuccess, r.deletionFailure, r.csiAttempt, r.csiSuccess, r.csiFailure, r.restoreAttempt, r.restoreSuccess,
		r.restorePartialFailure, r.restoreFailed, r.restoreValidationFailed, r.vmAttempt, r.vmSuccess, r.vmFailure, r.vmDuration,
		r.verification, r.verificationBytes, r.verificationProblems, r.verificationDuration,
		r.volumeSnapshotAttempt, r.volumeSnapshotSuccess, r.volumeSnapshotFailure, r.backupTotal, r.restoreTotal, r.locationStatus,
		r.backupQueueLength, r.restoreQueueLength, r.backupQueueOldest, r.restoreQueueOldest, r.backupQueueWait, r.restoreQueueWait,
		r.nonAdminBackups, r.nonAdminRestores, r.repoMaintenanceSuccess, r.repoMaintenanceFailure, r.repoMaintenanceDuration,
		r.uploadSuccess, r.uploadFailure, r.uploadCancel, r.downloadSuccess, r.downloadFailure, r.downloadCancel} {
		register(c)
	}
	return r
}

var _ status.Observer = &Recorder{}

// RepositoryMaintenance records one maintenance run of a repository.
func (r *Recorder) RepositoryMaintenance(repository string, succeeded bool, took time.Duration) {
	if succeeded {
		r.repoMaintenanceSuccess.WithLabelValues(repository).Inc()
	} else {
		r.repoMaintenanceFailure.WithLabelValues(repository).Inc()
	}
	r.repoMaintenanceDuration.WithLabelValues(repository).Observe(took.Seconds())
}

// TarballSize records the size of a completed backup's tarball, by its
// schedule ("" for none), as Velero's velero_backup_tarball_size_bytes.
func (r *Recorder) TarballSize(schedule string, bytes int64) {
	r.backupTarballSize.WithLabelValues(schedule).Set(float64(bytes))
}

// Verification records one verification of a backup of schedule ("" for
// none) and its result.
func (r *Recorder) Verification(schedule, result string, took time.Duration, bytes int64, problems int) {
	r.verification.WithLabelValues(schedule, result).Inc()
	r.verificationBytes.WithLabelValues(schedule).Add(float64(bytes))
	r.verificationProblems.WithLabelValues(schedule).Add(float64(problems))
	r.verificationDuration.WithLabelValues(schedule).Observe(took.Seconds())
}

// Transition records one phase transition.
func (r *Recorder) Transition(_ context.Context, t status.Transition) {
	switch o := t.New.(type) {
	case *velerov1.Backup:
		r.backup(o, velerov1.BackupPhase(t.To))
	case *velerov1.Restore:
		r.restore(o, velerov1.RestorePhase(t.To))
	case *velerov1.DeleteBackupRequest:
		if velerov1.DeleteBackupRequestPhase(t.To) == velerov1.DeleteBackupRequestPhaseProcessed && velerov1.DeleteBackupRequestPhase(t.From) == velerov1.DeleteBackupRequestPhaseInProgress {
			// As Velero: counted under the backup's schedule, and only
			// for a request that marked its backup Deleting (not one
			// refused before: backup not found, locked).
			schedule, ok := r.deleted(o.Namespace, o.Spec.BackupName)
			if !ok {
				return
			}
			if len(o.Status.Errors) == 0 {
				r.deletionSuccess.WithLabelValues(schedule).Inc()
			} else {
				r.deletionFailure.WithLabelValues(schedule).Inc()
			}
		}
	case *kv.VirtualMachineBackup:
		r.vmBackup(o, kv.BackupState(t.To))
	case *velerov2alpha1.DataUpload:
		moved(map[string]*metrics.CounterVec{string(velerov2alpha1.DataUploadPhaseCompleted): r.uploadSuccess,
			string(velerov2alpha1.DataUploadPhaseFailed): r.uploadFailure, string(velerov2alpha1.DataUploadPhaseCanceled): r.uploadCancel},
			t.To, o.Status.Node)
	case *velerov2alpha1.DataDownload:
		moved(map[string]*metrics.CounterVec{string(velerov2alpha1.DataDownloadPhaseCompleted): r.downloadSuccess,
			string(velerov2alpha1.DataDownloadPhaseFailed): r.downloadFailure, string(velerov2alpha1.DataDownloadPhaseCanceled): r.downloadCancel},
			t.To, o.Status.Node)
	}
}

// moved counts a data mover's upload or download that ended, by node: the
// counter of the phase it ended in, if any.
func moved(byPhase map[string]*metrics.CounterVec, to, node string) {
	if c, ok := byPhase[to]; ok {
		c.WithLabelValues(node).Inc()
	}
}

func (r *Recorder) backup(b *velerov1.Backup, to velerov1.BackupPhase) {
	schedule := b.Labels[velerov1.ScheduleNameLabel]
	switch to {
	case velerov1.BackupPhaseInProgress:
		r.backupAttempt.WithLabelValues(schedule).Inc()
		if start := b.Status.StartTimestamp; start != nil {
			if d, ok := duration(b.CreationTimestamp.Time, start.Time); ok {
				r.backupQueueWait.WithLabelValues(schedule).Observe(d)
			}
		}
		return
	case velerov1.BackupPhaseFailedValidation:
		r.backupValidationFailure.WithLabelValues(schedule).Inc()
		r.backupLastStatus.WithLabelValues(schedule).Set(0)
		return
	case velerov1.BackupPhaseDeleting:
		r.deletionAttempt.WithLabelValues(schedule).Inc()
		r.mu.Lock()
		r.deleting[b.Namespace+"/"+b.Name] = schedule
		r.mu.Unlock()
		return
	case velerov1.BackupPhaseFinalizing, velerov1.BackupPhaseFinalizingPartiallyFailed:
		// The write that enters Finalizing counts the backup's CSI
		// snapshots, once.
		if attempted := b.Status.CSIVolumeSnapshotsAttempted; attempted > 0 {
			completed := b.Status.CSIVolumeSnapshotsCompleted
			r.csiAttempt.WithLabelValues(schedule, b.Name).Add(float64(attempted))
			r.csiSuccess.WithLabelValues(schedule, b.Name).Add(float64(completed))
			r.csiFailure.WithLabelValues(schedule, b.Name).Add(float64(attempted - completed))
		}
		return
	case velerov1.BackupPhaseCompleted:
		r.backupSuccess.WithLabelValues(schedule).Inc()
		r.backupLastStatus.WithLabelValues(schedule).Set(1)
		if b.Status.CompletionTimestamp != nil {
			r.backupLastSuccess.WithLabelValues(schedule).Set(float64(b.Status.CompletionTimestamp.Unix()))
		}
	case velerov1.BackupPhasePartiallyFailed:
		r.backupPartialFailure.WithLabelValues(schedule).Inc()
		r.backupLastStatus.WithLabelValues(schedule).Set(0)
	case velerov1.BackupPhaseFailed:
		r.backupFailure.WithLabelValues(schedule).Inc()
		r.backupLastStatus.WithLabelValues(schedule).Set(0)
	default:
		return
	}
	// The backup has ended (Completed, PartiallyFailed, Failed).
	if b.Status.Progress != nil {
		r.backupItems.WithLabelValues(schedule).Set(float64(b.Status.Progress.ItemsBackedUp))
	}
	r.backupItemErrors.WithLabelValues(schedule).Set(float64(b.Status.Errors))
	if b.Status.Warnings > 0 {
		r.backupWarnings.WithLabelValues(schedule).Inc()
	}
	if start, end := b.Status.StartTimestamp, b.Status.CompletionTimestamp; start != nil && end != nil {
		if d, ok := duration(start.Time, end.Time); ok {
			r.backupDuration.WithLabelValues(schedule).Observe(d)
		}
	}
}

func (r *Recorder) restore(rs *velerov1.Restore, to velerov1.RestorePhase) {
	schedule := rs.Spec.ScheduleName
	switch to {
	case velerov1.RestorePhaseInProgress:
		r.restoreAttempt.WithLabelValues(schedule).Inc()
		if start := rs.Status.StartTimestamp; start != nil {
			if d, ok := duration(rs.CreationTimestamp.Time, start.Time); ok {
				r.restoreQueueWait.WithLabelValues(schedule).Observe(d)
			}
		}
	case velerov1.RestorePhaseFailedValidation:
		// As Velero: a restore taken up and refused is an attempt.
		r.restoreAttempt.WithLabelValues(schedule).Inc()
		r.restoreValidationFailed.WithLabelValues(schedule).Inc()
	case velerov1.RestorePhaseCompleted:
		r.restoreSuccess.WithLabelValues(schedule).Inc()
	case velerov1.RestorePhasePartiallyFailed:
		r.restorePartialFailure.WithLabelValues(schedule).Inc()
	case velerov1.RestorePhaseFailed:
		r.restoreFailed.WithLabelValues(schedule).Inc()
	}
}

func (r *Recorder) vmBackup(b *kv.VirtualMachineBackup, to kv.BackupState) {
	switch to {
	case kv.BackupRunning:
		r.vmAttempt.WithLabelValues(b.Namespace).Inc()
		// A namespace's outcomes exist from its first attempt at 0, so
		// that its first failure is an increase (BackstopVMBackupFailure).
		r.vmSuccess.WithLabelValues(b.Namespace).Add(0)
		r.vmFailure.WithLabelValues(b.Namespace).Add(0)
	case kv.BackupComplete:
		r.vmSuccess.WithLabelValues(b.Namespace).Inc()
		if d, ok := duration(b.CreationTimestamp.Time, time.Now()); ok {
			r.vmDuration.WithLabelValues(b.Namespace).Observe(d)
		}
	case kv.BackupFailed:
		r.vmFailure.WithLabelValues(b.Namespace).Inc()
	}
}

// deleted takes the schedule of a backup its deletion request marked
// Deleting (ok false: none did).
func (r *Recorder) deleted(namespace, backup string) (schedule string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := namespace + "/" + backup
	schedule, ok = r.deleting[key]
	delete(r.deleting, key)
	return schedule, ok
}

// duration is end - start in seconds, when they are in order.
func duration(start, end time.Time) (float64, bool) {
	if start.IsZero() || end.Before(start) {
		return 0, false
	}
	return end.Sub(start).Seconds(), true
}
