package nonadmin

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	"github.com/backstop-io/backstop/pkg/apis/restoreas"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/enginetest"
)

// TestNonAdminRestoreSync: a tenant's NonAdminRestore becomes a Restore in
// the admin namespace of its own NonAdminBackup's Backup, into its own
// namespace, with the rights of the user who made it; without a maker, or
// of a backup not finished or not its own, it backs off with the reason.
func TestNonAdminRestoreSync(t *testing.T) {
	ctx := context.Background()
	const maker = `{"username":"alice","groups":["system:authenticated"]}`
	id := oadpv1alpha1.NewNACUUID("team", "nightly")
	createdNAB := &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "team"},
		Status: oadpv1alpha1.NonAdminBackupStatus{Phase: oadpv1alpha1.NonAdminPhaseCreated,
			VeleroBackup: &oadpv1alpha1.VeleroBackup{NACUUID: id, Name: id, Namespace: adminNS}}}
	backup := func(phase velerov1.BackupPhase, forNamespace string) *velerov1.Backup {
		return &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: adminNS,
			Labels:      map[string]string{oadpv1alpha1.NabOriginNACUUIDLabel: id},
			Annotations: map[string]string{oadpv1alpha1.NabOriginNamespaceAnnotation: forNamespace, oadpv1alpha1.NabOriginNameAnnotation: "nightly"}},
			Status: velerov1.BackupStatus{Phase: phase}}
	}
	nar := func(annotations map[string]string) *oadpv1alpha1.NonAdminRestore {
		return &oadpv1alpha1.NonAdminRestore{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "team", Annotations: annotations,
			Finalizers: []string{oadpv1alpha1.NonAdminRestoreFinalizer}},
			Spec: oadpv1alpha1.NonAdminRestoreSpec{RestoreSpec: &velerov1.RestoreSpec{BackupName: "nightly"}}}
	}
	byAlice := map[string]string{oadpv1alpha1.CreatedByAnnotation: maker}
	for _, tc := range []struct {
		name    string
		objs    []runtime.Object
		refused string // "": a Restore is made
	}{
		{name: "its finished backup, made by alice: restored as alice", objs: []runtime.Object{nar(byAlice), createdNAB, backup(velerov1.BackupPhaseCompleted, "team")}},
		{name: "no maker recorded: refused", objs: []runtime.Object{nar(nil), createdNAB, backup(velerov1.BackupPhaseCompleted, "team")}, refused: "no record of the user who created it"},
		{name: "its backup still running", objs: []runtime.Object{nar(byAlice), createdNAB, backup(velerov1.BackupPhaseInProgress, "team")}, refused: "its backup is InProgress"},
		{name: "its backup failed", objs: []runtime.Object{nar(byAlice), createdNAB, backup(velerov1.BackupPhaseFailed, "team")}, refused: "its backup ended Failed"},
		{name: "a Backup made for another namespace", objs: []runtime.Object{nar(byAlice), createdNAB, backup(velerov1.BackupPhaseCompleted, "other-team")}, refused: "its Velero Backup is gone"},
		{name: "no such NonAdminBackup", objs: []runtime.Object{nar(byAlice)}, refused: "NonAdminBackup nightly not found in namespace team"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, w := newRestoreEngine(t, tc.objs...)
			if err := c.sync(ctx, cache.ObjectName{Namespace: "team", Name: "r"}); err != nil {
				t.Fatal(err)
			}
			got, err := w.Client.OadpV1alpha1().NonAdminRestores("team").Get(ctx, "r", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			restores, err := w.Client.VeleroV1().Restores(adminNS).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.refused != "" {
				accepted := meta.FindStatusCondition(got.Status.Conditions, string(oadpv1alpha1.NonAdminConditionAccepted))
				if got.Status.Phase != oadpv1alpha1.NonAdminPhaseBackingOff || accepted == nil || !strings.Contains(accepted.Message, tc.refused) {
					t.Errorf("status %s, Accepted %+v; want BackingOff saying %q", got.Status.Phase, accepted, tc.refused)
				}
				if len(restores.Items) != 0 {
					t.Errorf("%d Restores made for a refused NonAdminRestore", len(restores.Items))
				}
				return
			}
			if got.Status.Phase != oadpv1alpha1.NonAdminPhaseCreated || len(restores.Items) != 1 {
				t.Fatalf("status %s, %d Restores; want Created with one", got.Status.Phase, len(restores.Items))
			}
			r := restores.Items[0]
			if r.Spec.BackupName != id || len(r.Spec.IncludedNamespaces) != 1 || r.Spec.IncludedNamespaces[0] != "team" {
				t.Errorf("Restore spec %+v, want backup %s into namespace team only", r.Spec, id)
			}
			as, ok, err := restoreas.Of(r.Annotations)
			if !ok || err != nil || as.Username != "alice" {
				t.Errorf("the Restore restores as %+v (%v, %v), want alice", as, ok, err)
			}
		})
	}
}

