// Package events turns the phase transitions the engines write into
// Kubernetes Events on the objects, what `kubectl describe` shows under
// Events. It runs in aggregated mode, where the host cluster keeps Events
// (standalone Backstop serves no core API). It is a status.Observer, so
// every transition made through the engines' status writer is recorded.
package events

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/status"
)

// Observer records an Event for each transition.
type Observer struct {
	Recorder record.EventRecorder
}

var _ status.Observer = Observer{}

// warnings are the phases that end badly (Failed is also the failed
// state of a VirtualMachineBackup, and of a Restore).
var warnings = map[string]bool{
	string(velerov1.BackupPhaseFailed): true, string(velerov1.BackupPhasePartiallyFailed): true,
	string(velerov1.BackupPhaseFailedValidation): true, string(velerov1.BackupPhaseWaitingForPluginOperationsPartiallyFailed): true,
	string(velerov1.BackupPhaseFinalizingPartiallyFailed):  true,
	string(velerov1.BackupStorageLocationPhaseUnavailable): true,
}

// Transition records t on the object: reason the new phase, a message
// saying from where, by which engine, and why when the status says.
func (o Observer) Transition(_ context.Context, t status.Transition) {
	kind := corev1.EventTypeNormal
	if warnings[t.To] {
		kind = corev1.EventTypeWarning
	}
	from := t.From
	if from == "" {
		from = "new"
	}
	msg := fmt.Sprintf("%s → %s (%s)", from, t.To, t.Engine)
	if why := reason(t); why != "" {
		msg += ": " + why
	}
	o.Recorder.Event(t.New, kind, t.To, msg)
}

// reason is what the new status says about why, if anything.
func reason(t status.Transition) string {
	switch o := t.New.(type) {
	case *velerov1.Backup:
		if o.Status.FailureReason != "" {
			return o.Status.FailureReason
		}
		return strings.Join(o.Status.ValidationErrors, "; ")
	case *velerov1.Restore:
		if o.Status.FailureReason != "" {
			return o.Status.FailureReason
		}
		return strings.Join(o.Status.ValidationErrors, "; ")
	case *velerov1.DeleteBackupRequest:
		return strings.Join(o.Status.Errors, "; ")
	case *kv.VirtualMachineBackup:
		if o.Status == nil {
			return ""
		}
		for _, c := range o.Status.Conditions {
			if c.Type == t.To && c.Message != "" {
				return c.Message
			}
		}
	}
	return ""
}
