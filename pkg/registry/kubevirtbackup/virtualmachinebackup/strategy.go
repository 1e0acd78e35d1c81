// Package virtualmachinebackup is the registry of backup.kubevirt.io
// VirtualMachineBackups: normalization of the proposal's spellings, validation
// (spec immutable after creation) and kubectl columns (strategy.go) and the
// REST storage (storage.go).
package virtualmachinebackup

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/kubevirtbackup"
	kubevirtbackupv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	vmvalidation "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/validation"
	oadpvalidation "github.com/backstop-io/backstop/pkg/apis/oadp/validation"
	"github.com/backstop-io/backstop/pkg/registry/resource"
	"github.com/backstop-io/backstop/pkg/registry/tenantlimits"
)

// Strategy is the VirtualMachineBackup strategy.
type Strategy struct {
	resource.Strategy
	policy tenantlimits.PolicyFunc
	// total bounds a namespace's objects (tenantLimits).
	total *tenantlimits.Total
}

// NewStrategy returns the VirtualMachineBackup strategy; policy (nil:
// none) reads the admin's tenant limits.
func NewStrategy(typer runtime.ObjectTyper, policy tenantlimits.PolicyFunc) Strategy {
	s := resource.NewStrategy(typer, kubevirtbackupv1alpha1.SchemeGroupVersion.String())
	s.Finalizers = []string{kubevirtbackupv1alpha1.CleanupFinalizer}
	return Strategy{Strategy: s, policy: policy, total: tenantlimits.NewTotal("VirtualMachineBackup", func(l oadpvalidation.Limits) int { return l.MaxVirtualMachineBackupsPerNamespace })}
}

// PrepareForCreate clears the status and normalizes the spec.
func (s Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	s.Strategy.PrepareForCreate(ctx, obj)
	vmvalidation.NormalizeBackupSpec(&obj.(*kubevirtbackup.VirtualMachineBackup).Spec)
}

// PrepareForUpdate normalizes the new spec so that re-sending the proposal's
// spelling is not mistaken for a change.
func (s Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	vmvalidation.NormalizeBackupSpec(&obj.(*kubevirtbackup.VirtualMachineBackup).Spec)
	s.Strategy.PrepareForUpdate(ctx, obj, old)
}

// Validate checks the metadata and the spec, and the namespace's total
// against the admin's tenant limits.
func (s Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	b := obj.(*kubevirtbackup.VirtualMachineBackup)
	errs := append(s.Strategy.Validate(ctx, obj), vmvalidation.ValidateBackupSpec(&b.Spec, field.NewPath("spec"))...)
	errs = append(errs, vmvalidation.ValidateBackupAnnotations(b.Annotations, field.NewPath("metadata", "annotations"))...)
	policy, perrs := s.policy.Policy(ctx)
	errs = append(errs, perrs...)
	return append(errs, s.total.Check(ctx, b.Namespace, policy)...)
}

// ValidateUpdate refuses any change of the spec and an un-cancel.
func (s Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	b, oldB := obj.(*kubevirtbackup.VirtualMachineBackup), old.(*kubevirtbackup.VirtualMachineBackup)
	errs := s.Strategy.ValidateUpdate(ctx, obj, old)
	if !resource.DeepEqual(b.Spec, oldB.Spec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), "spec is immutable after creation"))
	}
	errs = append(errs, vmvalidation.ValidateBackupAnnotations(b.Annotations, field.NewPath("metadata", "annotations"))...)
	return append(errs, validateCancel(b, oldB)...)
}

// StatusStrategy is the strategy of the status subresource: only the
// server's engines write it, along
// kubevirtbackupv1alpha1.VirtualMachineBackupLifecycle, and the conditions
// of a backup that has ended do not change again; it keeps status.type and
// status.backupType in agreement. The cancel annotation is set through the
// cancel subresource or the main resource, not here.
type StatusStrategy struct{ resource.StatusStrategy }

