// Package validation holds the rules of the oadp.openshift.io non-admin API:
// what a tenant may ask for in its own namespace. Each refused field gets
// its path and upstream's message (the OADP non-admin controller's
// ValidateBackupSpec and ValidateRestoreSpec), plus the fields upstream
// leaves open that reach outside the namespace: hooks naming other
// namespaces, resource policies (a ConfigMap of the admin namespace),
// resource modifiers of another kind than a ConfigMap (of the tenant's
// namespace), cluster resources in restores.
//
// The registry applies these rules at admission (422), and the non-admin
// engine applies them again before it makes the Velero object, so that a
// spec admitted under an older policy is refused then too.
package validation

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerovalidation "github.com/backstop-io/backstop/pkg/apis/velero/validation"
)

// restricted is upstream's message for a field a tenant may not set.
func restricted(kind string, p *field.Path) string {
	return fmt.Sprintf("%s %s is restricted", kind, p.String())
}

// ValidateNonAdminBackupSpec checks a NonAdminBackup spec of namespace:
// the embedded backup spec is required and follows the Backup rules, and
// it may reach its own namespace only.
func ValidateNonAdminBackupSpec(namespace string, spec *oadp.NonAdminBackupSpec, fldPath *field.Path) field.ErrorList {
	p := fldPath.Child("backupSpec")
	if spec.BackupSpec == nil {
		return field.ErrorList{field.Required(p, "backupSpec is required")}
	}
	b := spec.BackupSpec
	errs := velerovalidation.ValidateBackupSpec(b, p)
	const kind = "NonAdminBackup"
	for i, ns := range b.IncludedNamespaces {
		if ns != namespace {
			errs = append(errs, field.Forbidden(p.Child("includedNamespaces").Index(i),
				fmt.Sprintf("%s %s is restricted, can not contain namespaces other than: %s", kind, p.Child("includedNamespaces"), namespace)))
		}
	}
	if b.ExcludedNamespaces != nil {
		errs = append(errs, field.Forbidden(p.Child("excludedNamespaces"), restricted(kind, p.Child("excludedNamespaces"))))
	}
	if b.IncludeClusterResources != nil && *b.IncludeClusterResources {
		errs = append(errs, field.Forbidden(p.Child("includeClusterResources"),
			restricted(kind, p.Child("includeClusterResources"))+", can only be set to false"))
	}
	if len(b.IncludedClusterScopedResources) > 0 {
		// Upstream's message, its spelling of the field kept.
		errs = append(errs, field.Forbidden(p.Child("includedClusterScopedResources"),
			restricted(kind, p.Child("includedScopedResources"))+", must remain empty"))
	}
	if b.VolumeSnapshotLocations != nil {
		errs = append(errs, field.Forbidden(p.Child("volumeSnapshotLocations"), restricted(kind, p.Child("volumeSnapshotLocations"))))
	}
	if b.ResourcePolicy != nil {
		errs = append(errs, field.Forbidden(p.Child("resourcePolicy"),
			restricted(kind, p.Child("resourcePolicy"))+": it names a ConfigMap of the admin namespace"))
	}
	for i, h := range b.Hooks.Resources {
		errs = append(errs, ownNamespaceOnly(kind, namespace, h.IncludedNamespaces, p.Child("hooks", "resources").Index(i).Child("includedNamespaces"))...)
	}
	for _, key := range slices.Sorted(maps.Keys(b.Metadata.Labels)) {
		if ServerLabel(key) {
			errs = append(errs, field.Forbidden(p.Child("metadata", "labels").Key(key),
				"labels of velero.io, backstop.io and openshift.io/oadp, and app.kubernetes.io/managed-by, link the server's objects: a tenant's backups cannot carry them"))
		}
	}
	return errs
}

