package validation

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerovalidation "github.com/backstop-io/backstop/pkg/apis/velero/validation"
)

// TenantProviders are the providers a tenant's storage location may name:
// object stores the server reaches over the network with the tenant's
// credentials. The filesystem provider names a directory of the server and
// is the admin's alone.
var TenantProviders = []string{"aws", "velero.io/aws", "s3"}

// Config keys of a location that name something of the server's rather
// than the tenant's, refused unless the admin enforces them.
var serverConfigKeys = []string{"credentialsFile"}

// ValidateNonAdminBSLSpec checks a NonAdminBackupStorageLocation spec (the
// admin's enforced values already filled in): the Velero location rules,
// and what a tenant may not ask for — the default location, a directory
// of the server, a credentials file of the server, a CA Secret (only the
// credential Secret is copied to the admin namespace), a location without
// a credential Secret of its own namespace, and a sync period that is not
// shorter than the non-admin sync's.
func ValidateNonAdminBSLSpec(spec *oadp.NonAdminBackupStorageLocationSpec, p *Policy, fldPath *field.Path) field.ErrorList {
	path := fldPath.Child("backupStorageLocationSpec")
	if spec.BackupStorageLocationSpec == nil {
		return field.ErrorList{field.Required(path, "backupStorageLocationSpec is required")}
	}
	s := spec.BackupStorageLocationSpec
	errs := velerovalidation.ValidateBackupStorageLocationSpec(s, path)
	const kind = "NonAdminBackupStorageLocation"
	if s.Default {
		errs = append(errs, field.Forbidden(path.Child("default"), restricted(kind, path.Child("default"))+", can only be set to false"))
	}
	if s.Provider != "" && !slices.Contains(TenantProviders, s.Provider) {
		errs = append(errs, field.NotSupported(path.Child("provider"), s.Provider, TenantProviders))
	}
	for _, k := range serverConfigKeys {
		if _, ok := s.Config[k]; ok && !p.enforcesConfig(k) {
			errs = append(errs, field.Forbidden(path.Child("config").Key(k), restricted(kind, path.Child("config").Key(k))+": it names a file of the server"))
		}
	}
	if s.ObjectStorage != nil && s.ObjectStorage.CACertRef != nil {
		errs = append(errs, field.Forbidden(path.Child("objectStorage", "caCertRef"), restricted(kind, path.Child("objectStorage", "caCertRef"))+": give the CA bundle in caCert"))
	}
	switch c := s.Credential; {
	case c == nil:
		errs = append(errs, field.Required(path.Child("credential"), "a Secret of the namespace holding the location's credentials is required"))
	case c.Name == "":
		errs = append(errs, field.Required(path.Child("credential", "name"), "the name of a Secret of the namespace is required"))
	case c.Key == "":
		errs = append(errs, field.Required(path.Child("credential", "key"), "the key of the Secret holding the credentials is required"))
	}
	if s.ValidationFrequency != nil {
		dpa := ""
		if p != nil {
			dpa = p.DPA
		}
		errs = append(errs, ValidateValidationFrequency(s.ValidationFrequency.Duration, p.Limits(), path.Child("validationFrequency"), dpa)...)
	}
	if limit := p.syncPeriod(); s.BackupSyncPeriod != nil && limit > 0 && s.BackupSyncPeriod.Duration >= limit {
		errs = append(errs, field.Invalid(path.Child("backupSyncPeriod"), s.BackupSyncPeriod.Duration.String(),
			fmt.Sprintf("must be shorter than the non-admin backupSyncPeriod (%s)", limit)))
	}
	return errs
}

func (p *Policy) enforcedBSL() *oadp.EnforceBackupStorageLocationSpec {
	if p == nil || p.NonAdmin == nil {
		return nil
	}
	return p.NonAdmin.EnforceBSLSpec
}

func (p *Policy) enforcesConfig(key string) bool {
	e := p.enforcedBSL()
	if e == nil {
		return false
	}
	_, ok := e.Config[key]
	return ok
}

// syncPeriod is the non-admin sync's period the policy sets (0: unset or
// off).
func (p *Policy) syncPeriod() time.Duration {
	if p == nil || p.NonAdmin == nil || p.NonAdmin.BackupSyncPeriod == nil {
		return 0
	}
	return p.NonAdmin.BackupSyncPeriod.Duration
}

// CheckNonAdminBSL applies the policy and the tenant rules to a spec: what admission
// refuses, and what the engine checks again when the policy changes.
func CheckNonAdminBSL(spec *oadp.NonAdminBackupStorageLocationSpec, policy *Policy) field.ErrorList {
	path := field.NewPath("spec", "backupStorageLocationSpec")
	errs := ValidateBSLPolicy(spec.BackupStorageLocationSpec, policy, path)
	enforced := spec.DeepCopy()
	if enforced.BackupStorageLocationSpec != nil {
		EnforceBSL(enforced.BackupStorageLocationSpec, policy)
	}
	return append(errs, ValidateNonAdminBSLSpec(enforced, policy, field.NewPath("spec"))...)
}

