package backupsync

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

// TestTenantBackup: what a tenant's bucket says of a backup is not
// believed beyond the backup itself.
func TestTenantBackup(t *testing.T) {
	yes := true
	for _, tc := range []struct {
		name       string
		in         velerov1.Backup
		syncedName string
	}{
		{"origin claiming another namespace", velerov1.Backup{
			ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{oadpv1alpha1.NabOriginNACUUIDLabel: "tenant-b-x", "velero.io/schedule-name": "s"},
				Annotations: map[string]string{oadpv1alpha1.NabOriginNamespaceAnnotation: "tenant-b", oadpv1alpha1.NabOriginNameAnnotation: "nightly"}},
			Spec: velerov1.BackupSpec{IncludedNamespaces: []string{"tenant-b", "kube-system"}, ExcludedNamespaces: []string{"x"}, IncludeClusterResources: &yes,
				IncludedClusterScopedResources: []string{"clusterroles"}, TTL: metav1.Duration{Duration: 3600e9}},
		}, "nightly"},
		{"no origin", velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, ""},
		{"an origin name that is no name", velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "b",
			Annotations: map[string]string{oadpv1alpha1.NabOriginNameAnnotation: "../Not A Name"}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tenantBackup(&tc.in, "tenant-a")
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Labels) != 0 {
				t.Errorf("labels kept: %v", out.Labels)
			}
			want := map[string]string{}
			if tc.syncedName != "" {
				want[oadpv1alpha1.SyncedNameAnnotation] = tc.syncedName
			}
			if !reflect.DeepEqual(out.Annotations, want) {
				t.Errorf("annotations %v, want %v", out.Annotations, want)
			}
			s := out.Spec
			if !reflect.DeepEqual(s.IncludedNamespaces, []string{"tenant-a"}) || s.ExcludedNamespaces != nil ||
				s.IncludeClusterResources == nil || *s.IncludeClusterResources || len(s.IncludedClusterScopedResources) != 0 {
				t.Errorf("spec not held to tenant-a: %+v", s)
			}
			if s.TTL != tc.in.Spec.TTL {
				t.Errorf("ttl %v, want %v kept", s.TTL, tc.in.Spec.TTL)
			}
		})
	}
}
