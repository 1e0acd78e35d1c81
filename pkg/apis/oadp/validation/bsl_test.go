package validation

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	"github.com/backstop-io/backstop/pkg/apis/velero"
)

func TestCheckNonAdminBSL(t *testing.T) {
	valid := func(mutate func(*velero.BackupStorageLocationSpec)) *oadp.NonAdminBackupStorageLocationSpec {
		s := &velero.BackupStorageLocationSpec{Provider: "aws", Config: map[string]string{"region": "minio"},
			Credential:  &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "cloud"},
			StorageType: velero.StorageType{ObjectStorage: &velero.ObjectStorageLocation{Bucket: "team"}}}
		if mutate != nil {
			mutate(s)
		}
		return &oadp.NonAdminBackupStorageLocationSpec{BackupStorageLocationSpec: s}
	}
	enforced := &Policy{DPA: "dpa", NonAdmin: &oadp.NonAdmin{BackupSyncPeriod: &metav1.Duration{Duration: 2 * time.Minute},
		EnforceBSLSpec: &oadp.EnforceBackupStorageLocationSpec{Provider: "aws",
			Config:        map[string]string{"s3Url": "https://s3.internal", "credentialsFile": "/etc/backstop/tenants"},
			ObjectStorage: &velero.ObjectStorageLocation{Bucket: "tenants"}}}}
	cases := []struct {
		name   string
		spec   *oadp.NonAdminBackupStorageLocationSpec
		policy *Policy
		// refused is the field refused ("" for none), detail part of its message.
		refused, detail string
	}{
		{name: "valid", spec: valid(nil)},
		{name: "spec missing", spec: &oadp.NonAdminBackupStorageLocationSpec{}, refused: "spec.backupStorageLocationSpec", detail: "required"},
		{name: "default", spec: valid(func(s *velero.BackupStorageLocationSpec) { s.Default = true }),
			refused: "spec.backupStorageLocationSpec.default", detail: "can only be set to false"},
		{name: "a directory of the server", spec: valid(func(s *velero.BackupStorageLocationSpec) { s.Provider = "filesystem" }),
			refused: "spec.backupStorageLocationSpec.provider", detail: "supported values"},
		{name: "a credentials file of the server", spec: valid(func(s *velero.BackupStorageLocationSpec) { s.Config["credentialsFile"] = "/etc/passwd" }),
			refused: "spec.backupStorageLocationSpec.config[credentialsFile]", detail: "names a file of the server"},
		{name: "a credentials file the admin enforces", spec: valid(func(s *velero.BackupStorageLocationSpec) { s.ObjectStorage.Bucket = "" }), policy: enforced},
		{name: "no credential", spec: valid(func(s *velero.BackupStorageLocationSpec) { s.Credential = nil }),
			refused: "spec.backupStorageLocationSpec.credential", detail: "required"},
		{name: "a credential without key", spec: valid(func(s *velero.BackupStorageLocationSpec) { s.Credential.Key = "" }),
			refused: "spec.backupStorageLocationSpec.credential.key", detail: "required"},
		{name: "a CA Secret", spec: valid(func(s *velero.BackupStorageLocationSpec) {
			s.ObjectStorage.CACertRef = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}, Key: "ca.crt"}
		}), refused: "spec.backupStorageLocationSpec.objectStorage.caCertRef", detail: "caCert"},
		{name: "another bucket than enforced", spec: valid(nil), policy: enforced,
			refused: "spec.backupStorageLocationSpec.objectStorage", detail: "bucket: tenants"},
		{name: "another endpoint than enforced", spec: valid(func(s *velero.BackupStorageLocationSpec) {
			s.ObjectStorage.Bucket = ""
			s.Config["s3Url"] = "http://169.254.169.254"
		}), policy: enforced, refused: "spec.backupStorageLocationSpec.config[s3Url]", detail: "https://s3.internal"},
		{name: "a sync period not shorter than the non-admin sync's", spec: valid(func(s *velero.BackupStorageLocationSpec) {
			s.ObjectStorage.Bucket = ""
			s.BackupSyncPeriod = &metav1.Duration{Duration: 5 * time.Minute}
		}), policy: enforced, refused: "spec.backupStorageLocationSpec.backupSyncPeriod", detail: "shorter"},
		{name: "tenants turned off", spec: valid(nil), policy: &Policy{DPA: "dpa", NonAdmin: &oadp.NonAdmin{Enable: ptr.To(false)}},
			refused: "spec.backupStorageLocationSpec", detail: "disabled by the administrator"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := CheckNonAdminBSL(c.spec, c.policy)
			if c.refused == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			for _, e := range errs {
				if e.Field == c.refused && strings.Contains(e.Error(), c.detail) {
					return
				}
			}
			t.Errorf("want %s refused with %q, got %v", c.refused, c.detail, errs)
		})
	}
}

func TestEnforceAndTenantBSLSpec(t *testing.T) {
	policy := &Policy{NonAdmin: &oadp.NonAdmin{EnforceBSLSpec: &oadp.EnforceBackupStorageLocationSpec{
		Config: map[string]string{"s3Url": "https://s3.internal"}, ObjectStorage: &velero.ObjectStorageLocation{Bucket: "tenants", Prefix: "ignored"}}}}
	spec := &velero.BackupStorageLocationSpec{Provider: "aws", Default: true, Config: map[string]string{"region": "minio"},
		Credential:  &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "cloud"},
		StorageType: velero.StorageType{ObjectStorage: &velero.ObjectStorageLocation{Prefix: "/apps/"}}}
	EnforceBSL(spec, policy)
	out := TenantBSLSpec("team-a", spec, "team-a-loc-uuid")
	if out.ObjectStorage.Bucket != "tenants" || out.Config["s3Url"] != "https://s3.internal" || out.Config["region"] != "minio" {
		t.Errorf("enforced values not filled in: %+v", out)
	}
	if out.ObjectStorage.Prefix != "team-a/apps" {
		t.Errorf("prefix %q, want the tenant's own team-a/apps", out.ObjectStorage.Prefix)
	}
	if out.Default || out.Credential.Name != "team-a-loc-uuid" || out.Credential.Key != "cloud" {
		t.Errorf("default %v, credential %+v: want not default and the copied Secret", out.Default, out.Credential)
	}
	if policy.NonAdmin.EnforceBSLSpec.ObjectStorage.Prefix != "ignored" || spec.Credential.Name != "creds" {
		t.Errorf("the policy or the tenant's spec changed: %+v %+v", policy.NonAdmin.EnforceBSLSpec.ObjectStorage, spec.Credential)
	}
	if got := TenantPrefix("team-a", ""); got != "team-a" {
		t.Errorf("TenantPrefix without prefix = %q", got)
	}
}