// ValidateBSLPolicy checks a tenant's location spec against the policy:
// each field the admin enforces (objectStorage field by field) must be
// unset or hold the enforced value.
func ValidateBSLPolicy(spec *velero.BackupStorageLocationSpec, p *Policy, path *field.Path) field.ErrorList {
	errs := p.disabled("NonAdminBackupStorageLocation", path)
	e := p.enforcedBSL()
	if spec == nil || e == nil {
		return errs
	}
	differs := func(name string, want, got any, wantZero, gotZero bool) {
		if wantZero || gotZero || equality.Semantic.DeepEqual(want, got) {
			return
		}
		errs = append(errs, field.Forbidden(path.Child(name), fmt.Sprintf("the administrator has restricted %s field to: %s", path.Child(name), show(want))))
	}
	differs("provider", e.Provider, spec.Provider, e.Provider == "", spec.Provider == "")
	for _, k := range slices.Sorted(maps.Keys(e.Config)) {
		if got, ok := spec.Config[k]; ok && got != e.Config[k] {
			errs = append(errs, field.Forbidden(path.Child("config").Key(k), fmt.Sprintf("the administrator has restricted %s field to: %s", path.Child("config").Key(k), e.Config[k])))
		}
	}
	differs("credential", e.Credential, spec.Credential, e.Credential == nil, spec.Credential == nil)
	if want, got := e.ObjectStorage, spec.ObjectStorage; want != nil && got != nil {
		var wrong []string
		if want.Bucket != "" && got.Bucket != "" && want.Bucket != got.Bucket {
			wrong = append(wrong, "bucket: "+want.Bucket)
		}
		if want.Prefix != "" && got.Prefix != "" && want.Prefix != got.Prefix {
			wrong = append(wrong, "prefix: "+want.Prefix)
		}
		if len(want.CACert) > 0 && len(got.CACert) > 0 && string(want.CACert) != string(got.CACert) {
			wrong = append(wrong, "caCert: (the administrator's CA bundle)")
		}
		if len(wrong) > 0 {
			errs = append(errs, field.Forbidden(path.Child("objectStorage"), fmt.Sprintf("the administrator has restricted %s field value(s) to: %s", path.Child("objectStorage"), strings.Join(wrong, ", "))))
		}
	}
	differs("accessMode", e.AccessMode, spec.AccessMode, e.AccessMode == "", spec.AccessMode == "")
	differs("backupSyncPeriod", e.BackupSyncPeriod, spec.BackupSyncPeriod, e.BackupSyncPeriod == nil, spec.BackupSyncPeriod == nil)
	differs("validationFrequency", e.ValidationFrequency, spec.ValidationFrequency, e.ValidationFrequency == nil, spec.ValidationFrequency == nil)
	return errs
}

// EnforceBSL fills the fields of a tenant's location spec left unset with
// the values the policy enforces (config key by key, objectStorage field by
// field).
func EnforceBSL(spec *velero.BackupStorageLocationSpec, p *Policy) {
	e := p.enforcedBSL()
	if e == nil {
		return
	}
	e = e.DeepCopy()
	if spec.Provider == "" {
		spec.Provider = e.Provider
	}
	for k, v := range e.Config {
		if _, ok := spec.Config[k]; !ok {
			if spec.Config == nil {
				spec.Config = map[string]string{}
			}
			spec.Config[k] = v
		}
	}
	if spec.Credential == nil {
		spec.Credential = e.Credential
	}
	if want := e.ObjectStorage; want != nil {
		if spec.ObjectStorage == nil {
			spec.ObjectStorage = &velero.ObjectStorageLocation{}
		}
		got := spec.ObjectStorage
		if got.Bucket == "" {
			got.Bucket = want.Bucket
		}
		if got.Prefix == "" {
			got.Prefix = want.Prefix
		}
		if len(got.CACert) == 0 {
			got.CACert = want.CACert
		}
	}
	if spec.AccessMode == "" {
		spec.AccessMode = e.AccessMode
	}
	if spec.BackupSyncPeriod == nil {
		spec.BackupSyncPeriod = e.BackupSyncPeriod
	}
	if spec.ValidationFrequency == nil {
		spec.ValidationFrequency = e.ValidationFrequency
	}
}

// TenantBSLSpec is the Velero location made from a tenant's spec (the
// enforced values filled in): never the default, its keys under the
// namespace's own prefix (<namespace>[/<prefix>]) so that tenants sharing
// a bucket never see each other's backups, its credential the copy of the
// tenant's Secret named secretName in the admin namespace.
func TenantBSLSpec(namespace string, in *velero.BackupStorageLocationSpec, secretName string) *velero.BackupStorageLocationSpec {
	out := in.DeepCopy()
	out.Default = false
	if out.ObjectStorage != nil {
		out.ObjectStorage.Prefix = TenantPrefix(namespace, out.ObjectStorage.Prefix)
		out.ObjectStorage.CACertRef = nil
	}
	if out.Credential != nil {
		out.Credential.Name = secretName
	}
	return out
}

// TenantPrefix is the prefix a tenant's location stores under.
func TenantPrefix(namespace, prefix string) string {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return namespace
	}
	return namespace + "/" + prefix
}

// LocationProblem says why a NonAdminBackupStorageLocation cannot take
// backups ("" when it can, as far as its own status says).
func LocationProblem(l *oadp.NonAdminBackupStorageLocation) string {
	switch approved := meta.FindStatusCondition(l.Status.Conditions, string(oadpv1alpha1.NonAdminBSLConditionApproved)); {
	case l.DeletionTimestamp != nil:
		return fmt.Sprintf("NonAdminBackupStorageLocation %s is being deleted", l.Name)
	case approved == nil || approved.Status != metav1.ConditionTrue:
		return fmt.Sprintf("NonAdminBackupStorageLocation %s is not approved by the administrator", l.Name)
	case l.Status.Phase != oadp.NonAdminPhaseCreated || l.Status.VeleroBackupStorageLocation == nil || l.Status.VeleroBackupStorageLocation.NACUUID == "":
		return fmt.Sprintf("NonAdminBackupStorageLocation %s is not ready (phase %q)", l.Name, l.Status.Phase)
	}
	return ""
}
