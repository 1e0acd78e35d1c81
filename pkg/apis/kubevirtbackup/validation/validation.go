// Package validation holds the rules of the backup.kubevirt.io API and the
// normalization of the design document's spellings into upstream's.
package validation

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/kubevirtbackup"
	kubevirtbackupv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
)

// API groups and kinds a backup source may name.
const (
	VirtualMachineGroup = "kubevirt.io"
	VirtualMachineKind  = "VirtualMachine"
	TrackerKind         = "VirtualMachineBackupTracker"
)

// NormalizeBackupSpec moves the proposal's spellings into the upstream fields:
// backupTracker into source, mode into its canonical case.
func NormalizeBackupSpec(spec *kubevirtbackup.VirtualMachineBackupSpec) {
	if spec.BackupTracker != nil && *spec.BackupTracker != "" && spec.Source.Name == "" && spec.Source.Kind == "" {
		group := kubevirtbackup.GroupName
		spec.Source = corev1.TypedLocalObjectReference{APIGroup: &group, Kind: TrackerKind, Name: *spec.BackupTracker}
	}
	if spec.Mode != nil {
		switch strings.ToLower(string(*spec.Mode)) {
		case "push":
			m := kubevirtbackup.PushMode
			spec.Mode = &m
		case "pull":
			m := kubevirtbackup.PullMode
			spec.Mode = &m
		}
	}
}

// ValidateBackupSpec checks a (normalized) VirtualMachineBackup spec.
func ValidateBackupSpec(spec *kubevirtbackup.VirtualMachineBackupSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	src := fldPath.Child("source")
	switch {
	case spec.Source.Name == "" && spec.Source.Kind == "":
		errs = append(errs, field.Required(src, "a source is required: a VirtualMachine (apiGroup kubevirt.io) or a VirtualMachineBackupTracker (apiGroup backup.kubevirt.io, or spec.backupTracker)"))
	case spec.Source.Name == "":
		errs = append(errs, field.Required(src.Child("name"), "the name of the source is required"))
	default:
		errs = append(errs, ValidateObjectName(spec.Source.Name, src.Child("name"))...)
		group := ""
		if spec.Source.APIGroup != nil {
			group = *spec.Source.APIGroup
		}
		switch {
		case group == VirtualMachineGroup && spec.Source.Kind == VirtualMachineKind:
		case group == kubevirtbackup.GroupName && spec.Source.Kind == TrackerKind:
		case group == "":
			errs = append(errs, field.Required(src.Child("apiGroup"), "apiGroup is required: kubevirt.io for a VirtualMachine, backup.kubevirt.io for a VirtualMachineBackupTracker"))
		default:
			errs = append(errs, field.Invalid(src.Child("kind"), spec.Source.Kind,
				"kind must be VirtualMachine for apiGroup kubevirt.io or VirtualMachineBackupTracker for apiGroup backup.kubevirt.io"))
		}
	}
	if spec.BackupTracker != nil && *spec.BackupTracker != "" {
		errs = append(errs, ValidateObjectName(*spec.BackupTracker, fldPath.Child("backupTracker"))...)
	}
	if spec.BackupTracker != nil && *spec.BackupTracker != "" &&
		(spec.Source.Kind != TrackerKind || spec.Source.Name != *spec.BackupTracker) {
		errs = append(errs, field.Invalid(fldPath.Child("backupTracker"), *spec.BackupTracker,
			"must name the same tracker as source when both are set"))
	}
	mode := kubevirtbackup.PushMode
	if spec.Mode != nil {
		mode = *spec.Mode
	}
	switch mode {
	case kubevirtbackup.PushMode:
		if spec.PvcName == nil || *spec.PvcName == "" {
			errs = append(errs, field.Required(fldPath.Child("pvcName"), "pvcName is required in push mode"))
		} else {
			errs = append(errs, ValidateObjectName(*spec.PvcName, fldPath.Child("pvcName"))...)
		}
	case kubevirtbackup.PullMode:
		errs = append(errs, field.NotSupported(fldPath.Child("mode"), string(mode), []string{string(kubevirtbackup.PushMode)}))
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("mode"), string(mode), []string{string(kubevirtbackup.PushMode), string(kubevirtbackup.PullMode)}))
	}
	if spec.TTLDuration != nil && spec.TTLDuration.Duration < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("ttlDuration"), spec.TTLDuration.Duration.String(), "must not be negative"))
	}
	return errs
}

