// Package validation holds the rules of the velero.io API: what the registry
// strategies refuse with 422 and field paths. Rules follow what Velero's
// controllers would mark FailedValidation, moved to write time so a bad
// object is never stored.
package validation

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	kubevirtbackupv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	vmvalidation "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/validation"
	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

// ValidateBackupSpec checks a backup spec (of a Backup, a Schedule template
// or a NonAdminBackup).
func ValidateBackupSpec(spec *velero.BackupSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateNamespaceFilters(spec.IncludedNamespaces, spec.ExcludedNamespaces, fldPath)...)
	errs = append(errs, validateIncludeExclude(spec.IncludedResources, spec.ExcludedResources,
		fldPath.Child("includedResources"), fldPath.Child("excludedResources"))...)
	errs = append(errs, validateIncludeExclude(spec.IncludedClusterScopedResources, spec.ExcludedClusterScopedResources,
		fldPath.Child("includedClusterScopedResources"), fldPath.Child("excludedClusterScopedResources"))...)
	errs = append(errs, validateIncludeExclude(spec.IncludedNamespaceScopedResources, spec.ExcludedNamespaceScopedResources,
		fldPath.Child("includedNamespaceScopedResources"), fldPath.Child("excludedNamespaceScopedResources"))...)

	// Velero refuses mixing the old resource filters with the scoped ones.
	oldStyle := len(spec.IncludedResources) > 0 || len(spec.ExcludedResources) > 0 || spec.IncludeClusterResources != nil
	newStyle := len(spec.IncludedClusterScopedResources) > 0 || len(spec.ExcludedClusterScopedResources) > 0 ||
		len(spec.IncludedNamespaceScopedResources) > 0 || len(spec.ExcludedNamespaceScopedResources) > 0
	if oldStyle && newStyle {
		errs = append(errs, field.Forbidden(fldPath.Child("includedClusterScopedResources"),
			"the scoped resource filters (included/excludedClusterScopedResources, included/excludedNamespaceScopedResources) cannot be combined with includedResources, excludedResources or includeClusterResources"))
	}

	if spec.TTL.Duration < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("ttl"), spec.TTL.Duration.String(), "must not be negative"))
	}
	if spec.CSISnapshotTimeout.Duration < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("csiSnapshotTimeout"), spec.CSISnapshotTimeout.Duration.String(), "must not be negative"))
	}
	if spec.ItemOperationTimeout.Duration < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("itemOperationTimeout"), spec.ItemOperationTimeout.Duration.String(), "must not be negative"))
	}
	errs = append(errs, validateSelectors(spec.LabelSelector, spec.OrLabelSelectors, fldPath)...)
	return errs
}

// ValidateRestoreSpec checks a restore spec.
func ValidateRestoreSpec(spec *velero.RestoreSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case spec.BackupName == "" && spec.ScheduleName == "":
		errs = append(errs, field.Required(fldPath.Child("backupName"), "either backupName or scheduleName must be set"))
	case spec.BackupName != "" && spec.ScheduleName != "":
		errs = append(errs, field.Forbidden(fldPath.Child("scheduleName"), "must not be set together with backupName"))
	}
	errs = append(errs, validateNamespaceFilters(spec.IncludedNamespaces, spec.ExcludedNamespaces, fldPath)...)
	errs = append(errs, validateIncludeExclude(spec.IncludedResources, spec.ExcludedResources,
		fldPath.Child("includedResources"), fldPath.Child("excludedResources"))...)
	errs = append(errs, validateSelectors(spec.LabelSelector, spec.OrLabelSelectors, fldPath)...)
	if spec.ItemOperationTimeout.Duration < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("itemOperationTimeout"), spec.ItemOperationTimeout.Duration.String(), "must not be negative"))
	}
	return append(errs, validateNamespaceMapping(spec.NamespaceMapping, fldPath.Child("namespaceMapping"))...)
}

// validateNamespaceMapping: both sides of each mapping are namespace
// names, and no two namespaces are restored into the same one.
func validateNamespaceMapping(mapping map[string]string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	into := map[string]string{}
	for _, from := range sets.List(sets.KeySet(mapping)) {
		to, p := mapping[from], fldPath.Key(from)
		if from == "" || to == "" {
			errs = append(errs, field.Invalid(p, to, "both namespaces must be named"))
			continue
		}
		for _, name := range []string{from, to} {
			for _, msg := range validation.IsDNS1123Label(name) {
				errs = append(errs, field.Invalid(p, name, "not a namespace name: "+msg))
			}
		}
		if other, ok := into[to]; ok {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("%s and %s are both mapped to %s", other, from, to)))
		}
		into[to] = from
	}
	return errs
}

