package metrics

import (
	"context"
	"strings"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	clocktesting "k8s.io/utils/clock/testing"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/engine/status"
	oadplisters "github.com/backstop-io/backstop/pkg/generated/listers/oadp/v1alpha1"
	velerolisters "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
)

const adminNS = "backstop-system"

func indexer(t *testing.T, objs ...any) cache.Indexer {
	t.Helper()
	i := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		if err := i.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return i
}

func meta(name string, created time.Time, schedule string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Namespace: adminNS, CreationTimestamp: metav1.Time{Time: created}}
	if schedule != "" {
		m.Labels = map[string]string{velerov1.ScheduleNameLabel: schedule}
	}
	return m
}

// TestResync: what is read from the objects, on a registry's
// exposition: each schedule's series at 0 (the last status at 1) and
// removed with the schedule, the totals, each location's status, each
// schedule's last success, the queues, the tenants' objects by phase.
func TestResync(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	reg := metrics.NewKubeRegistry()
	r := New(reg.MustRegister)
	done := func(at time.Time) *metav1.Time { return &metav1.Time{Time: at} }
	schedules := indexer(t, &velerov1.Schedule{ObjectMeta: meta("nightly", now, "")})
	backups := indexer(t,
		&velerov1.Backup{ObjectMeta: meta("n1", now.Add(-2*time.Hour), "nightly"), Status: velerov1.BackupStatus{Phase: velerov1.BackupPhaseCompleted, CompletionTimestamp: done(now.Add(-time.Hour))}},
		&velerov1.Backup{ObjectMeta: meta("n0", now.Add(-26*time.Hour), "nightly"), Status: velerov1.BackupStatus{Phase: velerov1.BackupPhaseCompleted, CompletionTimestamp: done(now.Add(-25 * time.Hour))}},
		&velerov1.Backup{ObjectMeta: meta("manual", now.Add(-3*time.Hour), ""), Status: velerov1.BackupStatus{Phase: velerov1.BackupPhaseCompleted, CompletionTimestamp: done(now.Add(-3 * time.Hour))}},
		&velerov1.Backup{ObjectMeta: meta("waits", now.Add(-90*time.Second), ""), Status: velerov1.BackupStatus{Phase: velerov1.BackupPhaseQueued}},
		&velerov1.Backup{ObjectMeta: meta("new", now.Add(-10*time.Second), "")},
		&velerov1.Backup{ObjectMeta: meta("failed", now.Add(-time.Hour), "nightly"), Status: velerov1.BackupStatus{Phase: velerov1.BackupPhaseFailed, CompletionTimestamp: done(now)}})
	restores := indexer(t,
		&velerov1.Restore{ObjectMeta: meta("r-waits", now.Add(-30*time.Second), "")},
		&velerov1.Restore{ObjectMeta: meta("r-done", now.Add(-time.Hour), ""), Status: velerov1.RestoreStatus{Phase: velerov1.RestorePhaseCompleted}})
	locations := indexer(t,
		&velerov1.BackupStorageLocation{ObjectMeta: meta("default", now, ""), Status: velerov1.BackupStorageLocationStatus{Phase: velerov1.BackupStorageLocationPhaseAvailable}},
		&velerov1.BackupStorageLocation{ObjectMeta: meta("offsite", now, ""), Status: velerov1.BackupStorageLocationStatus{Phase: velerov1.BackupStorageLocationPhaseUnavailable}})
	nab := func(ns, name string, phase oadpv1alpha1.NonAdminPhase) *oadpv1alpha1.NonAdminBackup {
		return &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Status: oadpv1alpha1.NonAdminBackupStatus{Phase: phase}}
	}
	nabs := indexer(t, nab("shop", "a", oadpv1alpha1.NonAdminPhaseCreated), nab("shop", "b", oadpv1alpha1.NonAdminPhaseCreated),
		nab("blog", "c", oadpv1alpha1.NonAdminPhaseBackingOff))
	nars := indexer(t, &oadpv1alpha1.NonAdminRestore{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "shop"},
		Status: oadpv1alpha1.NonAdminRestoreStatus{Phase: oadpv1alpha1.NonAdminPhaseNew}})
	s := NewResyncer(r, Objects{Namespace: adminNS, Backups: velerolisters.NewBackupLister(backups), Restores: velerolisters.NewRestoreLister(restores),
		Schedules: velerolisters.NewScheduleLister(schedules), Locations: velerolisters.NewBackupStorageLocationLister(locations),
		NonAdminBackups: oadplisters.NewNonAdminBackupLister(nabs), NonAdminRestores: oadplisters.NewNonAdminRestoreLister(nars)},
		clocktesting.NewFakePassiveClock(now))
	if err := s.Resync(); err != nil {
		t.Fatal(err)
	}
	compare := func(t *testing.T, want string, names ...string) {
		t.Helper()
		if err := promtestutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
			t.Error(err)
		}
	}
	t.Run("read from the objects", func(t *testing.T) {
		compare(t, `
# HELP velero_backup_total [ALPHA] Current number of existent backups
# TYPE velero_backup_total gauge
velero_backup_total 6
# HELP velero_restore_total [ALPHA] Current number of existent restores
# TYPE velero_restore_total gauge
velero_restore_total 2
# HELP velero_backup_location_status_gauge [ALPHA] The status of backup storage locations. 1 is Available, 0 is Unavailable
# TYPE velero_backup_location_status_gauge gauge
velero_backup_location_status_gauge{backup_location_name="default"} 1
velero_backup_location_status_gauge{backup_location_name="offsite"} 0
# HELP velero_backup_last_successful_timestamp [ALPHA] Last time a backup ran successfully, Unix timestamp in seconds
# TYPE velero_backup_last_successful_timestamp gauge
velero_backup_last_successful_timestamp{schedule=""} 1.79577e+09
velero_backup_last_successful_timestamp{schedule="nightly"} 1.7957772e+09
# HELP backstop_backup_queue_length [ALPHA] Backups waiting to start (New, Queued, ReadyToStart)
# TYPE backstop_backup_queue_length gauge
backstop_backup_queue_length 2
# HELP backstop_backup_queue_oldest_seconds [ALPHA] How long the backup waiting longest has waited, in seconds (0: none waits)
# TYPE backstop_backup_queue_oldest_seconds gauge
backstop_backup_queue_oldest_seconds 90
# HELP backstop_restore_queue_length [ALPHA] Restores waiting to start (New)
# TYPE backstop_restore_queue_length gauge
backstop_restore_queue_length 1
# HELP backstop_restore_queue_oldest_seconds [ALPHA] How long the restore waiting longest has waited, in seconds (0: none waits)
# TYPE backstop_restore_queue_oldest_seconds gauge
backstop_restore_queue_oldest_seconds 30
# HELP backstop_nonadmin_backups [ALPHA] Tenants' NonAdminBackups, by namespace and phase
# TYPE backstop_nonadmin_backups gauge
backstop_nonadmin_backups{namespace="blog",phase="BackingOff"} 1
backstop_nonadmin_backups{namespace="shop",phase="Created"} 2
# HELP backstop_nonadmin_restores [ALPHA] Tenants' NonAdminRestores, by namespace and phase
# TYPE backstop_nonadmin_restores gauge
backstop_nonadmin_restores{namespace="shop",phase="New"} 1
`, "velero_backup_total", "velero_restore_total", "velero_backup_location_status_gauge", "velero_backup_last_successful_timestamp",
			"backstop_backup_queue_length", "backstop_backup_queue_oldest_seconds", "backstop_restore_queue_length", "backstop_restore_queue_oldest_seconds",
			"backstop_nonadmin_backups", "backstop_nonadmin_restores")
	})
	t.Run("each schedule's series at 0", func(t *testing.T) {
		compare(t, `
# HELP velero_backup_failure_total [ALPHA] Total number of failed backups
# TYPE velero_backup_failure_total counter
velero_backup_failure_total{schedule=""} 0
velero_backup_failure_total{schedule="nightly"} 0
# HELP velero_backup_last_status [ALPHA] Last status of the backup. A value of 1 is success, 0 is failure
# TYPE velero_backup_last_status gauge
velero_backup_last_status{schedule=""} 1
velero_backup_last_status{schedule="nightly"} 1
# HELP velero_volume_snapshot_attempt_total [ALPHA] Total number of attempted volume snapshots
# TYPE velero_volume_snapshot_attempt_total counter
velero_volume_snapshot_attempt_total{schedule=""} 0
velero_volume_snapshot_attempt_total{schedule="nightly"} 0
# HELP velero_csi_snapshot_attempt_total [ALPHA] Total number of CSI attempted volume snapshots
# TYPE velero_csi_snapshot_attempt_total counter
velero_csi_snapshot_attempt_total{backupName="",schedule=""} 0
velero_csi_snapshot_attempt_total{backupName="",schedule="nightly"} 0
`, "velero_backup_failure_total", "velero_backup_last_status", "velero_volume_snapshot_attempt_total", "velero_csi_snapshot_attempt_total")
	})
	t.Run("gone with the schedule and the location", func(t *testing.T) {
		if err := schedules.Delete(&velerov1.Schedule{ObjectMeta: meta("nightly", now, "")}); err != nil {
			t.Fatal(err)
		}
		if err := locations.Delete(&velerov1.BackupStorageLocation{ObjectMeta: meta("offsite", now, "")}); err != nil {
			t.Fatal(err)
		}
		if err := s.Resync(); err != nil {
			t.Fatal(err)
		}
		compare(t, `
# HELP velero_backup_failure_total [ALPHA] Total number of failed backups
# TYPE velero_backup_failure_total counter
velero_backup_failure_total{schedule=""} 0
# HELP velero_backup_location_status_gauge [ALPHA] The status of backup storage locations. 1 is Available, 0 is Unavailable
# TYPE velero_backup_location_status_gauge gauge
velero_backup_location_status_gauge{backup_location_name="default"} 1
`, "velero_backup_failure_total", "velero_backup_location_status_gauge")
	})
}