// ValidateTrackerSpec checks a VirtualMachineBackupTracker spec.
func ValidateTrackerSpec(spec *kubevirtbackup.VirtualMachineBackupTrackerSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	src := fldPath.Child("source")
	if spec.Source.APIGroup == nil || *spec.Source.APIGroup != VirtualMachineGroup {
		errs = append(errs, field.Invalid(src.Child("apiGroup"), spec.Source.APIGroup, "apiGroup must be kubevirt.io"))
	}
	if spec.Source.Kind != VirtualMachineKind {
		errs = append(errs, field.Invalid(src.Child("kind"), spec.Source.Kind, "kind must be VirtualMachine"))
	}
	if spec.Source.Name == "" {
		errs = append(errs, field.Required(src.Child("name"), "the name of the VirtualMachine is required"))
	} else {
		errs = append(errs, ValidateObjectName(spec.Source.Name, src.Child("name"))...)
	}
	return errs
}

// ValidateObjectName checks a name of a Kubernetes object (a
// VirtualMachine, a PersistentVolumeClaim) that the server also uses as a
// directory or libvirt domain name: a DNS-1123 subdomain, which is one path
// element, never "." or "..", without separators or control characters.
func ValidateObjectName(name string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	return errs
}

// ValidatePVCAnnotation checks kubevirtbackupv1alpha1.VMBackupPVCAnnotation
// where an object carries it (a tracker, a Backup, a Schedule): a PVC's
// name.
func ValidatePVCAnnotation(annotations map[string]string, fldPath *field.Path) field.ErrorList {
	v, ok := annotations[kubevirtbackupv1alpha1.VMBackupPVCAnnotation]
	if !ok {
		return nil
	}
	return ValidateObjectName(v, fldPath.Key(kubevirtbackupv1alpha1.VMBackupPVCAnnotation))
}

// ValidateTrackerAnnotations checks the annotations Backstop reads from a
// VirtualMachineBackupTracker: backstop.io/changed-block-tracking is "true"
// or "false".
func ValidateTrackerAnnotations(annotations map[string]string, fldPath *field.Path) field.ErrorList {
	errs := ValidatePVCAnnotation(annotations, fldPath)
	v, ok := annotations[kubevirtbackupv1alpha1.ChangedBlockTrackingAnnotation]
	if !ok || v == "true" || v == "false" {
		return errs
	}
	return append(errs, field.NotSupported(fldPath.Key(kubevirtbackupv1alpha1.ChangedBlockTrackingAnnotation), v, []string{"true", "false"}))
}

// ValidateBackupAnnotations checks the annotations Backstop reads from a
// VirtualMachineBackup: backstop.io/vm-backup-full-every is a whole
// number, 0 or more.
func ValidateBackupAnnotations(annotations map[string]string, fldPath *field.Path) field.ErrorList {
	v, ok := annotations[kubevirtbackupv1alpha1.FullEveryAnnotation]
	if !ok {
		return nil
	}
	if n, err := strconv.Atoi(v); err != nil || n < 0 {
		return field.ErrorList{field.Invalid(fldPath.Key(kubevirtbackupv1alpha1.FullEveryAnnotation), v,
			"the number of incrementals after which a backup is full: a whole number, 0 (unbounded) or more")}
	}
	return nil
}

// NormalizeBackupStatus makes status.type and status.backupType agree: a
// client (engine or vendor) may write either spelling, in any case.
func NormalizeBackupStatus(st *kubevirtbackup.VirtualMachineBackupStatus) {
	if st == nil {
		return
	}
	t := st.Type
	if t == "" {
		t = st.BackupType
	}
	switch strings.ToLower(string(t)) {
	case "full":
		t = kubevirtbackup.Full
	case "incremental":
		t = kubevirtbackup.Incremental
	}
	st.Type, st.BackupType = t, t
}

// NormalizeCheckpoint fills a checkpoint's disks from its volumes (the
// upstream spelling) or its volumes from its disks (the proposal's).
func NormalizeCheckpoint(cp *kubevirtbackup.BackupCheckpoint) {
	if cp == nil {
		return
	}
	switch {
	case len(cp.Disks) == 0 && len(cp.Volumes) > 0:
		for _, v := range cp.Volumes {
			cp.Disks = append(cp.Disks, v.VolumeName)
		}
	case len(cp.Volumes) == 0 && len(cp.Disks) > 0:
		for _, d := range cp.Disks {
			cp.Volumes = append(cp.Volumes, kubevirtbackup.BackupVolumeInfo{VolumeName: d})
		}
	}
}
