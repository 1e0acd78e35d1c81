package validation

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	"github.com/backstop-io/backstop/pkg/apis/velero"
)

// TestTenantBackupLabels: the labels a tenant's backup (or schedule
// template) would carry may not be the server's link labels: a schedule's
// backups take them, and the server routes by them.
func TestTenantBackupLabels(t *testing.T) {
	for key, server := range map[string]bool{
		"openshift.io/oadp-nab-origin-nacuuid": true, "openshift.io/oadp": true, "openshift.io/oadp-nab-synced-from-nacuuid": true,
		"velero.io/storage-location": true, "velero.io/schedule-name": true, "VELERO.IO/backup-name": true, "x.velero.io/y": true,
		"backstop.io/vm-backup-series": true, "app.kubernetes.io/managed-by": true,
		"app": false, "team.example.com/owner": false, "openshift.io/other": false, "notvelero.io/x": false,
	} {
		spec := &oadp.NonAdminBackupSpec{BackupSpec: &velero.BackupSpec{Metadata: velero.Metadata{Labels: map[string]string{key: "v"}}}}
		errs := ValidateNonAdminBackupSpec("tenant-a", spec, field.NewPath("spec"))
		schedErrs := ValidateNonAdminScheduleSpec("tenant-a", &oadp.NonAdminScheduleSpec{Schedule: "@daily",
			Template: oadp.NonAdminScheduleTemplate{BackupSpec: spec.BackupSpec}}, field.NewPath("spec"))
		if !server {
			if len(errs)+len(schedErrs) != 0 {
				t.Errorf("label %s refused: %v %v", key, errs, schedErrs)
			}
			continue
		}
		want := "spec.backupSpec.metadata.labels[" + key + "]"
		if len(errs) != 1 || errs[0].Field != want || errs[0].Type != field.ErrorTypeForbidden {
			t.Errorf("label %s: errors %v, want one Forbidden at %s", key, errs, want)
		}
		want = "spec.template.backupSpec.metadata.labels[" + key + "]"
		if len(schedErrs) != 1 || schedErrs[0].Field != want {
			t.Errorf("schedule template label %s: errors %v, want one at %s", key, schedErrs, want)
		}
	}
}

// TestTenantResourceModifier: a tenant's restore may name resource
// modifiers only as a ConfigMap (of its own namespace, where the restore
// reads it), and passes the reference on to the Velero restore.
func TestTenantResourceModifier(t *testing.T) {
	core, apps := "", "apps"
	for _, tc := range []struct {
		name string
		ref  *corev1.TypedLocalObjectReference
		want []string // the refused fields
	}{
		{"none", nil, nil},
		{"a ConfigMap", &corev1.TypedLocalObjectReference{Kind: "ConfigMap", Name: "rules"}, nil},
		{"a configmap, as Velero's CLI spells it, of the core group", &corev1.TypedLocalObjectReference{APIGroup: &core, Kind: "configmap", Name: "rules"}, nil},
		{"a Secret", &corev1.TypedLocalObjectReference{Kind: "Secret", Name: "rules"}, []string{"spec.restoreSpec.resourceModifier.kind"}},
		{"another group", &corev1.TypedLocalObjectReference{APIGroup: &apps, Kind: "ConfigMap", Name: "rules"}, []string{"spec.restoreSpec.resourceModifier.apiGroup"}},
		{"no name", &corev1.TypedLocalObjectReference{Kind: "ConfigMap"}, []string{"spec.restoreSpec.resourceModifier.name"}},
		{"a name that is a path", &corev1.TypedLocalObjectReference{Kind: "ConfigMap", Name: "../tenant-b/rules"}, []string{"spec.restoreSpec.resourceModifier.name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &oadp.NonAdminRestoreSpec{RestoreSpec: &velero.RestoreSpec{BackupName: "b", ResourceModifier: tc.ref}}
			var got []string
			for _, err := range ValidateNonAdminRestoreSpec("tenant-a", spec, field.NewPath("spec")) {
				got = append(got, err.Field)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("refused %v, want %v", got, tc.want)
			}
			if len(tc.want) > 0 {
				return
			}
			out := TenantRestoreSpec("tenant-a", spec.RestoreSpec, "velero-b")
			if !reflect.DeepEqual(out.ResourceModifier, tc.ref) {
				t.Errorf("the Velero restore's resource modifier %+v, want %+v", out.ResourceModifier, tc.ref)
			}
		})
	}
}
