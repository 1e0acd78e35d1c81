// Package restore is the registry of velero.io Restores: validation and kubectl columns (strategy.go) and the REST storage (storage.go).
package restore

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerovalidation "github.com/backstop-io/backstop/pkg/apis/velero/validation"
	"github.com/backstop-io/backstop/pkg/registry/queueindex"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// Strategy is the Restore strategy: a new restore of the admin namespace
// enters the restore queue (its sequence, velerov1.QueueSequenceAnnotation,
// set here only and kept on every update); the restore engine starts
// restores in that order, several at once where they do not overlap.
type Strategy struct {
	resource.Strategy
	queue *QueueIndex
}

// NewStrategy returns the Restore strategy; queue (nil: none) orders the
// restores waiting to run.
func NewStrategy(typer runtime.ObjectTyper, queue *QueueIndex) Strategy {
	s := resource.NewStrategy(typer, velerov1.SchemeGroupVersion.String())
	s.ValidateObject = validate
	s.Finalizers = []string{velerov1.RestoreDataFinalizer}
	return Strategy{Strategy: s, queue: queue}
}

// PrepareForCreate gives the restore its place in the queue.
func (s Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	s.Strategy.PrepareForCreate(ctx, obj)
	r := obj.(*velero.Restore)
	delete(r.Annotations, velerov1.QueueSequenceAnnotation)
	if s.queue == nil {
		return
	}
	queueindex.SetSequence(r, s.queue.NextSequence())
}

// PrepareForUpdate keeps the queue sequence.
func (s Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	s.Strategy.PrepareForUpdate(ctx, obj, old)
	queueindex.KeepSequence(obj.(*velero.Restore), old.(*velero.Restore))
}

// QueueIndex orders the restores of the admin namespace that wait to run
// (phase New), by sequence.
type QueueIndex = queueindex.Index[*velero.Restore]

// NewQueueIndex returns the restore queue of namespace (Run keeps it
// current).
func NewQueueIndex(namespace string) *QueueIndex {
	return queueindex.New(namespace, Waiting)
}

// Waiting says whether a restore waits to run.
func Waiting(r *velero.Restore) bool {
	return r.Status.Phase == "" || r.Status.Phase == velero.RestorePhase(velerov1.RestorePhaseNew)
}

// NewStatusStrategy returns the strategy of the status subresource: only
// the server's engines write it, along velerov1.RestoreLifecycle.
func NewStatusStrategy(s Strategy) StatusStrategy {
	return StatusStrategy{resource.NewLifecycleStatusStrategy(s.Strategy, velerov1.RestoreLifecycle, func(o runtime.Object) velerov1.RestorePhase {
		return velerov1.RestorePhase(o.(*velero.Restore).Status.Phase)
	}, field.NewPath("status", "phase"))}
}

// StatusStrategy is the strategy of the status subresource.
type StatusStrategy struct {
	resource.StatusStrategy
}

// PrepareForUpdate stores no queue position: it is filled in when the
// restore is read (queueFill).
func (s StatusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	s.StatusStrategy.PrepareForUpdate(ctx, obj, old)
	obj.(*velero.Restore).Status.QueuePosition = 0
}

// queueFilled reports a served Restore whose queue position queueFill
// filled in (it is stored as 0).
func queueFilled(obj runtime.Object) bool {
	r, ok := obj.(*velerov1.Restore)
	return ok && r.Status.QueuePosition != 0
}

// queueFill sets status.queuePosition of a Restore or of the items of a
// RestoreList: for a waiting restore, the number of waiting sequences
// before its own, plus one; 0 for the others.
func queueFill(x *QueueIndex) func(runtime.Object) {
	return func(obj runtime.Object) {
		switch o := obj.(type) {
		case *velero.Restore:
			o.Status.QueuePosition = x.PositionOf(o)
		case *velero.RestoreList:
			for i := range o.Items {
				o.Items[i].Status.QueuePosition = x.PositionOf(&o.Items[i])
			}
		}
	}
}

func validate(obj runtime.Object) field.ErrorList {
	return velerovalidation.ValidateRestoreSpec(&obj.(*velero.Restore).Spec, field.NewPath("spec"))
}

// Table renders restores for kubectl get.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Backup", Type: "string", Description: "Backup restored from", Cell: func(o runtime.Object) any { return string(o.(*velero.Restore).Spec.BackupName) }},
	resource.Column{Name: "Status", Type: "string", Description: "Phase of the restore", Cell: func(o runtime.Object) any { return string(o.(*velero.Restore).Status.Phase) }},
	resource.Column{Name: "Started", Type: "string", Description: "Time since the restore started", Cell: func(o runtime.Object) any { return resource.SinceP(o.(*velero.Restore).Status.StartTimestamp) }},
	resource.Column{Name: "Completed", Type: "string", Description: "Time since the restore completed", Cell: func(o runtime.Object) any { return resource.SinceP(o.(*velero.Restore).Status.CompletionTimestamp) }},
	resource.Column{Name: "Errors", Type: "integer", Description: "Errors during the restore", Cell: func(o runtime.Object) any { return int64(o.(*velero.Restore).Status.Errors) }},
	resource.Column{Name: "Warnings", Type: "integer", Description: "Warnings during the restore", Cell: func(o runtime.Object) any { return int64(o.(*velero.Restore).Status.Warnings) }},
	resource.AgeColumn,
	resource.Column{Name: "Selector", Type: "string", Description: "Label selector of the restore", Cell: func(o runtime.Object) any { return resource.Selector(o.(*velero.Restore).Spec.LabelSelector) }},
)
