package nonadmin

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/enginetest"
)

// TestNonAdminSyncAdopts: a backup synced from a tenant's location gets a
// NonAdminBackup in the namespace the server recorded for that location,
// never one its bucket names; under the name its NonAdminBackup had when
// that name is free, else its own; nothing for an admin's location or
// while the policy turns tenants off.
func TestNonAdminSyncAdopts(t *testing.T) {
	ctx := context.Background()
	lid := oadpv1alpha1.NewNACUUID("team", "bucket")
	tenantBSL := &velerov1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: lid, Namespace: adminNS,
		Labels:      map[string]string{oadpv1alpha1.NabslOriginNACUUIDLabel: lid},
		Annotations: map[string]string{oadpv1alpha1.NabslOriginNamespaceAnnotation: "team", oadpv1alpha1.NabslOriginNameAnnotation: "bucket"}}}
	adminBSL := &velerov1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: adminNS}}
	location := &oadpv1alpha1.NonAdminBackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: "bucket", Namespace: "team"},
		Status: oadpv1alpha1.NonAdminBackupStorageLocationStatus{VeleroBackupStorageLocation: &oadpv1alpha1.VeleroBackupStorageLocation{NACUUID: lid, Name: lid, Namespace: adminNS}}}
	synced := func(on string) *velerov1.Backup {
		return &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "found", Namespace: adminNS,
			// What the bucket said: the backup's old NonAdminBackup, and
			// another tenant's namespace it claims.
			Annotations: map[string]string{velerov1.SyncedFromLocationAnnotation: on, oadpv1alpha1.SyncedNameAnnotation: "nightly",
				oadpv1alpha1.NabOriginNamespaceAnnotation: "victim"}},
			Spec: velerov1.BackupSpec{StorageLocation: on}, Status: velerov1.BackupStatus{Phase: velerov1.BackupPhaseCompleted}}
	}
	tenantsOwn := &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "team"}}
	off := &oadpv1alpha1.DataProtectionApplication{ObjectMeta: metav1.ObjectMeta{Name: "dpa", Namespace: adminNS},
		Spec: oadpv1alpha1.DataProtectionApplicationSpec{NonAdmin: &oadpv1alpha1.NonAdmin{Enable: ptr.To(false)}}}
	for _, tc := range []struct {
		name string
		objs []runtime.Object
		want string // the NonAdminBackup of namespace team made for it ("": none)
	}{
		{name: "its old name", objs: []runtime.Object{synced(lid), tenantBSL, location}, want: "nightly"},
		{name: "its old name taken by the tenant's own: its backup's name", objs: []runtime.Object{synced(lid), tenantBSL, location, tenantsOwn}, want: "found"},
		{name: "an admin's location: none", objs: []runtime.Object{synced("default"), adminBSL}},
		{name: "tenants turned off: none", objs: []runtime.Object{synced(lid), tenantBSL, location, off}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := enginetest.New(t, tc.objs...)
			v, o := w.Factory.Velero().V1(), w.Factory.Oadp().V1alpha1()
			c, err := NewSyncController(SyncConfig{Client: w.Client, AdminNamespace: adminNS, Backups: v.Backups(), VeleroLocations: v.BackupStorageLocations(),
				TenantLocations: o.NonAdminBackupStorageLocations(), NonAdminBackups: o.NonAdminBackups(), DPAs: o.DataProtectionApplications()})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.sync(ctx, cache.ObjectName{Namespace: adminNS, Name: "found"}); err != nil {
				t.Fatal(err)
			}
			if victims, _ := w.Client.OadpV1alpha1().NonAdminBackups("victim").List(ctx, metav1.ListOptions{}); len(victims.Items) != 0 {
				t.Fatalf("a NonAdminBackup was made in the namespace the bucket named")
			}
			b, err := w.Client.VeleroV1().Backups(adminNS).Get(ctx, "found", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if b.Labels[oadpv1alpha1.NabOriginNACUUIDLabel] != "" {
					t.Errorf("the backup was linked: %v", b.Labels)
				}
				return
			}
			nab, err := w.Client.OadpV1alpha1().NonAdminBackups("team").Get(ctx, tc.want, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("NonAdminBackup team/%s: %v", tc.want, err)
			}
			if vb := nab.Status.VeleroBackup; vb == nil || vb.Name != "found" || nab.Spec.BackupSpec == nil || nab.Spec.BackupSpec.StorageLocation != "bucket" {
				t.Errorf("NonAdminBackup team/%s: status %+v, spec %+v; want it naming backup found on location bucket", tc.want, nab.Status.VeleroBackup, nab.Spec.BackupSpec)
			}
			if b.Annotations[oadpv1alpha1.NabOriginNamespaceAnnotation] != "team" || b.Annotations[oadpv1alpha1.NabOriginNameAnnotation] != tc.want ||
				b.Labels[oadpv1alpha1.NabOriginNACUUIDLabel] != nab.Status.VeleroBackup.NACUUID {
				t.Errorf("the backup's link %v %v, want team/%s", b.Labels, b.Annotations, tc.want)
			}
		})
	}
}
