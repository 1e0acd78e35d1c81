package backup

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/registry/queueindex"
)

// queued is the internal spelling of the Queued phase.
const queued = velero.BackupPhase(velerov1.BackupPhaseQueued)

// QueueIndex orders the Queued backups of the admin namespace by turn and
// sequence (package queueindex), the owners taking turns
// (velerov1.QueueOwner): status.queuePosition is filled in when a backup
// is read, never stored.
type QueueIndex = queueindex.Index[*velero.Backup]

// NewQueueIndex returns the index of namespace (Run keeps it current).
func NewQueueIndex(namespace string) *QueueIndex {
	return queueindex.NewFair(namespace, func(b *velero.Backup) bool { return b.Status.Phase == queued },
		func(b *velero.Backup) string { return velerov1.QueueOwner(b) })
}

// queueFilled reports a served Backup whose queue position queueFill
// filled in (it is stored as 0).
func queueFilled(obj runtime.Object) bool {
	b, ok := obj.(*velerov1.Backup)
	return ok && b.Status.QueuePosition != 0
}

// queueFill sets status.queuePosition of a Backup or of the items of a
// BackupList: for a Queued backup, the number of queued backups before it
// in the index's order, plus one.
func queueFill(x *QueueIndex) func(runtime.Object) {
	return func(obj runtime.Object) {
		switch o := obj.(type) {
		case *velero.Backup:
			o.Status.QueuePosition = x.PositionOf(o)
		case *velero.BackupList:
			for i := range o.Items {
				o.Items[i].Status.QueuePosition = x.PositionOf(&o.Items[i])
			}
		}
	}
}
