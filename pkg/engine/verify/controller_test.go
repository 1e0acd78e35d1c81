package verify

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

// TestVerificationDecisions: what a backup needs, from its phase, its request and its
// location's period.
func TestVerificationDecisions(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }
	backup := func(phase velerov1.BackupPhase, request string, last *velerov1.BackupVerification) *velerov1.Backup {
		b := &velerov1.Backup{Status: velerov1.BackupStatus{Phase: phase, Verification: last}}
		if request != "" {
			b.Annotations = map[string]string{velerov1.VerifyAnnotation: request}
		}
		return b
	}
	deleted := backup(velerov1.BackupPhaseCompleted, "r1", nil)
	deleted.DeletionTimestamp = at(0)
	for _, tc := range []struct {
		name   string
		b      *velerov1.Backup
		period time.Duration
		want   decision
	}{
		{"requested, completed", backup(velerov1.BackupPhaseCompleted, "r1", nil), 0, decision{action: verify, request: "r1"}},
		{"requested, partially failed", backup(velerov1.BackupPhasePartiallyFailed, "r1", nil), 0, decision{action: verify, request: "r1"}},
		{"requested again", backup(velerov1.BackupPhaseCompleted, "r2", &velerov1.BackupVerification{Request: "r1", CompletionTimestamp: at(-time.Minute)}), 0,
			decision{action: verify, request: "r2"}},
		{"request answered", backup(velerov1.BackupPhaseCompleted, "r1", &velerov1.BackupVerification{Request: "r1", CompletionTimestamp: at(-time.Minute)}), 0,
			decision{action: wait}},
		{"request answered, a verification cut short by a restart", backup(velerov1.BackupPhaseCompleted, "r2", &velerov1.BackupVerification{Request: "r1", StartTimestamp: at(-time.Hour)}), 0,
			decision{action: verify, request: "r2"}},
		{"requested while running", backup(velerov1.BackupPhaseInProgress, "r1", nil), time.Hour, decision{action: wait}},
		{"requested while finalizing", backup(velerov1.BackupPhaseFinalizing, "r1", nil), 0, decision{action: wait}},
		{"requested, failed", backup(velerov1.BackupPhaseFailed, "r1", nil), 0, decision{action: noData, request: "r1"}},
		{"failed, a period", backup(velerov1.BackupPhaseFailed, "", nil), time.Hour, decision{action: wait}},
		{"requested, deleting", backup(velerov1.BackupPhaseDeleting, "r1", nil), 0, decision{action: wait}},
		{"requested, deleted", deleted, time.Hour, decision{action: wait}},
		{"no request, no period", backup(velerov1.BackupPhaseCompleted, "", nil), 0, decision{action: wait}},
		{"a period, never verified", backup(velerov1.BackupPhaseCompleted, "", nil), time.Hour, decision{action: verify}},
		{"a period, due", backup(velerov1.BackupPhaseCompleted, "", &velerov1.BackupVerification{CompletionTimestamp: at(-time.Hour)}), time.Hour,
			decision{action: verify}},
		{"a period, due, the last request kept", backup(velerov1.BackupPhaseCompleted, "r1", &velerov1.BackupVerification{Request: "r1", CompletionTimestamp: at(-2 * time.Hour)}), time.Hour,
			decision{action: verify, request: "r1"}},
		{"a period, not due", backup(velerov1.BackupPhaseCompleted, "", &velerov1.BackupVerification{CompletionTimestamp: at(-20 * time.Minute)}), time.Hour,
			decision{action: wait, after: 40 * time.Minute}},
		{"a period, running since a restart", backup(velerov1.BackupPhaseCompleted, "", &velerov1.BackupVerification{StartTimestamp: at(-time.Minute)}), time.Hour,
			decision{action: verify}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide(tc.b, tc.period, now); got != tc.want {
				t.Errorf("decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}
