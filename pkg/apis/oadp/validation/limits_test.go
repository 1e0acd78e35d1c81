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

func TestLimits(t *testing.T) {
	if got := (*Policy)(nil).Limits(); got.MinScheduleInterval != DefaultMinScheduleInterval || got.MaxBackupsPerNamespace != DefaultMaxBackupsPerNamespace {
		t.Errorf("defaults %+v", got)
	}
	p := &Policy{DPA: "dpa", NonAdmin: &oadp.NonAdmin{TenantLimits: &oadp.TenantLimits{
		MinScheduleInterval: &metav1.Duration{Duration: time.Hour}, MaxRestoresPerNamespace: ptr.To[int32](3)}}}
	l := p.Limits()
	if l.MinScheduleInterval != time.Hour || l.MaxRestoresPerNamespace != 3 || l.MaxBackupsPerNamespace != DefaultMaxBackupsPerNamespace {
		t.Errorf("limits %+v", l)
	}
	if errs := ValidateNonAdminPolicy(&oadp.NonAdmin{TenantLimits: &oadp.TenantLimits{MaxBackupsPerNamespace: ptr.To[int32](-1)}}, field.NewPath("spec", "nonAdmin")); len(errs) != 1 ||
		errs[0].Field != "spec.nonAdmin.tenantLimits.maxBackupsPerNamespace" {
		t.Errorf("a negative limit: %v", errs)
	}
}

func TestScheduleInterval(t *testing.T) {
	l := Limits{MinScheduleInterval: 15 * time.Minute}
	for schedule, refused := range map[string]bool{
		"@every 1m": true, "* * * * *": true, "*/5 * * * *": true, "*/10 0 * * *": true, // every 10 min within one hour of the day
		"0,1 3 * * *":  true, // two runs a minute apart once a day
		"*/15 * * * *": false, "@hourly": false, "0 2 * * *": false, "@every 20m": false, "CRON_TZ=Europe/Paris 30 1 * * *": false,
	} {
		errs := ValidateScheduleInterval(schedule, l, field.NewPath("spec", "schedule"), "dpa")
		if refused != (len(errs) > 0) {
			t.Errorf("%q: %v, want refused %v", schedule, errs, refused)
		}
		if len(errs) > 0 && (errs[0].Field != "spec.schedule" || !strings.Contains(errs[0].Detail, "minScheduleInterval")) {
			t.Errorf("%q: %v", schedule, errs[0])
		}
	}
	if errs := ValidateScheduleInterval("@every 1s", Limits{}, field.NewPath("spec", "schedule"), ""); len(errs) != 0 {
		t.Errorf("no minimum: %v", errs)
	}
}

func TestValidationFrequencyAndCount(t *testing.T) {
	l := Limits{MinValidationFrequency: time.Minute}
	p := field.NewPath("x")
	for d, refused := range map[time.Duration]bool{time.Second: true, 59 * time.Second: true, 0: false, time.Minute: false, time.Hour: false} {
		if errs := ValidateValidationFrequency(d, l, p, ""); refused != (len(errs) > 0) {
			t.Errorf("%s: %v", d, errs)
		}
	}
	if errs := CheckCount("NonAdminBackup", 3, 3, p, "dpa"); len(errs) != 1 || errs[0].Type != field.ErrorTypeForbidden {
		t.Errorf("at the limit: %v", errs)
	}
	if errs := CheckCount("NonAdminBackup", 2, 3, p, "dpa"); len(errs) != 0 {
		t.Errorf("under the limit: %v", errs)
	}
	if errs := CheckCount("NonAdminBackup", 5000, 0, p, "dpa"); len(errs) != 0 {
		t.Errorf("no limit: %v", errs)
	}
	// A tenant's location asking to be validated every second.
	spec := &oadp.NonAdminBackupStorageLocationSpec{BackupStorageLocationSpec: &velero.BackupStorageLocationSpec{Provider: "aws",
		StorageType:         velero.StorageType{ObjectStorage: &velero.ObjectStorageLocation{Bucket: "b"}},
		Credential:          nil,
		ValidationFrequency: &metav1.Duration{Duration: time.Second}}}
	found := false
	for _, e := range ValidateNonAdminBSLSpec(spec, nil, field.NewPath("spec")) {
		found = found || e.Field == "spec.backupStorageLocationSpec.validationFrequency"
	}
	if !found {
		t.Error("a tenant's location validated every second was not refused")
	}
}