// NewStatusStrategy returns the status strategy beside s.
func NewStatusStrategy(s Strategy) StatusStrategy {
	st := resource.NewStatusStrategy(s.Strategy)
	st.EnginesOnly = kubevirtbackupv1alpha1.VirtualMachineBackupLifecycle.Kind
	st.ValidateStatus = validateStatus
	return StatusStrategy{st}
}

func validateStatus(_ context.Context, obj, old runtime.Object) field.ErrorList {
	b, oldB := obj.(*kubevirtbackup.VirtualMachineBackup), old.(*kubevirtbackup.VirtualMachineBackup)
	from, to := state(oldB), state(b)
	conds := field.NewPath("status", "conditions")
	errs := kubevirtbackupv1alpha1.VirtualMachineBackupLifecycle.ValidateChange(from, to, conds)
	if len(errs) == 0 && from.Terminal() && !resource.DeepEqual(conditionsOf(b), conditionsOf(oldB)) {
		errs = append(errs, field.Forbidden(conds, fmt.Sprintf("the backup has ended (%s): its conditions do not change", from)))
	}
	if _, was := oldB.Annotations[kubevirtbackupv1alpha1.CancelAnnotation]; !was {
		if _, is := b.Annotations[kubevirtbackupv1alpha1.CancelAnnotation]; is {
			errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(kubevirtbackupv1alpha1.CancelAnnotation),
				"cancellation is requested through the cancel subresource or the backup itself"))
		}
	}
	return append(errs, validateCancel(b, oldB)...)
}

func conditionsOf(b *kubevirtbackup.VirtualMachineBackup) []metav1.Condition {
	if b.Status == nil {
		return nil
	}
	return b.Status.Conditions
}

// PrepareForUpdate keeps the spec and normalizes the status.
func (s StatusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	s.StatusStrategy.PrepareForUpdate(ctx, obj, old)
	vmvalidation.NormalizeBackupStatus(obj.(*kubevirtbackup.VirtualMachineBackup).Status)
}

// Phase summarizes the conditions for kubectl: the state, with the
// Progressing reason while the backup waits or runs.
func Phase(b *kubevirtbackup.VirtualMachineBackup) string {
	s := state(b)
	if s == kubevirtbackupv1alpha1.BackupWaiting || s == kubevirtbackupv1alpha1.BackupRunning {
		if c := meta.FindStatusCondition(b.Status.Conditions, string(kubevirtbackupv1alpha1.ConditionProgressing)); c.Reason != "" {
			return c.Reason
		}
		return string(kubevirtbackupv1alpha1.ConditionProgressing)
	}
	return string(s)
}

// Table renders VirtualMachineBackups.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Type", Type: "string", Description: "Full or Incremental", Cell: func(o runtime.Object) any {
		if st := o.(*kubevirtbackup.VirtualMachineBackup).Status; st != nil {
			return string(st.Type)
		}
		return ""
	}},
	resource.Column{Name: "Phase", Type: "string", Description: "Summary of the conditions", Cell: func(o runtime.Object) any {
		return Phase(o.(*kubevirtbackup.VirtualMachineBackup))
	}},
	resource.Column{Name: "Checkpoint", Type: "string", Description: "Checkpoint created by the backup", Cell: func(o runtime.Object) any {
		if st := o.(*kubevirtbackup.VirtualMachineBackup).Status; st != nil && st.CheckpointName != nil {
			return *st.CheckpointName
		}
		return ""
	}},
	resource.AgeColumn,
	resource.Column{Name: "Source", Type: "string", Priority: 1, Description: "VirtualMachine or tracker backed up", Cell: func(o runtime.Object) any {
		src := o.(*kubevirtbackup.VirtualMachineBackup).Spec.Source
		return src.Kind + "/" + src.Name
	}},
	resource.Column{Name: "PVC", Type: "string", Priority: 1, Description: "Push-mode target", Cell: func(o runtime.Object) any {
		if p := o.(*kubevirtbackup.VirtualMachineBackup).Spec.PvcName; p != nil {
			return *p
		}
		return ""
	}},
)
