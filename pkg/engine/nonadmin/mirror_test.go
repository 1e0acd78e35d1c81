package nonadmin

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/enginetest"
)

// mirrorKind is one tenant kind and its admin-side kind, as the mirror
// tests build them.
type mirrorKind struct {
	name string
	// engine builds the kind's engine over objs and returns its mirror's
	// steps.
	engine func(t *testing.T, objs ...runtime.Object) (orphanStep, *enginetest.World)
	// tenant is the tenant object team/t, its status recording the
	// admin-side object of that name under that NACUUID.
	tenant func(recorded, nacuuid string) runtime.Object
	// admin is the admin-side object name, linked to the tenant object
	// team/t under nacuuid ("": not linked).
	admin func(name, nacuuid string) runtime.Object
	// exists reads the admin-side object name.
	exists func(ctx context.Context, w *enginetest.World, name string) error
}

type orphanStep func(ctx context.Context, key cache.ObjectName) error

func linked(l link, name, nacuuid string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Namespace: adminNS, UID: "admin-uid"}
	if nacuuid != "" {
		l.stamp(&m, nacuuid, "team", "t")
	}
	return m
}

var mirrorKinds = []mirrorKind{{
	name: "NonAdminBackup",
	engine: func(t *testing.T, objs ...runtime.Object) (orphanStep, *enginetest.World) {
		c, w := newBackupEngine(t, objs...)
		return c.made.syncOrphan, w
	},
	tenant: func(recorded, id string) runtime.Object {
		return &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "team"},
			Status: oadpv1alpha1.NonAdminBackupStatus{VeleroBackup: &oadpv1alpha1.VeleroBackup{Name: recorded, NACUUID: id}}}
	},
	admin: func(name, id string) runtime.Object {
		return &velerov1.Backup{ObjectMeta: linked(backupLink, name, id)}
	},
	exists: func(ctx context.Context, w *enginetest.World, name string) error {
		_, err := w.Client.VeleroV1().Backups(adminNS).Get(ctx, name, metav1.GetOptions{})
		return err
	},
}, {
	name: "NonAdminRestore",
	engine: func(t *testing.T, objs ...runtime.Object) (orphanStep, *enginetest.World) {
		c, w := newRestoreEngine(t, objs...)
		return c.made.syncOrphan, w
	},
	tenant: func(recorded, id string) runtime.Object {
		return &oadpv1alpha1.NonAdminRestore{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "team"},
			Status: oadpv1alpha1.NonAdminRestoreStatus{VeleroRestore: &oadpv1alpha1.VeleroRestore{Name: recorded, NACUUID: id}}}
	},
	admin: func(name, id string) runtime.Object {
		return &velerov1.Restore{ObjectMeta: linked(restoreLink, name, id)}
	},
	exists: func(ctx context.Context, w *enginetest.World, name string) error {
		_, err := w.Client.VeleroV1().Restores(adminNS).Get(ctx, name, metav1.GetOptions{})
		return err
	},
}, {
	name: "NonAdminSchedule",
	engine: func(t *testing.T, objs ...runtime.Object) (orphanStep, *enginetest.World) {
		c, w := newScheduleEngine(t, time.Now(), objs...)
		return c.made.syncOrphan, w
	},
	tenant: func(recorded, id string) runtime.Object {
		return &oadpv1alpha1.NonAdminSchedule{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "team"},
			Status: oadpv1alpha1.NonAdminScheduleStatus{VeleroSchedule: &oadpv1alpha1.VeleroSchedule{Name: recorded, NACUUID: id}}}
	},
	admin: func(name, id string) runtime.Object {
		return &velerov1.Schedule{ObjectMeta: linked(scheduleLink, name, id)}
	},
	exists: func(ctx context.Context, w *enginetest.World, name string) error {
		_, err := w.Client.VeleroV1().Schedules(adminNS).Get(ctx, name, metav1.GetOptions{})
		return err
	},
}, {
	// A download request records nothing: its Velero request is named
	// after its UID, which is the NACUUID.
	name: "NonAdminDownloadRequest",
	engine: func(t *testing.T, objs ...runtime.Object) (orphanStep, *enginetest.World) {
		c, w := newDownloadEngine(t, time.Now(), objs...)
		return c.made.syncOrphan, w
	},
	tenant: func(recorded, id string) runtime.Object {
		uid := "owner-uid"
		if recorded != veleroRequestName(types.UID(uid)) {
			uid = "another-uid"
		}
		return &oadpv1alpha1.NonAdminDownloadRequest{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "team", UID: types.UID(uid)}}
	},
	admin: func(name, id string) runtime.Object {
		return &velerov1.DownloadRequest{ObjectMeta: linked(downloadLink, name, id)}
	},
	exists: func(ctx context.Context, w *enginetest.World, name string) error {
		_, err := w.Client.VeleroV1().DownloadRequests(adminNS).Get(ctx, name, metav1.GetOptions{})
		return err
	},
}}

