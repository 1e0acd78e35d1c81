// Package backup is the registry of velero.io Backups: defaults, validation
// and kubectl columns (strategy.go) and the REST storage (storage.go).
package backup

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerovalidation "github.com/backstop-io/backstop/pkg/apis/velero/validation"
	"github.com/backstop-io/backstop/pkg/registry/queueindex"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// Defaults Velero's server applies to a new backup.
const (
	DefaultTTL                  = 720 * time.Hour
	DefaultCSISnapshotTimeout   = 10 * time.Minute
	DefaultItemOperationTimeout = 4 * time.Hour
)

// DefaultLocationFunc returns the name of the default BackupStorageLocation
// of a namespace, or "" when there is none.
type DefaultLocationFunc func(ctx context.Context, namespace string) (string, error)

// Strategy is the Backup strategy.
type Strategy struct {
	resource.Strategy
	defaultLocation DefaultLocationFunc
}

// NewStrategy returns the Backup strategy; defaultLocation may be nil.
func NewStrategy(typer runtime.ObjectTyper, defaultLocation DefaultLocationFunc) Strategy {
	base := resource.NewStrategy(typer, velerov1.SchemeGroupVersion.String())
	base.ValidateObject = func(obj runtime.Object) field.ErrorList {
		return velerovalidation.ValidateBackupSpec(&obj.(*velero.Backup).Spec, field.NewPath("spec"))
	}
	base.Finalizers = []string{velerov1.BackupDataFinalizer}
	return Strategy{Strategy: base, defaultLocation: defaultLocation}
}

// PrepareForCreate clears the status and applies Velero's defaults. Only
// the server's engines may create a Backup with a status, and only a
// synced one (velerov1.SyncedFromLocationAnnotation): from anyone else the
// annotation is dropped and the status cleared, as for any new backup.
func (s Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	b := obj.(*velero.Backup)
	synced := b.Status
	s.Strategy.PrepareForCreate(ctx, obj)
	if _, ok := b.Annotations[velerov1.SyncedFromLocationAnnotation]; ok {
		if resource.FromEngine(ctx) {
			b.Status = synced
		} else {
			delete(b.Annotations, velerov1.SyncedFromLocationAnnotation)
		}
	}
	delete(b.Annotations, velerov1.QueueSequenceAnnotation)
	ApplyDefaults(&b.Spec)
	if b.Spec.StorageLocation == "" && s.defaultLocation != nil {
		// An error here leaves the location empty; the backup engine then
		// fails the backup with a clear reason rather than the create failing.
		if name, err := s.defaultLocation(ctx, b.Namespace); err == nil {
			b.Spec.StorageLocation = name
		}
	}
	if b.Spec.StorageLocation != "" && len(validation.IsValidLabelValue(b.Spec.StorageLocation)) == 0 {
		if b.Labels == nil {
			b.Labels = map[string]string{}
		}
		b.Labels[velerov1.StorageLocationLabel] = b.Spec.StorageLocation
	}
}

// PrepareForUpdate keeps the status and the queue sequence, which only the
// registry sets.
func (s Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	s.Strategy.PrepareForUpdate(ctx, obj, old)
	queueindex.KeepSequence(obj.(*velero.Backup), old.(*velero.Backup))
}

// Validate checks a new backup; one created with a status (synced, by the
// server) must be in a terminal phase.
func (s Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	errs := s.Strategy.Validate(ctx, obj)
	errs = append(errs, velerovalidation.ValidateBackupAnnotations(obj.(*velero.Backup).Annotations, field.NewPath("metadata", "annotations"))...)
	if p := velerov1.BackupPhase(obj.(*velero.Backup).Status.Phase); p != "" && !p.Terminal() {
		errs = append(errs, field.Invalid(field.NewPath("status", "phase"), p, "a backup created with a status must be in a terminal phase"))
	}
	return errs
}

// StatusStrategy is the strategy of the status subresource: only the
// server's engines write it, along velerov1.BackupLifecycle; a backup
// entering the Queued phase gets the next queue sequence; queue positions
// are never stored (they are computed when read).
type StatusStrategy struct {
	resource.StatusStrategy
	index *QueueIndex
}

// NewStatusStrategy returns the status strategy beside s.
func NewStatusStrategy(s Strategy, index *QueueIndex) StatusStrategy {
	st := resource.NewLifecycleStatusStrategy(s.Strategy, velerov1.BackupLifecycle, func(o runtime.Object) velerov1.BackupPhase {
		return velerov1.BackupPhase(o.(*velero.Backup).Status.Phase)
	}, field.NewPath("status", "phase"))
	phaseRules := st.ValidateStatus
	st.ValidateStatus = func(ctx context.Context, obj, old runtime.Object) field.ErrorList {
		return append(phaseRules(ctx, obj, old), validateVerification(obj.(*velero.Backup), old.(*velero.Backup))...)
	}
	return StatusStrategy{StatusStrategy: st, index: index}
}

