package events

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/status"
)

// TestTransitionEvents: each transition is an Event whose reason is the
// new phase, Warning when it ends badly, saying why when the status does.
func TestTransitionEvents(t *testing.T) {
	failed := &velerov1.Backup{Status: velerov1.BackupStatus{Phase: velerov1.BackupPhaseFailed, FailureReason: "Backup cancelled by user"}}
	vmb := &kv.VirtualMachineBackup{Status: &kv.VirtualMachineBackupStatus{Conditions: []metav1.Condition{
		{Type: "Complete", Status: metav1.ConditionTrue, Reason: "Completed", Message: "Full backup of 1 disk(s), 4096 bytes copied"}}}}
	for _, c := range []struct {
		t    status.Transition
		want string
	}{
		{status.Transition{New: &velerov1.Backup{}, From: "", To: "Queued", Engine: "backup-queue"}, "Normal Queued new → Queued (backup-queue)"},
		{status.Transition{New: failed, From: "FinalizingCancelled", To: "Failed", Engine: "backup"},
			"Warning Failed FinalizingCancelled → Failed (backup): Backup cancelled by user"},
		{status.Transition{New: vmb, From: "Running", To: "Complete", Engine: "vmbackup"},
			"Normal Complete Running → Complete (vmbackup): Full backup of 1 disk(s), 4096 bytes copied"},
	} {
		rec := record.NewFakeRecorder(1)
		Observer{Recorder: rec}.Transition(context.Background(), c.t)
		if got := <-rec.Events; got != c.want {
			t.Errorf("event %q, want %q", got, c.want)
		}
	}
}
