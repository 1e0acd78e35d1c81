package nonadmin

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/enginetest"
)

// TestNonAdminScheduleSync: a tenant's schedule becomes a Velero Schedule
// whose backups take the tenant's namespace only, with its next run in the
// status; a template the tenant rules refuse backs off, and pauses the
// Velero Schedule it had made, until the cause goes.
func TestNonAdminScheduleSync(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 0, 30, 0, 0, time.UTC)
	id := oadpv1alpha1.NewNACUUID("team", "hourly")
	nas := func(spec velerov1.BackupSpec, made bool) *oadpv1alpha1.NonAdminSchedule {
		s := &oadpv1alpha1.NonAdminSchedule{ObjectMeta: metav1.ObjectMeta{Name: "hourly", Namespace: "team", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
			Spec: oadpv1alpha1.NonAdminScheduleSpec{Schedule: "@every 1h", Template: oadpv1alpha1.NonAdminScheduleTemplate{BackupSpec: &spec}}}
		if made {
			s.Status.Phase = oadpv1alpha1.NonAdminPhaseCreated
			s.Status.VeleroSchedule = &oadpv1alpha1.VeleroSchedule{NACUUID: id, Name: id, Namespace: adminNS}
		}
		return s
	}
	veleroSchedule := &velerov1.Schedule{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: adminNS, Labels: map[string]string{oadpv1alpha1.NasOriginNACUUIDLabel: id},
		Annotations: map[string]string{oadpv1alpha1.NasOriginNamespaceAnnotation: "team", oadpv1alpha1.NasOriginNameAnnotation: "hourly"}},
		Spec: velerov1.ScheduleSpec{Schedule: "@every 1h", Template: velerov1.BackupSpec{IncludedNamespaces: []string{"team"}}}}
	for _, tc := range []struct {
		name   string
		objs   []runtime.Object
		refuse string // "": accepted
		paused bool   // its Velero Schedule is paused afterwards
	}{
		{name: "accepted: a Velero Schedule of the tenant's namespace", objs: []runtime.Object{nas(velerov1.BackupSpec{}, false)}},
		{name: "another namespace: backing off, nothing made", objs: []runtime.Object{nas(velerov1.BackupSpec{IncludedNamespaces: []string{"other-team"}}, false)},
			refuse: "includedNamespaces"},
		{name: "refused once made: its Velero Schedule paused", objs: []runtime.Object{nas(velerov1.BackupSpec{IncludedNamespaces: []string{"other-team"}}, true), veleroSchedule},
			refuse: "includedNamespaces", paused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, w := newScheduleEngine(t, now, tc.objs...)
			if err := c.sync(ctx, cache.ObjectName{Namespace: "team", Name: "hourly"}); err != nil {
				t.Fatal(err)
			}
			got, err := w.Client.OadpV1alpha1().NonAdminSchedules("team").Get(ctx, "hourly", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			schedules, err := w.Client.VeleroV1().Schedules(adminNS).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.refuse != "" {
				accepted := meta.FindStatusCondition(got.Status.Conditions, string(oadpv1alpha1.NonAdminConditionAccepted))
				if accepted == nil || accepted.Status != metav1.ConditionFalse || !strings.Contains(accepted.Message, tc.refuse) {
					t.Errorf("Accepted %+v, want false saying %q", accepted, tc.refuse)
				}
				if !tc.paused && (got.Status.Phase != oadpv1alpha1.NonAdminPhaseBackingOff || len(schedules.Items) != 0) {
					t.Errorf("status %s, %d Velero Schedules; want BackingOff and none", got.Status.Phase, len(schedules.Items))
				}
				if tc.paused && (len(schedules.Items) != 1 || !schedules.Items[0].Spec.Paused || got.Status.Phase != oadpv1alpha1.NonAdminPhaseCreated) {
					t.Errorf("status %s, Velero Schedules %d (paused: %v); want Created with its schedule paused", got.Status.Phase, len(schedules.Items),
						len(schedules.Items) == 1 && schedules.Items[0].Spec.Paused)
				}
				return
			}
			if got.Status.Phase != oadpv1alpha1.NonAdminPhaseCreated || got.Status.NextRun == nil || len(schedules.Items) != 1 {
				t.Fatalf("status %s, next run %v, %d Velero Schedules; want Created, a next run, one schedule", got.Status.Phase, got.Status.NextRun, len(schedules.Items))
			}
			vs := schedules.Items[0]
			if ns := vs.Spec.Template.IncludedNamespaces; len(ns) != 1 || ns[0] != "team" || vs.Spec.Schedule != "@every 1h" || vs.Name != got.Status.VeleroSchedule.Name {
				t.Errorf("Velero Schedule %s %+v, want @every 1h of namespace team, named in the status", vs.Name, vs.Spec)
			}
		})
	}
}

