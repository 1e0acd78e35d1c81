// Package validation holds the rules of the oadp.openshift.io non-admin API.
package validation

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	velerovalidation "github.com/backstop-io/backstop/pkg/apis/velero/validation"
)

// ValidateNonAdminBackupSpec checks a NonAdminBackup spec: the embedded
// backup spec is required and follows the Backup rules. A non-admin backup
// may only back up its own namespace, so it may not name others.
func ValidateNonAdminBackupSpec(namespace string, spec *oadp.NonAdminBackupSpec, fldPath *field.Path) field.ErrorList {
	p := fldPath.Child("backupSpec")
	if spec.BackupSpec == nil {
		return field.ErrorList{field.Required(p, "backupSpec is required")}
	}
	errs := velerovalidation.ValidateBackupSpec(spec.BackupSpec, p)
	for i, ns := range spec.BackupSpec.IncludedNamespaces {
		if ns != namespace {
			errs = append(errs, field.Forbidden(p.Child("includedNamespaces").Index(i),
				"a NonAdminBackup may only include its own namespace "+namespace))
		}
	}
	return errs
}

// ValidateNonAdminRestoreSpec checks a NonAdminRestore spec: a restore spec
// naming the NonAdminBackup to restore from is required.
func ValidateNonAdminRestoreSpec(spec *oadp.NonAdminRestoreSpec, fldPath *field.Path) field.ErrorList {
	p := fldPath.Child("restoreSpec")
	if spec.RestoreSpec == nil {
		return field.ErrorList{field.Required(p, "restoreSpec is required")}
	}
	var errs field.ErrorList
	if spec.RestoreSpec.BackupName == "" {
		errs = append(errs, field.Required(p.Child("backupName"), "the name of the NonAdminBackup to restore from is required"))
	}
	if spec.RestoreSpec.ScheduleName != "" {
		errs = append(errs, field.Forbidden(p.Child("scheduleName"), "non-admin restores are made from a NonAdminBackup, not a schedule"))
	}
	return errs
}
