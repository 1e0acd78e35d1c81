// Package restoreaction holds the restore item actions: the rules a restore
// applies to one item before writing it, for what a real cluster enforces
// or assigns itself (Service IPs and node ports, pods and ReplicaSets their
// controllers recreate, Job selectors, service account tokens, binding
// subjects and volume claims under namespaceMapping, endpoints). They are
// the mirror of the backup side's item actions and follow Velero's restore
// item actions (pkg/restore/actions in Velero), in one place: the restore
// engine runs every action that applies to an item, in order.
package restoreaction

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/volumeinfo"
)

// Input is one item on its way into the target cluster.
type Input struct {
	// Item is what will be written: metadata reset, namespace mapped,
	// restore labels set. Actions change it in place.
	Item *unstructured.Unstructured
	// FromBackup is the item as the backup holds it (read only).
	FromBackup *unstructured.Unstructured
	Restore    *velerov1.Restore
	// Volumes are the backup's volumes, as its volume info file has them
	// (nil: the backup has none, or no such file).
	Volumes volumeinfo.Index
}

// Result is what an action decided.
type Result struct {
	// Skip leaves the item out of the restore, for Reason.
	Skip   bool
	Reason string
}

// Action is one rule.
type Action interface {
	// Name says what the action is, in the restore log.
	Name() string
	// AppliesTo are the group resources ("services", "jobs.batch") whose
	// items the action sees.
	AppliesTo() []string
	// Execute changes in.Item or skips it. An error fails the item.
	Execute(in Input) (Result, error)
}

// Default are the actions every restore runs.
func Default() []Action {
	return []Action{
		Service{}, Pod{}, ControlledByOwner{}, Job{}, ServiceAccount{}, ServiceAccountToken{},
		BindingSubjects{}, PersistentVolumeClaim{}, ClaimFromMovedData{}, ClaimFromSnapshot{}, SnapshottedVolume{}, PersistentVolume{},
		VolumeSnapshotContent{}, VolumeSnapshot{}, ManagedEndpoints{},
	}
}

// Run applies the actions that apply to groupResource, in order, until one
// skips the item.
func Run(actions []Action, groupResource string, in Input) (Result, error) {
	for _, a := range actions {
		if !applies(a, groupResource) {
			continue
		}
		res, err := a.Execute(in)
		if err != nil || res.Skip {
			return res, err
		}
	}
	return Result{}, nil
}

// Applies reports whether any of actions applies to groupResource.
func Applies(actions []Action, groupResource string) bool {
	for _, a := range actions {
		if applies(a, groupResource) {
			return true
		}
	}
	return false
}

func applies(a Action, groupResource string) bool {
	for _, gr := range a.AppliesTo() {
		if gr == groupResource {
			return true
		}
	}
	return false
}

// MapNamespace is where the restore r puts what namespace ns held (its
// namespaceMapping, or ns itself).
func MapNamespace(r *velerov1.Restore, ns string) string {
	if to, ok := r.Spec.NamespaceMapping[ns]; ok {
		return to
	}
	return ns
}