// TestNonAdminRestoreNotAnothers: a Restore of the recorded name made for
// another NonAdminRestore is never taken as this one's.
func TestNonAdminRestoreNotAnothers(t *testing.T) {
	ctx := context.Background()
	id := oadpv1alpha1.NewNACUUID("team", "nightly")
	nab := &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "team"},
		Status: oadpv1alpha1.NonAdminBackupStatus{Phase: oadpv1alpha1.NonAdminPhaseCreated,
			VeleroBackup: &oadpv1alpha1.VeleroBackup{NACUUID: id, Name: id, Namespace: adminNS}}}
	backup := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: adminNS, Labels: map[string]string{oadpv1alpha1.NabOriginNACUUIDLabel: id},
		Annotations: map[string]string{oadpv1alpha1.NabOriginNamespaceAnnotation: "team", oadpv1alpha1.NabOriginNameAnnotation: "nightly"}},
		Status: velerov1.BackupStatus{Phase: velerov1.BackupPhaseCompleted}}
	rid := oadpv1alpha1.NewNACUUID("team", "r")
	nar := &oadpv1alpha1.NonAdminRestore{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "team",
		Annotations: map[string]string{oadpv1alpha1.CreatedByAnnotation: `{"username":"alice"}`}, Finalizers: []string{oadpv1alpha1.NonAdminRestoreFinalizer}},
		Spec:   oadpv1alpha1.NonAdminRestoreSpec{RestoreSpec: &velerov1.RestoreSpec{BackupName: "nightly"}},
		Status: oadpv1alpha1.NonAdminRestoreStatus{Phase: oadpv1alpha1.NonAdminPhaseNew, VeleroRestore: &oadpv1alpha1.VeleroRestore{NACUUID: rid, Name: rid, Namespace: adminNS}}}
	stranger := &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: rid, Namespace: adminNS,
		Annotations: map[string]string{oadpv1alpha1.NarOriginNamespaceAnnotation: "other-team", oadpv1alpha1.NarOriginNameAnnotation: "r"}}}
	c, w := newRestoreEngine(t, nab, backup, nar, stranger)
	if err := c.sync(ctx, cache.ObjectName{Namespace: "team", Name: "r"}); !errors.Is(err, errMadeForAnother) {
		t.Errorf("sync: %v, want the Restore refused as another's", err)
	}
	if got, err := w.Client.OadpV1alpha1().NonAdminRestores("team").Get(ctx, "r", metav1.GetOptions{}); err != nil || got.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated {
		t.Errorf("the NonAdminRestore took another's Restore (%v)", err)
	}
}

func newRestoreEngine(t *testing.T, objs ...runtime.Object) (*RestoreController, *enginetest.World) {
	t.Helper()
	w := enginetest.New(t, objs...)
	v, o := w.Factory.Velero().V1(), w.Factory.Oadp().V1alpha1()
	c, err := NewRestoreController(RestoreConfig{Client: w.Client, AdminNamespace: adminNS, NonAdminRestores: o.NonAdminRestores(),
		NonAdminBackups: o.NonAdminBackups(), Restores: v.Restores(), Backups: v.Backups(), DPAs: o.DataProtectionApplications()})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}