// TestValidationFailuresAndWaits: a backup refused by validation sets the
// last status to 0 and a refused restore counts as an attempt (as in
// Velero); a start observes the wait since the object's creation.
func TestValidationFailuresAndWaits(t *testing.T) {
	reg := metrics.NewKubeRegistry()
	r := New(reg.MustRegister)
	created := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	r.InitSchedule("")
	r.Transition(ctx, status.Transition{New: &velerov1.Backup{ObjectMeta: meta("bad", created, "")}, From: "", To: string(velerov1.BackupPhaseFailedValidation)})
	r.Transition(ctx, status.Transition{New: &velerov1.Restore{ObjectMeta: meta("bad", created, "")}, From: "", To: string(velerov1.RestorePhaseFailedValidation)})
	started := &velerov1.Backup{ObjectMeta: meta("ok", created, ""), Status: velerov1.BackupStatus{StartTimestamp: &metav1.Time{Time: created.Add(20 * time.Second)}}}
	r.Transition(ctx, status.Transition{New: started, From: string(velerov1.BackupPhaseReadyToStart), To: string(velerov1.BackupPhaseInProgress)})
	if err := promtestutil.GatherAndCompare(reg, strings.NewReader(`
# HELP velero_backup_last_status [ALPHA] Last status of the backup. A value of 1 is success, 0 is failure
# TYPE velero_backup_last_status gauge
velero_backup_last_status{schedule=""} 0
# HELP velero_restore_attempt_total [ALPHA] Total number of attempted restores
# TYPE velero_restore_attempt_total counter
velero_restore_attempt_total{schedule=""} 1
# HELP velero_restore_validation_failed_total [ALPHA] Total number of failed restores failing validations
# TYPE velero_restore_validation_failed_total counter
velero_restore_validation_failed_total{schedule=""} 1
# HELP backstop_backup_queue_wait_seconds [ALPHA] Time a backup waited from its creation to its start, in seconds
# TYPE backstop_backup_queue_wait_seconds histogram
backstop_backup_queue_wait_seconds_bucket{schedule="",le="1"} 0
backstop_backup_queue_wait_seconds_bucket{schedule="",le="5"} 0
backstop_backup_queue_wait_seconds_bucket{schedule="",le="15"} 0
backstop_backup_queue_wait_seconds_bucket{schedule="",le="30"} 1
backstop_backup_queue_wait_seconds_bucket{schedule="",le="60"} 1
backstop_backup_queue_wait_seconds_bucket{schedule="",le="300"} 1
backstop_backup_queue_wait_seconds_bucket{schedule="",le="900"} 1
backstop_backup_queue_wait_seconds_bucket{schedule="",le="1800"} 1
backstop_backup_queue_wait_seconds_bucket{schedule="",le="3600"} 1
backstop_backup_queue_wait_seconds_bucket{schedule="",le="14400"} 1
backstop_backup_queue_wait_seconds_bucket{schedule="",le="+Inf"} 1
backstop_backup_queue_wait_seconds_sum{schedule=""} 20
backstop_backup_queue_wait_seconds_count{schedule=""} 1
`), "velero_backup_last_status", "velero_restore_attempt_total", "velero_restore_validation_failed_total", "backstop_backup_queue_wait_seconds"); err != nil {
		t.Error(err)
	}
}

