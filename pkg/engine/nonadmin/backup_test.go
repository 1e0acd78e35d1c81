package nonadmin

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/enginetest"
)

const adminNS = "backstop-system"

func newBackupEngine(t *testing.T, objs ...runtime.Object) (*BackupController, *enginetest.World) {
	t.Helper()
	w := enginetest.New(t, objs...)
	v, o := w.Factory.Velero().V1(), w.Factory.Oadp().V1alpha1()
	c, err := NewBackupController(BackupConfig{Client: w.Client, AdminNamespace: adminNS,
		NonAdminBackups: o.NonAdminBackups(), NonAdminRestores: o.NonAdminRestores(), Backups: v.Backups(), Requests: v.DeleteBackupRequests(),
		DPAs: o.DataProtectionApplications(), TenantLocations: o.NonAdminBackupStorageLocations(), VeleroLocations: v.BackupStorageLocations(),
		Clock: clocktesting.NewFakeClock(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

func nab(name string, spec velerov1.BackupSpec) *oadpv1alpha1.NonAdminBackup {
	return &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team", UID: "nab-uid",
		Finalizers: []string{oadpv1alpha1.NonAdminBackupFinalizer}}, Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &spec}}
}

// TestNonAdminBackupSync: a tenant's NonAdminBackup becomes one Backup in
// the admin namespace, of its own namespace only, recorded before it is
// made so that a restart makes the same one; a spec the tenant rules
// refuse backs off with the reason; a Backup of its name made for another
// is not taken.
func TestNonAdminBackupSync(t *testing.T) {
	ctx := context.Background()
	key := cache.ObjectName{Namespace: "team", Name: "n"}
	read := func(t *testing.T, w *enginetest.World) *oadpv1alpha1.NonAdminBackup {
		t.Helper()
		n, err := w.Client.OadpV1alpha1().NonAdminBackups("team").Get(ctx, "n", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("accepted: its Backup made, of its namespace, phase Created", func(t *testing.T) {
		c, w := newBackupEngine(t, nab("n", velerov1.BackupSpec{}))
		if err := c.sync(ctx, key); err != nil {
			t.Fatal(err)
		}
		n := read(t, w)
		vb := n.Status.VeleroBackup
		if n.Status.Phase != oadpv1alpha1.NonAdminPhaseCreated || vb == nil || vb.NACUUID == "" || vb.Namespace != adminNS {
			t.Fatalf("status %+v", n.Status)
		}
		b, err := w.Client.VeleroV1().Backups(adminNS).Get(ctx, vb.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("its Backup: %v", err)
		}
		if got := b.Spec.IncludedNamespaces; len(got) != 1 || got[0] != "team" {
			t.Errorf("the Backup takes namespaces %v, want the tenant's own", got)
		}
		if !ownedBackup(n, b) {
			t.Errorf("the Backup's labels %v and annotations %v do not say it was made for team/n", b.Labels, b.Annotations)
		}
	})

	t.Run("another tenant's namespace: backing off with the reason", func(t *testing.T) {
		c, w := newBackupEngine(t, nab("n", velerov1.BackupSpec{IncludedNamespaces: []string{"other-team"}}))
		if err := c.sync(ctx, key); err != nil {
			t.Fatal(err)
		}
		n := read(t, w)
		accepted := meta.FindStatusCondition(n.Status.Conditions, string(oadpv1alpha1.NonAdminConditionAccepted))
		if n.Status.Phase != oadpv1alpha1.NonAdminPhaseBackingOff || accepted == nil || accepted.Status != metav1.ConditionFalse ||
			accepted.Reason != oadpv1alpha1.ReasonInvalidBackupSpec || !strings.Contains(accepted.Message, "includedNamespaces") {
			t.Errorf("status %s, Accepted %+v; want BackingOff, refused for its includedNamespaces", n.Status.Phase, accepted)
		}
		if list, _ := w.Client.VeleroV1().Backups(adminNS).List(ctx, metav1.ListOptions{}); len(list.Items) != 0 {
			t.Errorf("%d Backups made for a refused spec", len(list.Items))
		}
	})

	t.Run("recorded before a restart: the same Backup, not a second", func(t *testing.T) {
		recorded := nab("n", velerov1.BackupSpec{})
		id := oadpv1alpha1.NewNACUUID("team", "n")
		recorded.Status.VeleroBackup = &oadpv1alpha1.VeleroBackup{NACUUID: id, Name: id, Namespace: adminNS}
		recorded.Status.Phase = oadpv1alpha1.NonAdminPhaseNew
		made := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: adminNS,
			Labels:      map[string]string{oadpv1alpha1.NabOriginNACUUIDLabel: id},
			Annotations: map[string]string{oadpv1alpha1.NabOriginNamespaceAnnotation: "team", oadpv1alpha1.NabOriginNameAnnotation: "n"}}}
		c, w := newBackupEngine(t, recorded, made)
		if err := c.sync(ctx, key); err != nil {
			t.Fatal(err)
		}
		if n := read(t, w); n.Status.Phase != oadpv1alpha1.NonAdminPhaseCreated || n.Status.VeleroBackup.Name != id {
			t.Errorf("status %+v, want Created with the Backup made before", n.Status)
		}
		for _, a := range w.Writes() {
			if a.GetResource().Resource == "backups" && a.GetVerb() == "create" {
				t.Error("a second Backup was created")
			}
		}
	})

	t.Run("a Backup of its name made for another: not taken", func(t *testing.T) {
		recorded := nab("n", velerov1.BackupSpec{})
		id := oadpv1alpha1.NewNACUUID("team", "n")
		recorded.Status.VeleroBackup = &oadpv1alpha1.VeleroBackup{NACUUID: id, Name: id, Namespace: adminNS}
		stranger := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: adminNS,
			Annotations: map[string]string{oadpv1alpha1.NabOriginNamespaceAnnotation: "other-team", oadpv1alpha1.NabOriginNameAnnotation: "n"}}}
		c, w := newBackupEngine(t, recorded, stranger)
		err := c.sync(ctx, key)
		if !errors.Is(err, errMadeForAnother) {
			t.Errorf("sync: %v, want the Backup refused as another's", err)
		}
		if n := read(t, w); n.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated {
			t.Error("the NonAdminBackup took another's Backup")
		}
		if _, err := w.Client.VeleroV1().Backups(adminNS).Get(ctx, id, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			t.Error("the other's Backup was deleted")
		}
	})
}

