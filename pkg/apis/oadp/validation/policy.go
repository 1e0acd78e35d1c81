package validation

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	"github.com/backstop-io/backstop/pkg/apis/velero"
)

// Policy is the admin's policy for tenants in effect: the spec.nonAdmin of
// a DataProtectionApplication of the admin namespace (nil: none, and
// tenants' backups and restores run unrestricted by it).
type Policy struct {
	// DPA names the DataProtectionApplication it comes from.
	DPA      string
	NonAdmin *oadp.NonAdmin
}

// InEffect chooses the policy among dpas: the oldest with spec.nonAdmin
// (ties: by name), as upstream reads the first one.
func InEffect(dpas []oadp.DataProtectionApplication) *Policy {
	candidates := make([]*oadp.DataProtectionApplication, 0, len(dpas))
	for i := range dpas {
		if dpas[i].Spec.NonAdmin != nil && dpas[i].DeletionTimestamp == nil {
			candidates = append(candidates, &dpas[i])
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	sort.Slice(candidates, func(i, j int) bool {
		a, b := candidates[i], candidates[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	return &Policy{DPA: candidates[0].Name, NonAdmin: candidates[0].Spec.NonAdmin}
}

// DefaultBackupSyncPeriod is how often tenants' storage locations are
// read for backups when the policy sets no backupSyncPeriod (upstream's
// default).
const DefaultBackupSyncPeriod = 2 * time.Minute

// DefaultGarbageCollectionPeriod is how often every admin-side object made
// for tenants is checked again when the policy sets no
// garbageCollectionPeriod (upstream's default).
const DefaultGarbageCollectionPeriod = 24 * time.Hour

// BackupSyncPeriod is how often tenants' storage locations are read for
// backups (0: never).
func (p *Policy) BackupSyncPeriod() time.Duration {
	if p == nil || p.NonAdmin == nil || p.NonAdmin.BackupSyncPeriod == nil {
		return DefaultBackupSyncPeriod
	}
	return p.NonAdmin.BackupSyncPeriod.Duration
}

// GarbageCollectionPeriod is how often the admin-side objects made for
// tenants are checked again for an owner (0: never).
func (p *Policy) GarbageCollectionPeriod() time.Duration {
	if p == nil || p.NonAdmin == nil || p.NonAdmin.GarbageCollectionPeriod == nil {
		return DefaultGarbageCollectionPeriod
	}
	return p.NonAdmin.GarbageCollectionPeriod.Duration
}

// Disabled reports whether the policy turns tenants' backups and restores
// off (enable: false).
func (p *Policy) Disabled() bool {
	return p != nil && p.NonAdmin != nil && p.NonAdmin.Enable != nil && !*p.NonAdmin.Enable
}

func (p *Policy) enforcedBackup() *velero.BackupSpec {
	if p == nil || p.NonAdmin == nil {
		return nil
	}
	return p.NonAdmin.EnforceBackupSpec
}

func (p *Policy) enforcedRestore() *velero.RestoreSpec {
	if p == nil || p.NonAdmin == nil {
		return nil
	}
	return p.NonAdmin.EnforceRestoreSpec
}

// disabled refuses a tenant's object when the policy turns them off.
func (p *Policy) disabled(kind string, path *field.Path) field.ErrorList {
	if !p.Disabled() {
		return nil
	}
	return field.ErrorList{field.Forbidden(path, fmt.Sprintf("%ss are disabled by the administrator (DataProtectionApplication %s spec.nonAdmin.enable is false)", kind, p.DPA))}
}

// ValidateBackupPolicy checks a tenant's backup spec against the policy:
// each field the admin enforces must be unset or hold the enforced value.
func ValidateBackupPolicy(spec *velero.BackupSpec, p *Policy, path *field.Path) field.ErrorList {
	errs := p.disabled("NonAdminBackup", path)
	if spec == nil {
		return errs
	}
	return append(errs, conflicts(reflect.ValueOf(spec).Elem(), reflect.ValueOf(p.enforcedBackup()), path)...)
}

// ValidateRestorePolicy is ValidateBackupPolicy for restore specs.
func ValidateRestorePolicy(spec *velero.RestoreSpec, p *Policy, path *field.Path) field.ErrorList {
	errs := p.disabled("NonAdminRestore", path)
	if spec == nil {
		return errs
	}
	return append(errs, conflicts(reflect.ValueOf(spec).Elem(), reflect.ValueOf(p.enforcedRestore()), path)...)
}

// EnforceBackup fills the fields of spec the tenant left unset with the
// values the policy enforces.
func EnforceBackup(spec *velero.BackupSpec, p *Policy) {
	if enforced := p.enforcedBackup(); enforced != nil {
		// A copy: what is filled in shares nothing with the policy.
		fill(reflect.ValueOf(spec).Elem(), reflect.ValueOf(enforced.DeepCopy()))
	}
}

// EnforceRestore fills the fields of spec the tenant left unset with the
// values the policy enforces.
func EnforceRestore(spec *velero.RestoreSpec, p *Policy) {
	if enforced := p.enforcedRestore(); enforced != nil {
		fill(reflect.ValueOf(spec).Elem(), reflect.ValueOf(enforced.DeepCopy()))
	}
}

// conflicts lists the top-level fields of spec (a struct) set to a value
// other than the one enforced (a pointer to the same struct, or nil), with
// upstream's message.
func conflicts(spec, enforced reflect.Value, path *field.Path) field.ErrorList {
	if enforced.IsNil() {
		return nil
	}
	enforced = enforced.Elem()
	var errs field.ErrorList
	for i := 0; i < spec.NumField(); i++ {
		want, got := enforced.Field(i), spec.Field(i)
		if want.IsZero() || got.IsZero() || equality.Semantic.DeepEqual(want.Interface(), got.Interface()) {
			continue
		}
		name := jsonName(spec.Type().Field(i))
		errs = append(errs, field.Forbidden(path.Child(name),
			fmt.Sprintf("the administrator has restricted %s field value to %s", path.Child(name), show(want.Interface()))))
	}
	return errs
}

// fill sets the unset top-level fields of spec to those of enforced (a
// pointer to the same struct, which fill's caller owns).
func fill(spec, enforced reflect.Value) {
	enforced = enforced.Elem()
	for i := 0; i < spec.NumField(); i++ {
		if want := enforced.Field(i); !want.IsZero() && spec.Field(i).IsZero() {
			spec.Field(i).Set(want)
		}
	}
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		return f.Name
	}
	return name
}

// show renders an enforced value for a message, as JSON.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// ValidateNonAdminPolicy checks a DataProtectionApplication's spec.nonAdmin
// as the OADP operator does: what admins may not enforce (it would take a
// tenant out of its namespace, or is the tenant's own choice of location),
// and periods that are not negative, with garbage collection less frequent
// than sync.
func ValidateNonAdminPolicy(na *oadp.NonAdmin, path *field.Path) field.ErrorList {
	if na == nil {
		return nil
	}
	errs := validateTenantLimits(na.TenantLimits, path.Child("tenantLimits"))
	for i, e := range na.AllowedLocationEndpoints {
		_, prefixErr := netip.ParsePrefix(e)
		_, addrErr := netip.ParseAddr(e)
		if prefixErr != nil && addrErr != nil && len(validation.IsDNS1123Subdomain(strings.ToLower(e))) > 0 {
			errs = append(errs, field.Invalid(path.Child("allowedLocationEndpoints").Index(i), e, "a host name, an IP address or a CIDR"))
		}
	}
	nonEnforceable := func(p *field.Path) {
		errs = append(errs, field.Forbidden(p, fmt.Sprintf("DPA %s is non-enforceable by admins", p)))
	}
	if b := na.EnforceBackupSpec; b != nil {
		p := path.Child("enforceBackupSpec")
		if b.StorageLocation != "" {
			nonEnforceable(p.Child("storageLocation"))
		}
		if len(b.VolumeSnapshotLocations) > 0 {
			nonEnforceable(p.Child("volumeSnapshotLocations"))
		}
		if len(b.IncludedNamespaces) > 0 {
			nonEnforceable(p.Child("includedNamespaces"))
		}
		if len(b.ExcludedNamespaces) > 0 {
			nonEnforceable(p.Child("excludedNamespaces"))
		}
		if b.IncludeClusterResources != nil && *b.IncludeClusterResources {
			nonEnforceable(p.Child("includeClusterResources"))
		}
		if len(b.IncludedClusterScopedResources) > 0 {
			nonEnforceable(p.Child("includedClusterScopedResources"))
		}
		if b.ResourcePolicy != nil {
			nonEnforceable(p.Child("resourcePolicy"))
		}
	}
	if r := na.EnforceRestoreSpec; r != nil {
		p := path.Child("enforceRestoreSpec")
		if r.ScheduleName != "" {
			nonEnforceable(p.Child("scheduleName"))
		}
		if r.BackupName != "" {
			nonEnforceable(p.Child("backupName"))
		}
		if len(r.IncludedNamespaces) > 0 {
			nonEnforceable(p.Child("includedNamespaces"))
		}
		if len(r.ExcludedNamespaces) > 0 {
			nonEnforceable(p.Child("excludedNamespaces"))
		}
		if len(r.NamespaceMapping) > 0 {
			nonEnforceable(p.Child("namespaceMapping"))
		}
		if r.IncludeClusterResources != nil && *r.IncludeClusterResources {
			nonEnforceable(p.Child("includeClusterResources"))
		}
		if r.ResourceModifier != nil {
			nonEnforceable(p.Child("resourceModifier"))
		}
	}
	gc, sync := na.GarbageCollectionPeriod, na.BackupSyncPeriod
	if gc != nil && gc.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("garbageCollectionPeriod"), gc.Duration.String(), "must not be negative"))
	}
	if sync != nil && sync.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("backupSyncPeriod"), sync.Duration.String(), "must not be negative"))
	}
	if gc != nil && sync != nil && gc.Duration > 0 && sync.Duration > 0 && gc.Duration <= sync.Duration {
		errs = append(errs, field.Invalid(path.Child("garbageCollectionPeriod"), gc.Duration.String(),
			fmt.Sprintf("must be greater than backupSyncPeriod (%s)", sync.Duration)))
	}
	return errs
}

// AllowedLocationEndpoints are the hosts, addresses and CIDRs tenants'
// storage locations may reach although they are refused otherwise.
func (p *Policy) AllowedLocationEndpoints() []string {
	if p == nil || p.NonAdmin == nil {
		return nil
	}
	return p.NonAdmin.AllowedLocationEndpoints
}