// TestMirrorOrphans: every tenant engine deletes, through the one mirror,
// an admin-side object whose tenant object is gone or records another, and
// keeps one its tenant object owns (also when only the API has seen it
// yet) or one that carries no link.
func TestMirrorOrphans(t *testing.T) {
	ctx := context.Background()
	for _, k := range mirrorKinds {
		t.Run(k.name, func(t *testing.T) {
			// The admin-side object's name and NACUUID; for a download
			// request, both come from the owner's UID.
			name, id := "x", "x"
			if k.name == "NonAdminDownloadRequest" {
				name, id = veleroRequestName("owner-uid"), "owner-uid"
			}
			for _, tc := range []struct {
				step     string
				tenant   runtime.Object // nil: gone
				inLister bool
				unlinked bool
				deleted  bool
			}{
				{step: "its tenant object is gone", deleted: true},
				{step: "its tenant object records another", tenant: k.tenant("other", "other"), inLister: true, deleted: true},
				{step: "its tenant object owns it", tenant: k.tenant(name, id), inLister: true},
				{step: "only the API has seen its tenant object yet", tenant: k.tenant(name, id)},
				{step: "it carries no link", unlinked: true},
			} {
				t.Run(tc.step, func(t *testing.T) {
					linkID := id
					if tc.unlinked {
						linkID = ""
					}
					objs := []runtime.Object{k.admin(name, linkID)}
					if tc.tenant != nil {
						objs = append(objs, tc.tenant)
					}
					syncOrphan, w := k.engine(t, objs...)
					if tc.tenant != nil && !tc.inLister {
						unseen(t, w, tc.tenant)
					}
					if err := syncOrphan(ctx, cache.ObjectName{Namespace: adminNS, Name: name}); err != nil {
						t.Fatal(err)
					}
					err := k.exists(ctx, w, name)
					if deleted := apierrors.IsNotFound(err); deleted != tc.deleted {
						t.Errorf("admin-side object deleted: %v (%v), want %v", deleted, err, tc.deleted)
					}
				})
			}
		})
	}
}

// unseen takes obj out of its informer's store: the API has it, the
// lister not yet.
func unseen(t *testing.T, w *enginetest.World, obj runtime.Object) {
	t.Helper()
	o := w.Factory.Oadp().V1alpha1()
	var inf cache.SharedIndexInformer
	switch obj.(type) {
	case *oadpv1alpha1.NonAdminBackup:
		inf = o.NonAdminBackups().Informer()
	case *oadpv1alpha1.NonAdminRestore:
		inf = o.NonAdminRestores().Informer()
	case *oadpv1alpha1.NonAdminSchedule:
		inf = o.NonAdminSchedules().Informer()
	case *oadpv1alpha1.NonAdminDownloadRequest:
		inf = o.NonAdminDownloadRequests().Informer()
	}
	if err := inf.GetIndexer().Delete(obj); err != nil {
		t.Fatal(err)
	}
}

// TestMirrorCreate: an admin-side object is made linked to its tenant
// object; one of its name that exists already is taken when it was made
// for that tenant object (a restart after the create) and refused,
// untouched, when made for another.
func TestMirrorCreate(t *testing.T) {
	ctx := context.Background()
	owner := backupRecording("x")
	for _, tc := range []struct {
		name     string
		existing *velerov1.Backup
		wantErr  error
	}{
		{name: "none yet: made, linked"},
		{name: "made before a restart: taken", existing: &velerov1.Backup{ObjectMeta: linked(backupLink, "x", "x")}},
		{name: "one of its name made for another: refused", existing: &velerov1.Backup{ObjectMeta: linked(backupLink, "x", "another")}, wantErr: errMadeForAnother},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{owner}
			if tc.existing != nil {
				objs = append(objs, tc.existing)
			}
			c, w := newBackupEngine(t, objs...)
			b := &velerov1.Backup{ObjectMeta: backupLink.objectMeta(adminNS, "x", "x", owner), Spec: velerov1.BackupSpec{IncludedNamespaces: []string{"team"}}}
			made, err := c.made.create(ctx, owner, b)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("create: %v, want %v", err, tc.wantErr)
			}
			stored, getErr := w.Client.VeleroV1().Backups(adminNS).Get(ctx, "x", metav1.GetOptions{})
			if getErr != nil {
				t.Fatal(getErr)
			}
			if tc.wantErr != nil {
				if stored.Labels[oadpv1alpha1.NabOriginNACUUIDLabel] != "another" {
					t.Errorf("another's Backup changed: labels %v", stored.Labels)
				}
				return
			}
			if !c.made.owns(owner, made) || !c.made.owns(owner, stored) {
				t.Errorf("made %v, stored %v: want them linked to team/t under x", made.Labels, stored.Labels)
			}
		})
	}
}

func backupRecording(id string) *oadpv1alpha1.NonAdminBackup {
	return &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "team"},
		Status: oadpv1alpha1.NonAdminBackupStatus{VeleroBackup: &oadpv1alpha1.VeleroBackup{Name: id, NACUUID: id}}}
}
