package nonadmin

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/enginetest"
)

// TestNonAdminDownloadSync: a tenant's download request becomes a Velero
// DownloadRequest for its own finished backup only, named by the tenant's
// request's UID; what it cannot have yet backs off with the reason; one
// whose link expired is deleted.
func TestNonAdminDownloadSync(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	id := oadpv1alpha1.NewNACUUID("team", "nightly")
	nab := &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "team"},
		Status: oadpv1alpha1.NonAdminBackupStatus{Phase: oadpv1alpha1.NonAdminPhaseCreated, VeleroBackup: &oadpv1alpha1.VeleroBackup{NACUUID: id, Name: id, Namespace: adminNS}}}
	backup := func(phase velerov1.BackupPhase, forNamespace string) *velerov1.Backup {
		return &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: adminNS, Labels: map[string]string{oadpv1alpha1.NabOriginNACUUIDLabel: id},
			Annotations: map[string]string{oadpv1alpha1.NabOriginNamespaceAnnotation: forNamespace, oadpv1alpha1.NabOriginNameAnnotation: "nightly"}},
			Status: velerov1.BackupStatus{Phase: phase}}
	}
	request := func(target string, phase oadpv1alpha1.NonAdminPhase) *oadpv1alpha1.NonAdminDownloadRequest {
		return &oadpv1alpha1.NonAdminDownloadRequest{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "team", UID: "d-uid"},
			Spec:   oadpv1alpha1.NonAdminDownloadRequestSpec{Target: velerov1.DownloadTarget{Kind: velerov1.DownloadTargetKindBackupLog, Name: target}},
			Status: oadpv1alpha1.NonAdminDownloadRequestStatus{Phase: phase}}
	}
	expired := &velerov1.DownloadRequest{ObjectMeta: metav1.ObjectMeta{Name: veleroRequestName("d-uid"), Namespace: adminNS,
		Labels:      map[string]string{oadpv1alpha1.NadrOriginNACUUIDLabel: "d-uid"},
		Annotations: map[string]string{oadpv1alpha1.NadrOriginNamespaceAnnotation: "team", oadpv1alpha1.NadrOriginNameAnnotation: "d"}},
		Status: velerov1.DownloadRequestStatus{Phase: velerov1.DownloadRequestPhaseProcessed, Expiration: &metav1.Time{Time: now.Add(-time.Minute)}}}
	for _, tc := range []struct {
		name string
		objs []runtime.Object
		// backsOff: words of the reason (""); made: a Velero request made;
		// deleted: the tenant's request deleted.
		backsOff      string
		made, deleted bool
	}{
		{name: "its finished backup's log", objs: []runtime.Object{request("nightly", ""), nab, backup(velerov1.BackupPhaseCompleted, "team")}, made: true},
		{name: "its backup still running", objs: []runtime.Object{request("nightly", ""), nab, backup(velerov1.BackupPhaseInProgress, "team")}, backsOff: "has not finished"},
		{name: "a Backup made for another namespace", objs: []runtime.Object{request("nightly", ""), nab, backup(velerov1.BackupPhaseCompleted, "other-team")}, backsOff: "has no Velero backup"},
		{name: "no such NonAdminBackup", objs: []runtime.Object{request("nope", "")}, backsOff: "NonAdminBackup nope of namespace team has no Velero backup"},
		{name: "its link expired: the request goes", objs: []runtime.Object{request("nightly", oadpv1alpha1.NonAdminPhaseCreated), expired}, deleted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, w := newDownloadEngine(t, now, tc.objs...)
			if err := c.sync(ctx, cache.ObjectName{Namespace: "team", Name: "d"}); err != nil {
				t.Fatal(err)
			}
			got, err := w.Client.OadpV1alpha1().NonAdminDownloadRequests("team").Get(ctx, "d", metav1.GetOptions{})
			if deleted := apierrors.IsNotFound(err); deleted != tc.deleted {
				t.Fatalf("the tenant's request deleted: %v (%v), want %v", deleted, err, tc.deleted)
			}
			if tc.backsOff != "" {
				var why string
				for _, cond := range got.Status.Conditions {
					if cond.Status == metav1.ConditionTrue {
						why = cond.Message
					}
				}
				if got.Status.Phase != oadpv1alpha1.NonAdminPhaseBackingOff || !strings.Contains(why, tc.backsOff) {
					t.Errorf("status %s %v, want BackingOff saying %q", got.Status.Phase, got.Status.Conditions, tc.backsOff)
				}
			}
			dr, err := w.Client.VeleroV1().DownloadRequests(adminNS).Get(ctx, veleroRequestName("d-uid"), metav1.GetOptions{})
			if made := err == nil && !tc.deleted; made != tc.made {
				t.Fatalf("a Velero DownloadRequest made: %v (%v), want %v", made, err, tc.made)
			}
			if tc.made && (dr.Spec.Target.Name != id || dr.Spec.Target.Kind != velerov1.DownloadTargetKindBackupLog || !c.made.owns(got, dr)) {
				t.Errorf("Velero request %+v, labels %v: want the log of %s, made for team/d", dr.Spec, dr.Labels, id)
			}
		})
	}
}

// newDownloadEngine is the NonAdminDownloadRequest engine over objs, its
// clock at now.
func newDownloadEngine(t *testing.T, now time.Time, objs ...runtime.Object) (*DownloadController, *enginetest.World) {
	t.Helper()
	w := enginetest.New(t, objs...)
	v, o := w.Factory.Velero().V1(), w.Factory.Oadp().V1alpha1()
	c, err := NewDownloadController(DownloadConfig{Client: w.Client, AdminNamespace: adminNS, Requests: o.NonAdminDownloadRequests(),
		NonAdminBackups: o.NonAdminBackups(), NonAdminRestores: o.NonAdminRestores(), DownloadRequests: v.DownloadRequests(),
		Backups: v.Backups(), Restores: v.Restores(), Clock: clocktesting.NewFakeClock(now)})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}