// ValidateBackupAnnotations checks the annotations Backstop reads from a
// Backup: the PVC its VM disk backups go to is a PVC's name, a
// verification request is at most MaxVerifyRequest bytes.
func ValidateBackupAnnotations(annotations map[string]string, fldPath *field.Path) field.ErrorList {
	errs := vmvalidation.ValidatePVCAnnotation(annotations, fldPath)
	if v := annotations[velerov1.VerifyAnnotation]; len(v) > MaxVerifyRequest {
		errs = append(errs, field.TooLong(fldPath.Key(velerov1.VerifyAnnotation), "", MaxVerifyRequest))
	}
	return errs
}

// MaxVerifyRequest bounds a verification request (the backstop.io/verify
// annotation), which status.verification.request repeats.
const MaxVerifyRequest = 128

// ValidateScheduleAnnotations checks the annotations Backstop reads from a
// Schedule: keep-last and the VM backups' chain bound are whole numbers,
// the PVC of its VM disk backups is a PVC's name.
func ValidateScheduleAnnotations(annotations map[string]string, fldPath *field.Path) field.ErrorList {
	errs := ValidateBackupAnnotations(annotations, fldPath)
	for key, what := range map[string]string{
		velerov1.KeepLastAnnotation:                "the number of Completed backups kept: a whole number, 0 (all, until their TTL) or more",
		kubevirtbackupv1alpha1.FullEveryAnnotation: "the number of incremental VM backups after which one is full: a whole number, 0 (unbounded) or more",
	} {
		v, ok := annotations[key]
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(v); err != nil || n < 0 {
			errs = append(errs, field.Invalid(fldPath.Key(key), v, what))
		}
	}
	return errs
}

// ValidateSchedule checks a schedule's cron expression and template.
func ValidateScheduleSpec(spec *velero.ScheduleSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if err := ValidateCron(spec.Schedule); err != nil {
		errs = append(errs, field.Invalid(fldPath.Child("schedule"), spec.Schedule, err.Error()))
	}
	errs = append(errs, ValidateBackupSpec(&spec.Template, fldPath.Child("template"))...)
	return errs
}

// ValidateCron parses a schedule the way Velero does (standard 5-field cron,
// descriptors like @daily and @every, CRON_TZ= / TZ= prefixes).
func ValidateCron(schedule string) error {
	if strings.TrimSpace(schedule) == "" {
		return fmt.Errorf("a cron schedule is required")
	}
	if _, err := cron.ParseStandard(schedule); err != nil {
		return fmt.Errorf("invalid schedule: %w", err)
	}
	return nil
}

// ValidateBackupStorageLocationSpec checks a storage location.
func ValidateBackupStorageLocationSpec(spec *velero.BackupStorageLocationSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.Provider == "" {
		errs = append(errs, field.Required(fldPath.Child("provider"), "a provider is required (e.g. filesystem, aws)"))
	}
	os := spec.ObjectStorage
	osPath := fldPath.Child("objectStorage")
	if os == nil {
		errs = append(errs, field.Required(osPath, "objectStorage is required"))
		return errs
	}
	if os.Bucket == "" {
		errs = append(errs, field.Required(osPath.Child("bucket"), "a bucket (or, for the filesystem provider, a directory) is required"))
	}
	// The prefix names keys (and, for the filesystem provider, directories)
	// under the bucket: relative, without "." or ".." elements, no NUL or
	// backslash.
	if p := os.Prefix; p != "" {
		bad := strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\x00\\")
		for _, e := range strings.Split(strings.Trim(p, "/"), "/") {
			bad = bad || e == "." || e == ".." || e == ""
		}
		if bad {
			errs = append(errs, field.Invalid(osPath.Child("prefix"), p, `a relative path of names: no leading "/", no "." or ".." or empty elements, no NUL or backslash`))
		}
	}
	if len(os.CACert) > 0 && os.CACertRef != nil {
		errs = append(errs, field.Forbidden(osPath.Child("caCertRef"), "cannot specify both caCert and caCertRef"))
	}
	if spec.BackupSyncPeriod != nil && spec.BackupSyncPeriod.Duration < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("backupSyncPeriod"), spec.BackupSyncPeriod.Duration.String(), "must not be negative"))
	}
	if spec.ValidationFrequency != nil && spec.ValidationFrequency.Duration < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("validationFrequency"), spec.ValidationFrequency.Duration.String(), "must not be negative"))
	}
	if _, err := velerov1.VerifyEvery(spec.Config); err != nil {
		errs = append(errs, field.Invalid(fldPath.Child("config").Key(velerov1.VerifyEveryConfigKey), spec.Config[velerov1.VerifyEveryConfigKey], err.Error()))
	}
	lockPath := fldPath.Child("config").Key(velerov1.ObjectLockModeConfigKey)
	switch mode, err := velerov1.ObjectLockMode(spec.Config); {
	case err != nil:
		errs = append(errs, field.NotSupported(lockPath, spec.Config[velerov1.ObjectLockModeConfigKey], []string{velerov1.ObjectLockGovernance, velerov1.ObjectLockCompliance}))
	case mode != "" && (spec.Provider == "filesystem" || spec.Provider == "velero.io/filesystem"):
		errs = append(errs, field.Forbidden(lockPath, "the filesystem provider cannot lock objects: object lock needs an S3 bucket made with it (provider aws)"))
	}
	return errs
}