// TestDeletionsUnderTheBackupsSchedule: a deletion request's result is
// counted under its backup's schedule (requests carry none), and only
// for a request that marked its backup Deleting.
func TestDeletionsUnderTheBackupsSchedule(t *testing.T) {
	reg := metrics.NewKubeRegistry()
	r := New(reg.MustRegister)
	ctx := context.Background()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	processed := func(backup string, errs ...string) {
		req := &velerov1.DeleteBackupRequest{ObjectMeta: meta("del-"+backup, now, ""), Spec: velerov1.DeleteBackupRequestSpec{BackupName: backup},
			Status: velerov1.DeleteBackupRequestStatus{Errors: errs}}
		r.Transition(ctx, status.Transition{New: req, From: string(velerov1.DeleteBackupRequestPhaseInProgress), To: string(velerov1.DeleteBackupRequestPhaseProcessed)})
	}
	for _, name := range []string{"n1", "n2"} {
		r.Transition(ctx, status.Transition{New: &velerov1.Backup{ObjectMeta: meta(name, now, "nightly")},
			From: string(velerov1.BackupPhaseCompleted), To: string(velerov1.BackupPhaseDeleting)})
	}
	processed("n1")
	processed("n2", "the storage location is unavailable")
	processed("never-marked", "backup never-marked not found")
	processed("n1") // a second request for the same backup: counted once
	if err := promtestutil.GatherAndCompare(reg, strings.NewReader(`
# HELP velero_backup_deletion_attempt_total [ALPHA] Total number of attempted backup deletions
# TYPE velero_backup_deletion_attempt_total counter
velero_backup_deletion_attempt_total{schedule="nightly"} 2
# HELP velero_backup_deletion_failure_total [ALPHA] Total number of failed backup deletions
# TYPE velero_backup_deletion_failure_total counter
velero_backup_deletion_failure_total{schedule="nightly"} 1
# HELP velero_backup_deletion_success_total [ALPHA] Total number of successful backup deletions
# TYPE velero_backup_deletion_success_total counter
velero_backup_deletion_success_total{schedule="nightly"} 1
`), "velero_backup_deletion_attempt_total", "velero_backup_deletion_success_total", "velero_backup_deletion_failure_total"); err != nil {
		t.Error(err)
	}
}