// TestNonAdminScheduleCarriesItsEditor: the Velero Schedule of a
// NonAdminSchedule carries the user recorded on it (whoever last changed
// its spec, at admission), also when another editor changed it after it
// was made: the backups of the spec that user wrote are that user's.
func TestNonAdminScheduleCarriesItsEditor(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 0, 30, 0, 0, time.UTC)
	id := oadpv1alpha1.NewNACUUID("team", "hourly")
	const alice, bob = `{"username":"alice"}`, `{"username":"bob"}`
	nas := &oadpv1alpha1.NonAdminSchedule{ObjectMeta: metav1.ObjectMeta{Name: "hourly", Namespace: "team", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
		Annotations: map[string]string{oadpv1alpha1.CreatedByAnnotation: bob}},
		Spec:   oadpv1alpha1.NonAdminScheduleSpec{Schedule: "@every 2h", Template: oadpv1alpha1.NonAdminScheduleTemplate{BackupSpec: &velerov1.BackupSpec{}}},
		Status: oadpv1alpha1.NonAdminScheduleStatus{Phase: oadpv1alpha1.NonAdminPhaseCreated, VeleroSchedule: &oadpv1alpha1.VeleroSchedule{NACUUID: id, Name: id, Namespace: adminNS}}}
	made := &velerov1.Schedule{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: adminNS, Labels: map[string]string{oadpv1alpha1.NasOriginNACUUIDLabel: id},
		Annotations: map[string]string{oadpv1alpha1.NasOriginNamespaceAnnotation: "team", oadpv1alpha1.NasOriginNameAnnotation: "hourly", oadpv1alpha1.CreatedByAnnotation: alice}},
		Spec: velerov1.ScheduleSpec{Schedule: "@every 1h", Template: velerov1.BackupSpec{IncludedNamespaces: []string{"team"}}}}
	c, w := newScheduleEngine(t, now, nas, made)
	if err := c.sync(ctx, cache.ObjectName{Namespace: "team", Name: "hourly"}); err != nil {
		t.Fatal(err)
	}
	vs, err := w.Client.VeleroV1().Schedules(adminNS).Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if vs.Spec.Schedule != "@every 2h" || vs.Annotations[oadpv1alpha1.CreatedByAnnotation] != bob {
		t.Errorf("Velero Schedule %s by %s, want @every 2h by bob", vs.Spec.Schedule, vs.Annotations[oadpv1alpha1.CreatedByAnnotation])
	}
}

// newScheduleEngine is the NonAdminSchedule engine over objs, its clock at
// now.
func newScheduleEngine(t *testing.T, now time.Time, objs ...runtime.Object) (*ScheduleController, *enginetest.World) {
	t.Helper()
	w := enginetest.New(t, objs...)
	v, o := w.Factory.Velero().V1(), w.Factory.Oadp().V1alpha1()
	c, err := NewScheduleController(ScheduleConfig{Client: w.Client, AdminNamespace: adminNS, Schedules: o.NonAdminSchedules(),
		NonAdminBackups: o.NonAdminBackups(), VeleroSchedules: v.Schedules(), Backups: v.Backups(), DPAs: o.DataProtectionApplications(),
		TenantLocations: o.NonAdminBackupStorageLocations(), VeleroLocations: v.BackupStorageLocations(), Clock: clocktesting.NewFakeClock(now)})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}