// ServerLabel reports whether a label or annotation key is one the server
// links its objects by or acts on: under velero.io or backstop.io (and
// their subdomains), openshift.io/oadp*, app.kubernetes.io/managed-by.
func ServerLabel(key string) bool {
	prefix, name, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	prefix = strings.ToLower(prefix)
	for _, domain := range []string{"velero.io", "backstop.io"} {
		if prefix == domain || strings.HasSuffix(prefix, "."+domain) {
			return true
		}
	}
	return prefix == "openshift.io" && strings.HasPrefix(name, "oadp") || key == "app.kubernetes.io/managed-by"
}

// ValidateNonAdminRestoreSpec checks a NonAdminRestore spec of namespace:
// a restore spec naming the NonAdminBackup to restore from is required,
// and it may restore into its own namespace only.
func ValidateNonAdminRestoreSpec(namespace string, spec *oadp.NonAdminRestoreSpec, fldPath *field.Path) field.ErrorList {
	p := fldPath.Child("restoreSpec")
	if spec.RestoreSpec == nil {
		return field.ErrorList{field.Required(p, "restoreSpec is required")}
	}
	r := spec.RestoreSpec
	const kind = "NonAdminRestore"
	var errs field.ErrorList
	if r.BackupName == "" {
		errs = append(errs, field.Required(p.Child("backupName"), fmt.Sprintf("%s %s is not set", kind, p.Child("backupName"))))
	}
	if r.ScheduleName != "" {
		errs = append(errs, field.Forbidden(p.Child("scheduleName"), restricted(kind, p.Child("scheduleName"))))
	}
	if r.IncludedNamespaces != nil {
		errs = append(errs, field.Forbidden(p.Child("includedNamespaces"), restricted(kind, p.Child("includedNamespaces"))))
	}
	if r.ExcludedNamespaces != nil {
		errs = append(errs, field.Forbidden(p.Child("excludedNamespaces"), restricted(kind, p.Child("excludedNamespaces"))))
	}
	if r.NamespaceMapping != nil {
		errs = append(errs, field.Forbidden(p.Child("namespaceMapping"), restricted(kind, p.Child("namespaceMapping"))))
	}
	if r.IncludeClusterResources != nil && *r.IncludeClusterResources {
		errs = append(errs, field.Forbidden(p.Child("includeClusterResources"),
			restricted(kind, p.Child("includeClusterResources"))+", can only be set to false"))
	}
	errs = append(errs, validateTenantModifier(r.ResourceModifier, p.Child("resourceModifier"))...)
	for i, h := range r.Hooks.Resources {
		errs = append(errs, ownNamespaceOnly(kind, namespace, h.IncludedNamespaces, p.Child("hooks", "resources").Index(i).Child("includedNamespaces"))...)
	}
	return errs
}

// validateTenantModifier checks the resource modifiers a tenant's restore
// names: a ConfigMap of the tenant's own namespace (the restore reads it
// there with the tenant's rights, and applies it only to the items it
// restores into that namespace), never another kind nor one of another
// API group.
func validateTenantModifier(ref *corev1.TypedLocalObjectReference, p *field.Path) field.ErrorList {
	if ref == nil {
		return nil
	}
	var errs field.ErrorList
	if ref.APIGroup != nil && *ref.APIGroup != "" {
		errs = append(errs, field.Invalid(p.Child("apiGroup"), *ref.APIGroup, "resource modifiers are a ConfigMap of the core API group"))
	}
	if !strings.EqualFold(ref.Kind, "ConfigMap") {
		errs = append(errs, field.NotSupported(p.Child("kind"), ref.Kind, []string{"ConfigMap"}))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "the name of a ConfigMap of the NonAdminRestore's namespace"))
	}
	for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(ref.Name, false) {
		if ref.Name != "" {
			errs = append(errs, field.Invalid(p.Child("name"), ref.Name, msg))
		}
	}
	return errs
}

// ownNamespaceOnly refuses namespaces other than namespace in a list.
func ownNamespaceOnly(kind, namespace string, namespaces []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ns := range namespaces {
		if ns != namespace {
			errs = append(errs, field.Forbidden(p.Index(i),
				fmt.Sprintf("%s %s is restricted, can not contain namespaces other than: %s", kind, p, namespace)))
		}
	}
	return errs
}

