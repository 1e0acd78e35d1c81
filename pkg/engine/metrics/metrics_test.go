package metrics

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/status"
)

// TestBackupTransitions: a scheduled backup's life is counted with
// Velero's names and labels.
func TestBackupTransitions(t *testing.T) {
	reg := metrics.NewKubeRegistry()
	r := New(reg.MustRegister)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{velerov1.ScheduleNameLabel: "nightly"}}}
	step := func(from, to velerov1.BackupPhase) {
		b = b.DeepCopy()
		b.Status.Phase = to
		r.Transition(context.Background(), status.Transition{New: b, From: string(from), To: string(to)})
	}
	step("", velerov1.BackupPhaseQueued)
	step(velerov1.BackupPhaseQueued, velerov1.BackupPhaseReadyToStart)
	b.Status.StartTimestamp = &metav1.Time{Time: start}
	step(velerov1.BackupPhaseReadyToStart, velerov1.BackupPhaseInProgress)
	b.Status.CSIVolumeSnapshotsAttempted, b.Status.CSIVolumeSnapshotsCompleted = 3, 2
	step(velerov1.BackupPhaseInProgress, velerov1.BackupPhaseFinalizing)
	b.Status.CompletionTimestamp = &metav1.Time{Time: start.Add(90 * time.Second)}
	b.Status.Progress = &velerov1.BackupProgress{ItemsBackedUp: 42, TotalItems: 42}
	step(velerov1.BackupPhaseFinalizing, velerov1.BackupPhaseCompleted)

	for _, c := range []struct {
		name string
		get  func() (float64, error)
		want float64
	}{
		{"velero_backup_attempt_total", func() (float64, error) {
			return testutil.GetCounterMetricValue(r.backupAttempt.WithLabelValues("nightly"))
		}, 1},
		{"velero_backup_success_total", func() (float64, error) {
			return testutil.GetCounterMetricValue(r.backupSuccess.WithLabelValues("nightly"))
		}, 1},
		{"velero_backup_failure_total", func() (float64, error) {
			return testutil.GetCounterMetricValue(r.backupFailure.WithLabelValues("nightly"))
		}, 0},
		{"velero_csi_snapshot_attempt_total", func() (float64, error) {
			return testutil.GetCounterMetricValue(r.csiAttempt.WithLabelValues("nightly", "b"))
		}, 3},
		{"velero_csi_snapshot_success_total", func() (float64, error) {
			return testutil.GetCounterMetricValue(r.csiSuccess.WithLabelValues("nightly", "b"))
		}, 2},
		{"velero_csi_snapshot_failure_total", func() (float64, error) {
			return testutil.GetCounterMetricValue(r.csiFailure.WithLabelValues("nightly", "b"))
		}, 1},
		{"velero_backup_items_total", func() (float64, error) { return testutil.GetGaugeMetricValue(r.backupItems.WithLabelValues("nightly")) }, 42},
		{"velero_backup_last_status", func() (float64, error) {
			return testutil.GetGaugeMetricValue(r.backupLastStatus.WithLabelValues("nightly"))
		}, 1},
		{"velero_backup_last_successful_timestamp", func() (float64, error) {
			return testutil.GetGaugeMetricValue(r.backupLastSuccess.WithLabelValues("nightly"))
		}, float64(start.Add(90 * time.Second).Unix())},
	} {
		if got, err := c.get(); err != nil || got != c.want {
			t.Errorf("%s{schedule=nightly} = %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	// The names are served as Velero's.
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, f := range families {
		served[f.GetName()] = true
	}
	for _, name := range []string{"velero_backup_attempt_total", "velero_backup_success_total", "velero_backup_duration_seconds", "velero_backup_last_successful_timestamp",
		"velero_csi_snapshot_attempt_total", "velero_csi_snapshot_success_total", "velero_csi_snapshot_failure_total"} {
		if !served[name] {
			t.Errorf("%s is not gathered (have %v)", name, served)
		}
	}
	if n, err := testutil.GetHistogramMetricCount(r.backupDuration.WithLabelValues("nightly")); err != nil || n != 1 {
		t.Errorf("backup_duration_seconds observations: %d, %v; want 1", n, err)
	}
}
