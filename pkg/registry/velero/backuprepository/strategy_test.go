package backuprepository

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/backstop-io/backstop/pkg/apis/velero"
)

// TestValidate: the maintenance keys of spec.repositoryConfig are read as
// the maintenance reads them (Velero's names of the full interval, a
// duration, kopia's safeties), anything else refused with its field; a
// negative frequency is refused.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		config    map[string]string
		frequency time.Duration
		wantField string
	}{
		{name: "none"},
		{name: "Velero's names", config: map[string]string{"fullMaintenanceInterval": "fastGC", "maintenanceSafety": "full"}},
		{name: "a duration, no safety", config: map[string]string{"fullMaintenanceInterval": "30m", "maintenanceSafety": "none"}},
		{name: "other keys are others'", config: map[string]string{"cacheLimitMB": "2048"}},
		{name: "an unknown interval", config: map[string]string{"fullMaintenanceInterval": "hourly"}, wantField: "spec.repositoryConfig[fullMaintenanceInterval]"},
		{name: "an interval too short", config: map[string]string{"fullMaintenanceInterval": "10ms"}, wantField: "spec.repositoryConfig[fullMaintenanceInterval]"},
		{name: "an unknown safety", config: map[string]string{"maintenanceSafety": "sometimes"}, wantField: "spec.repositoryConfig[maintenanceSafety]"},
		{name: "a negative frequency", frequency: -time.Hour, wantField: "spec.maintenanceFrequency"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &velero.BackupRepository{ObjectMeta: metav1.ObjectMeta{Name: "shop-default-kopia", Namespace: "velero"},
				Spec: velero.BackupRepositorySpec{VolumeNamespace: "shop", BackupStorageLocation: "default", RepositoryType: "kopia",
					MaintenanceFrequency: metav1.Duration{Duration: tc.frequency}, RepositoryConfig: tc.config}}
			errs := NewStrategy(nil).Validate(context.Background(), obj)
			switch {
			case tc.wantField == "" && len(errs) > 0:
				t.Errorf("refused: %v", errs)
			case tc.wantField != "" && (len(errs) != 1 || errs[0].Field != tc.wantField):
				t.Errorf("errors %v, want one at %s", errs, tc.wantField)
			}
		})
	}
}