// validateVerification: a verification's outcome and the conditions are
// well formed, and a verification is written only of a backup that has
// ended (it reads what the backup wrote).
func validateVerification(b, old *velero.Backup) field.ErrorList {
	fld := field.NewPath("status")
	errs := metav1validation.ValidateConditions(b.Status.Conditions, fld.Child("conditions"))
	v := b.Status.Verification
	if v == nil {
		return errs
	}
	vf := fld.Child("verification")
	if !resource.DeepEqual(v, old.Status.Verification) && !velerov1.BackupPhase(b.Status.Phase).Terminal() {
		errs = append(errs, field.Forbidden(vf, fmt.Sprintf("a backup is verified once it has ended; it is %s", b.Status.Phase)))
	}
	if len(v.Request) > velerovalidation.MaxVerifyRequest {
		errs = append(errs, field.TooLong(vf.Child("request"), "", velerovalidation.MaxVerifyRequest))
	}
	if len(v.Problems) > velerov1.MaxVerificationProblems {
		errs = append(errs, field.TooMany(vf.Child("problems"), len(v.Problems), velerov1.MaxVerificationProblems))
	}
	for name, n := range map[string]int64{"objects": int64(v.Objects), "bytes": v.Bytes, "items": int64(v.Items),
		"vmDiskChains": int64(v.VMDiskChains), "problemCount": int64(v.ProblemCount)} {
		if n < 0 {
			errs = append(errs, field.Invalid(vf.Child(name), n, "must not be negative"))
		}
	}
	return errs
}

// PrepareForUpdate keeps the spec and manages the queue sequence.
func (s StatusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	s.StatusStrategy.PrepareForUpdate(ctx, obj, old)
	b, oldB := obj.(*velero.Backup), old.(*velero.Backup)
	b.Status.QueuePosition = 0
	queueindex.KeepSequence(b, oldB)
	if b.Status.Phase == queued && oldB.Status.Phase != queued {
		queueindex.SetSequence(b, s.index.NextSequence())
	}
}

// ApplyDefaults sets the defaults Velero's server applies to a backup spec.
func ApplyDefaults(spec *velero.BackupSpec) {
	if spec.TTL.Duration == 0 {
		spec.TTL = metav1.Duration{Duration: DefaultTTL}
	}
	if spec.CSISnapshotTimeout.Duration == 0 {
		spec.CSISnapshotTimeout = metav1.Duration{Duration: DefaultCSISnapshotTimeout}
	}
	if spec.ItemOperationTimeout.Duration == 0 {
		spec.ItemOperationTimeout = metav1.Duration{Duration: DefaultItemOperationTimeout}
	}
}

// ValidateUpdate checks the update: the spec keeps its rules, and once a
// backup has been cancelled it cannot be un-cancelled.
func (s Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	b, oldB := obj.(*velero.Backup), old.(*velero.Backup)
	errs := s.Strategy.ValidateUpdate(ctx, obj, old)
	errs = append(errs, velerovalidation.ValidateBackupAnnotations(b.Annotations, field.NewPath("metadata", "annotations"))...)
	if oldB.Spec.Cancel && !b.Spec.Cancel {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "cancel"), "a cancelled backup cannot be un-cancelled"))
	}
	return errs
}

// Table renders backups like `velero backup get`.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Status", Type: "string", Description: "Phase of the backup", Cell: func(o runtime.Object) any {
		return string(o.(*velero.Backup).Status.Phase)
	}},
	resource.Column{Name: "Errors", Type: "integer", Description: "Errors during the backup", Cell: func(o runtime.Object) any {
		return int64(o.(*velero.Backup).Status.Errors)
	}},
	resource.Column{Name: "Warnings", Type: "integer", Description: "Warnings during the backup", Cell: func(o runtime.Object) any {
		return int64(o.(*velero.Backup).Status.Warnings)
	}},
	resource.Column{Name: "Created", Type: "string", Description: "When the backup was created", Cell: func(o runtime.Object) any {
		return o.(*velero.Backup).CreationTimestamp.UTC().Format("2006-01-02 15:04:05 -0700 MST")
	}},
	resource.Column{Name: "Expires", Type: "string", Description: "Time left until the backup expires", Cell: func(o runtime.Object) any {
		return resource.Until(o.(*velero.Backup).Status.Expiration)
	}},
	resource.Column{Name: "Storage Location", Type: "string", Description: "Backup storage location", Cell: func(o runtime.Object) any {
		return o.(*velero.Backup).Spec.StorageLocation
	}},
	resource.Column{Name: "Selector", Type: "string", Description: "Label selector of the backup", Cell: func(o runtime.Object) any {
		return resource.Selector(o.(*velero.Backup).Spec.LabelSelector)
	}},
	resource.Column{Name: "Queue Position", Type: "integer", Priority: 1, Description: "Position in the backup queue while Queued", Cell: func(o runtime.Object) any {
		return int64(o.(*velero.Backup).Status.QueuePosition)
	}},
	resource.Column{Name: "Cancel", Type: "boolean", Priority: 1, Description: "Cancellation requested", Cell: func(o runtime.Object) any {
		return o.(*velero.Backup).Spec.Cancel
	}},
)