// TestDataMoverAndMaintenance: uploads and downloads that end are counted
// by node as Velero's node agent counts them; repository maintenance runs
// by repository.
func TestDataMoverAndMaintenance(t *testing.T) {
	reg := metrics.NewKubeRegistry()
	r := New(reg.MustRegister)
	ctx := context.Background()
	upload := func(to velerov2alpha1.DataUploadPhase) {
		r.Transition(ctx, status.Transition{New: &velerov2alpha1.DataUpload{Status: velerov2alpha1.DataUploadStatus{Node: "node-a", Phase: to}},
			From: string(velerov2alpha1.DataUploadPhaseInProgress), To: string(to)})
	}
	upload(velerov2alpha1.DataUploadPhaseCompleted)
	upload(velerov2alpha1.DataUploadPhaseCompleted)
	upload(velerov2alpha1.DataUploadPhaseFailed)
	upload(velerov2alpha1.DataUploadPhaseCanceled)
	r.Transition(ctx, status.Transition{New: &velerov2alpha1.DataDownload{Status: velerov2alpha1.DataDownloadStatus{Node: "node-b"}},
		From: string(velerov2alpha1.DataDownloadPhaseInProgress), To: string(velerov2alpha1.DataDownloadPhaseCompleted)})
	r.RepositoryMaintenance("default-shop-kopia", true, 90*time.Second)
	r.RepositoryMaintenance("default-shop-kopia", false, 10*time.Second)
	if err := promtestutil.GatherAndCompare(reg, strings.NewReader(`
# HELP podVolume_data_upload_success_total [ALPHA] Total number of successful uploaded snapshots
# TYPE podVolume_data_upload_success_total counter
podVolume_data_upload_success_total{node="node-a"} 2
# HELP podVolume_data_upload_failure_total [ALPHA] Total number of failed uploaded snapshots
# TYPE podVolume_data_upload_failure_total counter
podVolume_data_upload_failure_total{node="node-a"} 1
# HELP podVolume_data_upload_cancel_total [ALPHA] Total number of canceled uploaded snapshots
# TYPE podVolume_data_upload_cancel_total counter
podVolume_data_upload_cancel_total{node="node-a"} 1
# HELP podVolume_data_download_success_total [ALPHA] Total number of successful downloaded snapshots
# TYPE podVolume_data_download_success_total counter
podVolume_data_download_success_total{node="node-b"} 1
# HELP velero_repo_maintenance_success_total [ALPHA] Total number of successful repo maintenance
# TYPE velero_repo_maintenance_success_total counter
velero_repo_maintenance_success_total{repository_name="default-shop-kopia"} 1
# HELP velero_repo_maintenance_failure_total [ALPHA] Total number of failed repo maintenance
# TYPE velero_repo_maintenance_failure_total counter
velero_repo_maintenance_failure_total{repository_name="default-shop-kopia"} 1
`), "podVolume_data_upload_success_total", "podVolume_data_upload_failure_total", "podVolume_data_upload_cancel_total",
		"podVolume_data_download_success_total", "velero_repo_maintenance_success_total", "velero_repo_maintenance_failure_total"); err != nil {
		t.Error(err)
	}
}

