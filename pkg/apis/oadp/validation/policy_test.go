package validation

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	"github.com/backstop-io/backstop/pkg/apis/velero"
)

func TestBackupPolicy(t *testing.T) {
	policy := &Policy{DPA: "dpa", NonAdmin: &oadp.NonAdmin{EnforceBackupSpec: &velero.BackupSpec{
		TTL: metav1.Duration{Duration: 3 * time.Hour}, SnapshotVolumes: ptr.To(false), ExcludedResources: []string{"secrets"},
	}}}
	path := field.NewPath("spec", "backupSpec")
	cases := []struct {
		name string
		spec velero.BackupSpec
		// refused is the field refused ("" for none); filled, what the
		// spec holds after enforcement.
		refused string
		detail  string
	}{
		{name: "unset fields are filled"},
		{name: "the enforced value itself", spec: velero.BackupSpec{TTL: metav1.Duration{Duration: 3 * time.Hour}}},
		{name: "another ttl", spec: velero.BackupSpec{TTL: metav1.Duration{Duration: time.Hour}},
			refused: "spec.backupSpec.ttl", detail: `the administrator has restricted spec.backupSpec.ttl field value to "3h0m0s"`},
		{name: "snapshots on", spec: velero.BackupSpec{SnapshotVolumes: ptr.To(true)},
			refused: "spec.backupSpec.snapshotVolumes", detail: "the administrator has restricted spec.backupSpec.snapshotVolumes field value to false"},
		{name: "other exclusions", spec: velero.BackupSpec{ExcludedResources: []string{"configmaps"}},
			refused: "spec.backupSpec.excludedResources", detail: `["secrets"]`},
	}
	for _, c := range cases {
		errs := ValidateBackupPolicy(&c.spec, policy, path)
		switch {
		case c.refused == "" && len(errs) > 0:
			t.Errorf("%s: refused: %v", c.name, errs)
		case c.refused != "" && (len(errs) != 1 || errs[0].Field != c.refused || !strings.Contains(errs[0].Detail, c.detail)):
			t.Errorf("%s: got %v, want one error at %s saying %q", c.name, errs, c.refused, c.detail)
		}
		if c.refused != "" {
			continue
		}
		EnforceBackup(&c.spec, policy)
		if c.spec.TTL.Duration != 3*time.Hour || c.spec.SnapshotVolumes == nil || *c.spec.SnapshotVolumes || len(c.spec.ExcludedResources) != 1 {
			t.Errorf("%s: after enforcement %+v", c.name, c.spec)
		}
		c.spec.ExcludedResources[0] = "changed"
		if policy.NonAdmin.EnforceBackupSpec.ExcludedResources[0] != "secrets" {
			t.Fatalf("%s: filling in shares the policy's values", c.name)
		}
	}
	if errs := ValidateBackupPolicy(&velero.BackupSpec{}, &Policy{DPA: "dpa", NonAdmin: &oadp.NonAdmin{Enable: ptr.To(false)}}, path); len(errs) != 1 {
		t.Errorf("disabled: %v", errs)
	}
	if errs := ValidateBackupPolicy(&velero.BackupSpec{TTL: metav1.Duration{Duration: time.Minute}}, nil, path); len(errs) != 0 {
		t.Errorf("no policy: %v", errs)
	}
}

func TestValidatePolicy(t *testing.T) {
	path := field.NewPath("spec", "nonAdmin")
	cases := []struct {
		name  string
		na    oadp.NonAdmin
		field string
	}{
		{"enforced ttl", oadp.NonAdmin{EnforceBackupSpec: &velero.BackupSpec{TTL: metav1.Duration{Duration: time.Hour}}}, ""},
		{"enforced namespaces", oadp.NonAdmin{EnforceBackupSpec: &velero.BackupSpec{IncludedNamespaces: []string{"a"}}}, "spec.nonAdmin.enforceBackupSpec.includedNamespaces"},
		{"enforced location", oadp.NonAdmin{EnforceBackupSpec: &velero.BackupSpec{StorageLocation: "x"}}, "spec.nonAdmin.enforceBackupSpec.storageLocation"},
		{"enforced mapping", oadp.NonAdmin{EnforceRestoreSpec: &velero.RestoreSpec{NamespaceMapping: map[string]string{"a": "b"}}}, "spec.nonAdmin.enforceRestoreSpec.namespaceMapping"},
		{"negative sync", oadp.NonAdmin{BackupSyncPeriod: &metav1.Duration{Duration: -time.Minute}}, "spec.nonAdmin.backupSyncPeriod"},
		{"gc before sync", oadp.NonAdmin{BackupSyncPeriod: &metav1.Duration{Duration: time.Hour}, GarbageCollectionPeriod: &metav1.Duration{Duration: time.Minute}}, "spec.nonAdmin.garbageCollectionPeriod"},
		{"allowed endpoints", oadp.NonAdmin{AllowedLocationEndpoints: []string{"minio.tenants.svc", "127.0.0.1", "10.0.0.0/8", "fd00::/8"}}, ""},
		{"an allowed endpoint that is no host", oadp.NonAdmin{AllowedLocationEndpoints: []string{"minio", "http://x/"}}, "spec.nonAdmin.allowedLocationEndpoints[1]"},
	}
	for _, c := range cases {
		errs := ValidateNonAdminPolicy(&c.na, path)
		if c.field == "" && len(errs) > 0 || c.field != "" && (len(errs) != 1 || errs[0].Field != c.field) {
			t.Errorf("%s: got %v, want an error at %q", c.name, errs, c.field)
		}
	}
}