// ValidateDeleteBackupRequestSpec checks a delete request.
func ValidateDeleteBackupRequestSpec(spec *velero.DeleteBackupRequestSpec, fldPath *field.Path) field.ErrorList {
	if spec.BackupName == "" {
		return field.ErrorList{field.Required(fldPath.Child("backupName"), "the name of the backup to delete is required")}
	}
	return nil
}

var downloadTargetKinds = sets.New(
	velero.DownloadTargetKindBackupLog, velero.DownloadTargetKindBackupContents,
	velero.DownloadTargetKindBackupVolumeSnapshots, velero.DownloadTargetKindBackupItemOperations,
	velero.DownloadTargetKindBackupResourceList, velero.DownloadTargetKindBackupResults,
	velero.DownloadTargetKindRestoreLog, velero.DownloadTargetKindRestoreResults,
	velero.DownloadTargetKindRestoreResourceList, velero.DownloadTargetKindRestoreItemOperations,
	velero.DownloadTargetKindCSIBackupVolumeSnapshots, velero.DownloadTargetKindCSIBackupVolumeSnapshotContents,
	velero.DownloadTargetKindBackupVolumeInfos, velero.DownloadTargetKindRestoreVolumeInfo,
)

// ValidateDownloadRequestSpec checks a download request.
func ValidateDownloadRequestSpec(spec *velero.DownloadRequestSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	t := fldPath.Child("target")
	if spec.Target.Kind == "" {
		errs = append(errs, field.Required(t.Child("kind"), "a download target kind is required"))
	} else if !downloadTargetKinds.Has(spec.Target.Kind) {
		errs = append(errs, field.NotSupported(t.Child("kind"), spec.Target.Kind, sets.List(downloadTargetKinds)))
	}
	if spec.Target.Name == "" {
		errs = append(errs, field.Required(t.Child("name"), "the name of the backup or restore is required"))
	} else {
		// It names files of the location: the name of a Backup or Restore.
		for _, msg := range validation.IsDNS1123Subdomain(spec.Target.Name) {
			errs = append(errs, field.Invalid(t.Child("name"), spec.Target.Name, "the name of a backup or restore: "+msg))
		}
	}
	return errs
}

func validateNamespaceFilters(included, excluded []string, fldPath *field.Path) field.ErrorList {
	return validateIncludeExclude(included, excluded, fldPath.Child("includedNamespaces"), fldPath.Child("excludedNamespaces"))
}

// validateIncludeExclude refuses an item both included and excluded, and an
// excluded "*" (which would select nothing), as Velero does.
func validateIncludeExclude(included, excluded []string, incPath, excPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	inc := sets.New(included...)
	for i, e := range excluded {
		if e == "*" {
			errs = append(errs, field.Invalid(excPath.Index(i), e, "excluding \"*\" is not allowed"))
			continue
		}
		if inc.Has(e) {
			errs = append(errs, field.Invalid(excPath.Index(i), e,
				fmt.Sprintf("%q is also in %s", e, incPath.String())))
		}
	}
	return errs
}

func validateSelectors(sel *metav1.LabelSelector, or []*metav1.LabelSelector, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	opts := metav1validation.LabelSelectorValidationOptions{}
	if sel != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(sel, opts, fldPath.Child("labelSelector"))...)
	}
	for i, s := range or {
		if s == nil {
			errs = append(errs, field.Required(fldPath.Child("orLabelSelectors").Index(i), "a selector must not be null"))
			continue
		}
		errs = append(errs, metav1validation.ValidateLabelSelector(s, opts, fldPath.Child("orLabelSelectors").Index(i))...)
	}
	if sel != nil && len(or) > 0 {
		errs = append(errs, field.Forbidden(fldPath.Child("orLabelSelectors"), "labelSelector and orLabelSelectors cannot both be set"))
	}
	return errs
}