// TestOutcomesAtZero: the outcomes Backstop's alerts count increases of
// exist at 0 before the first one, so that it is an increase: each
// verification result from a schedule's creation (and gone with it), a
// namespace's VM backup successes and failures from its first attempt.
func TestOutcomesAtZero(t *testing.T) {
	reg := metrics.NewKubeRegistry()
	r := New(reg.MustRegister)
	r.InitSchedule("nightly")
	r.Transition(context.Background(), status.Transition{New: &kv.VirtualMachineBackup{ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: "shop"}},
		From: string(kv.BackupPending), To: string(kv.BackupRunning)})
	if err := promtestutil.GatherAndCompare(reg, strings.NewReader(`
# HELP backstop_backup_verification_total [ALPHA] Total number of backup verifications, by result (Verified, Corrupt, NothingToVerify, LocationUnreadable)
# TYPE backstop_backup_verification_total counter
backstop_backup_verification_total{result="Corrupt",schedule="nightly"} 0
backstop_backup_verification_total{result="LocationUnreadable",schedule="nightly"} 0
backstop_backup_verification_total{result="NoManifest",schedule="nightly"} 0
backstop_backup_verification_total{result="NothingToVerify",schedule="nightly"} 0
backstop_backup_verification_total{result="Verified",schedule="nightly"} 0
# HELP backstop_vm_backup_attempt_total [ALPHA] Total number of attempted VirtualMachineBackups
# TYPE backstop_vm_backup_attempt_total counter
backstop_vm_backup_attempt_total{namespace="shop"} 1
# HELP backstop_vm_backup_failure_total [ALPHA] Total number of failed VirtualMachineBackups
# TYPE backstop_vm_backup_failure_total counter
backstop_vm_backup_failure_total{namespace="shop"} 0
# HELP backstop_vm_backup_success_total [ALPHA] Total number of completed VirtualMachineBackups
# TYPE backstop_vm_backup_success_total counter
backstop_vm_backup_success_total{namespace="shop"} 0
`), "backstop_backup_verification_total", "backstop_vm_backup_attempt_total", "backstop_vm_backup_failure_total", "backstop_vm_backup_success_total"); err != nil {
		t.Error(err)
	}
	r.RemoveSchedule("nightly")
	if n, err := promtestutil.GatherAndCount(reg, "backstop_backup_verification_total", "backstop_backup_verification_bytes_total"); err != nil || n != 0 {
		t.Errorf("after the schedule is gone: %d verification series (%v), want none", n, err)
	}
}