// AlwaysExcludedNamespaceScoped are the namespaced resources a tenant's
// backup never takes (upstream's list): the tenant kinds themselves.
var AlwaysExcludedNamespaceScoped = []string{"nonadminbackups", "nonadminrestores", "nonadminbackupstoragelocations"}

// AlwaysExcludedClusterScoped are the cluster-scoped resources a tenant's
// backup never takes (upstream's list). Backstop's tenant backups take no
// cluster-scoped resources at all (includeClusterResources false); the
// list is kept on the Velero backup for tools that read it.
var AlwaysExcludedClusterScoped = []string{"securitycontextconstraints", "clusterroles", "clusterrolebindings", "priorityclasses",
	"customresourcedefinitions", "virtualmachineclusterinstancetypes", "virtualmachineclusterpreferences"}

// TenantBackupSpec is the Velero backup spec made from a tenant's: its
// own namespace only, no cluster-scoped resources, the always-excluded
// resources appended where the spec's filter style puts them (new-style
// filters when any is used, as upstream does), and storageLocation the
// given Velero location name ("" for the default).
func TenantBackupSpec(namespace string, in *velero.BackupSpec, location string) *velero.BackupSpec {
	out := in.DeepCopy()
	no := false
	out.IncludedNamespaces = []string{namespace}
	out.ExcludedNamespaces = nil
	out.IncludeClusterResources = &no
	out.IncludedClusterScopedResources = nil
	out.StorageLocation = location
	newStyle := len(out.IncludedClusterScopedResources)+len(out.ExcludedClusterScopedResources)+
		len(out.IncludedNamespaceScopedResources)+len(out.ExcludedNamespaceScopedResources) > 0
	if newStyle {
		out.ExcludedNamespaceScopedResources = appendMissing(out.ExcludedNamespaceScopedResources, AlwaysExcludedNamespaceScoped...)
		out.ExcludedClusterScopedResources = appendMissing(out.ExcludedClusterScopedResources, AlwaysExcludedClusterScoped...)
	} else {
		out.ExcludedResources = appendMissing(out.ExcludedResources, AlwaysExcludedNamespaceScoped...)
		out.ExcludedResources = appendMissing(out.ExcludedResources, AlwaysExcludedClusterScoped...)
	}
	return out
}

// TenantRestoreSpec is the Velero restore spec made from a tenant's: from
// the Velero backup backupName, into its own namespace only, no
// cluster-scoped resources, volume snapshot classes excluded (upstream).
// The restore writes with the rights of the user who created the
// NonAdminRestore (restoreas.Annotation): what a tenant could not
// write itself, a backup does not write for it.
func TenantRestoreSpec(namespace string, in *velero.RestoreSpec, backupName string) *velero.RestoreSpec {
	out := in.DeepCopy()
	no := false
	out.BackupName = backupName
	out.ScheduleName = ""
	out.IncludedNamespaces = []string{namespace}
	out.ExcludedNamespaces = nil
	out.NamespaceMapping = nil
	out.IncludeClusterResources = &no
	out.ExcludedResources = appendMissing(out.ExcludedResources, "volumesnapshotclasses")
	return out
}

func appendMissing(list []string, add ...string) []string {
	for _, a := range add {
		if !slices.ContainsFunc(list, func(l string) bool { return strings.EqualFold(l, a) }) {
			list = append(list, a)
		}
	}
	return list
}

// ValidateNonAdminScheduleSpec checks a NonAdminSchedule spec of namespace:
// a cron schedule as Velero reads it, and a backup template held to the
// NonAdminBackup rules (at spec.template.backupSpec).
func ValidateNonAdminScheduleSpec(namespace string, spec *oadp.NonAdminScheduleSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if err := velerovalidation.ValidateCron(spec.Schedule); err != nil {
		errs = append(errs, field.Invalid(fldPath.Child("schedule"), spec.Schedule, err.Error()))
	}
	template := &oadp.NonAdminBackupSpec{BackupSpec: spec.Template.BackupSpec}
	return append(errs, ValidateNonAdminBackupSpec(namespace, template, fldPath.Child("template"))...)
}