// TestNonAdminBackupOrphans: a Backup made for a NonAdminBackup is deleted
// once that NonAdminBackup is gone or names another Backup, never while
// the API says it still owns it (a lister that has not seen it yet
// included), and never when the server found it in a location.
func TestNonAdminBackupOrphans(t *testing.T) {
	ctx := context.Background()
	id := oadpv1alpha1.NewNACUUID("team", "n")
	made := func(annotations map[string]string) *velerov1.Backup {
		a := map[string]string{oadpv1alpha1.NabOriginNamespaceAnnotation: "team", oadpv1alpha1.NabOriginNameAnnotation: "n"}
		for k, v := range annotations {
			a[k] = v
		}
		return &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: adminNS, UID: "b-uid",
			Labels: map[string]string{oadpv1alpha1.NabOriginNACUUIDLabel: id}, Annotations: a}}
	}
	owner := nab("n", velerov1.BackupSpec{})
	owner.Status.VeleroBackup = &oadpv1alpha1.VeleroBackup{NACUUID: id, Name: id, Namespace: adminNS}
	other := owner.DeepCopy()
	other.Status.VeleroBackup = &oadpv1alpha1.VeleroBackup{NACUUID: "another", Name: "another", Namespace: adminNS}
	for _, tc := range []struct {
		name string
		// inLister, inAPI: the NonAdminBackup as each has it (nil: none).
		inLister, inAPI *oadpv1alpha1.NonAdminBackup
		backup          *velerov1.Backup
		deleted         bool
	}{
		{name: "its NonAdminBackup is gone", backup: made(nil), deleted: true},
		{name: "its NonAdminBackup names another Backup", inLister: other, inAPI: other, backup: made(nil), deleted: true},
		{name: "its NonAdminBackup owns it", inLister: owner, inAPI: owner, backup: made(nil)},
		{name: "the lister has not seen its NonAdminBackup yet", inAPI: owner, backup: made(nil)},
		{name: "found in a location: never an orphan", backup: made(map[string]string{velerov1.SyncedFromLocationAnnotation: "default"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{tc.backup}
			if tc.inAPI != nil {
				objs = append(objs, tc.inAPI)
			}
			c, w := newBackupEngine(t, objs...)
			if tc.inLister == nil && tc.inAPI != nil {
				if err := w.Factory.Oadp().V1alpha1().NonAdminBackups().Informer().GetIndexer().Delete(tc.inAPI); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.made.syncOrphan(ctx, cache.ObjectName{Namespace: adminNS, Name: id}); err != nil {
				t.Fatal(err)
			}
			_, err := w.Client.VeleroV1().Backups(adminNS).Get(ctx, id, metav1.GetOptions{})
			if deleted := apierrors.IsNotFound(err); deleted != tc.deleted {
				t.Errorf("Backup deleted: %v, want %v", deleted, tc.deleted)
			}
		})
	}
}

// TestNonAdminBackupStoresNoQueuePosition: a NonAdminBackup read with its
// queue positions filled in (as the registry fills a list) is mirrored
// back without them: positions are never stored, so the queue moving
// rewrites nothing.
func TestNonAdminBackupStoresNoQueuePosition(t *testing.T) {
	ctx := context.Background()
	id := oadpv1alpha1.NewNACUUID("team", "n")
	n := nab("n", velerov1.BackupSpec{})
	n.Status = oadpv1alpha1.NonAdminBackupStatus{Phase: oadpv1alpha1.NonAdminPhaseCreated, QueueInfo: &oadpv1alpha1.QueueInfo{EstimatedQueuePosition: 3},
		VeleroBackup: &oadpv1alpha1.VeleroBackup{NACUUID: id, Name: id, Namespace: adminNS, Status: &velerov1.BackupStatus{Phase: velerov1.BackupPhaseQueued, QueuePosition: 3}}}
	b := &velerov1.Backup{ObjectMeta: backupLink.objectMeta(adminNS, id, id, n), Status: velerov1.BackupStatus{Phase: velerov1.BackupPhaseQueued}}
	c, w := newBackupEngine(t, n, b)
	if err := c.sync(ctx, cache.ObjectName{Namespace: "team", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	got, err := w.Client.OadpV1alpha1().NonAdminBackups("team").Get(ctx, "n", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.QueueInfo == nil || got.Status.QueueInfo.EstimatedQueuePosition != 0 || got.Status.VeleroBackup.Status.QueuePosition != 0 {
		t.Errorf("stored queueInfo %+v, veleroBackup.status.queuePosition %d: want positions not stored", got.Status.QueueInfo, got.Status.VeleroBackup.Status.QueuePosition)
	}
}

// TestNonAdminBackupDeletionWaitsForLock: a NonAdminBackup deleted while
// its backup is locked in its storage location (S3 object lock) shows the
// refused DeleteBackupRequest and makes no other until the lock's date,
// then asks again.
func TestNonAdminBackupDeletionWaitsForLock(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		lockEnds  time.Time
		wantAgain bool
	}{
		{"locked for another hour: not asked again", now.Add(time.Hour), false},
		{"the lock has ended: asked again", now.Add(-time.Minute), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deleted := nab("n", velerov1.BackupSpec{})
			deleted.Spec.DeleteBackup = true
			deleted.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Hour)} // held by its finalizer
			id := oadpv1alpha1.NewNACUUID("team", "n")
			deleted.Status.VeleroBackup = &oadpv1alpha1.VeleroBackup{NACUUID: id, Name: id, Namespace: adminNS}
			expiration := metav1.NewTime(tc.lockEnds.Add(-velerov1.ObjectLockSkew))
			made := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: adminNS,
				Labels:      map[string]string{oadpv1alpha1.NabOriginNACUUIDLabel: id},
				Annotations: map[string]string{oadpv1alpha1.NabOriginNamespaceAnnotation: "team", oadpv1alpha1.NabOriginNameAnnotation: "n"}},
				Status: velerov1.BackupStatus{Phase: velerov1.BackupPhaseCompleted, Expiration: &expiration,
					Conditions: []metav1.Condition{{Type: velerov1.BackupConditionLocked, Status: metav1.ConditionTrue, Reason: velerov1.ObjectLockCompliance}}}}
			refused := &velerov1.DeleteBackupRequest{ObjectMeta: metav1.ObjectMeta{Name: "refused", Namespace: adminNS,
				Labels: map[string]string{velerov1.BackupNameLabel: id}, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
				Spec: velerov1.DeleteBackupRequestSpec{BackupName: id},
				Status: velerov1.DeleteBackupRequestStatus{Phase: velerov1.DeleteBackupRequestPhaseProcessed,
					Errors: []string{"backup cannot be deleted before the lock's date"}}}
			c, w := newBackupEngine(t, deleted, made, refused)
			if err := c.sync(ctx, cache.ObjectName{Namespace: "team", Name: "n"}); err != nil {
				t.Fatal(err)
			}
			made2 := 0
			for _, a := range w.Writes() {
				if a.GetResource().Resource == "deletebackuprequests" && a.GetVerb() == "create" {
					made2++
				}
			}
			if again := made2 > 0; again != tc.wantAgain {
				t.Errorf("a new DeleteBackupRequest made: %v, want %v", again, tc.wantAgain)
			}
			n, err := w.Client.OadpV1alpha1().NonAdminBackups("team").Get(ctx, "n", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if r := n.Status.VeleroDeleteBackupRequest; r == nil || r.Status == nil || (!tc.wantAgain && (len(r.Status.Errors) != 1 || !strings.Contains(r.Status.Errors[0], "lock"))) {
				t.Errorf("the NonAdminBackup's deletion request: %+v", r)
			}
		})
	}
}
