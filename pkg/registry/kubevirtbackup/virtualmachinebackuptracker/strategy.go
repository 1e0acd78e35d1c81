// Package virtualmachinebackuptracker is the registry of backup.kubevirt.io
// VirtualMachineBackupTrackers: validation (spec immutable after creation)
// and kubectl columns (strategy.go) and the REST storage (storage.go).
package virtualmachinebackuptracker

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/kubevirtbackup"
	kubevirtbackupv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	vmvalidation "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/validation"
	oadpvalidation "github.com/backstop-io/backstop/pkg/apis/oadp/validation"
	"github.com/backstop-io/backstop/pkg/registry/resource"
	"github.com/backstop-io/backstop/pkg/registry/tenantlimits"
)

// Strategy is the VirtualMachineBackupTracker strategy.
type Strategy struct {
	resource.Strategy
	policy tenantlimits.PolicyFunc
	// total bounds a namespace's objects (tenantLimits).
	total *tenantlimits.Total
}

// NewStrategy returns the VirtualMachineBackupTracker strategy; policy
// (nil: none) reads the admin's tenant limits.
func NewStrategy(typer runtime.ObjectTyper, policy tenantlimits.PolicyFunc) Strategy {
	return Strategy{Strategy: resource.NewStrategy(typer, kubevirtbackupv1alpha1.SchemeGroupVersion.String()), policy: policy, total: tenantlimits.NewTotal("VirtualMachineBackupTracker", func(l oadpvalidation.Limits) int { return l.MaxVirtualMachineBackupTrackersPerNamespace })}
}

// Validate checks the metadata and the spec, and the namespace's total
// against the admin's tenant limits.
func (s Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	t := obj.(*kubevirtbackup.VirtualMachineBackupTracker)
	errs := append(s.Strategy.Validate(ctx, obj), vmvalidation.ValidateTrackerSpec(&t.Spec, field.NewPath("spec"))...)
	errs = append(errs, vmvalidation.ValidateTrackerAnnotations(t.Annotations, field.NewPath("metadata", "annotations"))...)
	policy, perrs := s.policy.Policy(ctx)
	errs = append(errs, perrs...)
	return append(errs, s.total.Check(ctx, t.Namespace, policy)...)
}

// ValidateUpdate refuses any change of the spec; annotations may change.
func (s Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	t, oldT := obj.(*kubevirtbackup.VirtualMachineBackupTracker), old.(*kubevirtbackup.VirtualMachineBackupTracker)
	errs := s.Strategy.ValidateUpdate(ctx, obj, old)
	if t.Annotations[kubevirtbackupv1alpha1.ChangedBlockTrackingAnnotation] != oldT.Annotations[kubevirtbackupv1alpha1.ChangedBlockTrackingAnnotation] {
		// Checked when it changes: a tracker stored before the rule
		// existed can still be updated.
		errs = append(errs, vmvalidation.ValidateTrackerAnnotations(t.Annotations, field.NewPath("metadata", "annotations"))...)
	}
	if !resource.DeepEqual(t.Spec, oldT.Spec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), "spec is immutable after creation"))
	}
	return errs
}

// StatusStrategy is the strategy of the status subresource: only the
// server's engines write it (the checkpoint by the VM backup engine, the
// changed block tracking state by the vmcbt engine, along
// kubevirtbackupv1alpha1.ChangedBlockTrackingLifecycle); the latest
// checkpoint lists its disks in both spellings (volumes and disks).
type StatusStrategy struct{ resource.StatusStrategy }

// NewStatusStrategy returns the status strategy beside s.
func NewStatusStrategy(s Strategy) StatusStrategy {
	return StatusStrategy{resource.NewLifecycleStatusStrategy(s.Strategy, kubevirtbackupv1alpha1.ChangedBlockTrackingLifecycle, cbtState,
		field.NewPath("status", "changedBlockTracking", "state"))}
}

func cbtState(obj runtime.Object) kubevirtbackupv1alpha1.ChangedBlockTrackingState {
	st := obj.(*kubevirtbackup.VirtualMachineBackupTracker).Status
	if st == nil || st.ChangedBlockTracking == nil {
		return ""
	}
	return kubevirtbackupv1alpha1.ChangedBlockTrackingState(st.ChangedBlockTracking.State)
}

// PrepareForUpdate keeps the spec and normalizes the checkpoint.
func (s StatusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	s.StatusStrategy.PrepareForUpdate(ctx, obj, old)
	if st := obj.(*kubevirtbackup.VirtualMachineBackupTracker).Status; st != nil {
		vmvalidation.NormalizeCheckpoint(st.LatestCheckpoint)
	}
}

// Table renders VirtualMachineBackupTrackers.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "VM", Type: "string", Description: "VirtualMachine tracked", Cell: func(o runtime.Object) any {
		return o.(*kubevirtbackup.VirtualMachineBackupTracker).Spec.Source.Name
	}},
	resource.Column{Name: "Latest Checkpoint", Type: "string", Description: "Checkpoint of the latest backup", Cell: func(o runtime.Object) any {
		if st := o.(*kubevirtbackup.VirtualMachineBackupTracker).Status; st != nil && st.LatestCheckpoint != nil {
			return st.LatestCheckpoint.Name
		}
		return "<none>"
	}},
	resource.Column{Name: "CBT", Type: "string", Description: "Changed block tracking state of the VM", Cell: func(o runtime.Object) any {
		if st := o.(*kubevirtbackup.VirtualMachineBackupTracker).Status; st != nil && st.ChangedBlockTracking != nil && st.ChangedBlockTracking.State != "" {
			return string(st.ChangedBlockTracking.State)
		}
		return "<none>"
	}},
	resource.AgeColumn,
)
