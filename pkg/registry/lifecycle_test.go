package registry_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/backstop-io/backstop/pkg/apis/kubevirtbackup"
	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/apis/lifecycle"
	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/registry/kubevirtbackup/virtualmachinebackup"
	"github.com/backstop-io/backstop/pkg/registry/kubevirtbackup/virtualmachinebackuptracker"
	"github.com/backstop-io/backstop/pkg/registry/resource"
	"github.com/backstop-io/backstop/pkg/registry/velero/backup"
	"github.com/backstop-io/backstop/pkg/registry/velero/datadownload"
	"github.com/backstop-io/backstop/pkg/registry/velero/dataupload"
	"github.com/backstop-io/backstop/pkg/registry/velero/deletebackuprequest"
	"github.com/backstop-io/backstop/pkg/registry/velero/restore"
	"github.com/backstop-io/backstop/pkg/registry/velero/schedule"
)

const ns = "backstop-system"

// lifeCase is one resource with a life: its status strategy and an object
// in a given phase.
type lifeCase struct {
	strategy rest.RESTUpdateStrategy
	// changes lists every pair of phases and whether the table allows it.
	changes []change
	// field is where a refused change is reported.
	field string
	// edit changes a status field other than the phase.
	edit func(runtime.Object)
}

type change struct {
	from, to runtime.Object
	name     string
	allowed  bool
}

// changesOf builds the objects of every change of a table.
func changesOf[P lifecycle.Phase](t lifecycle.Table[P], in func(P) runtime.Object) []change {
	if err := t.Check(); err != nil {
		panic(err)
	}
	var out []change
	for _, c := range t.Changes() {
		out = append(out, change{from: in(c.From), to: in(c.To), name: fmt.Sprintf("%q→%q", c.From, c.To), allowed: c.Allowed})
	}
	return out
}

func meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ns, ResourceVersion: "7", Generation: 1}
}

// vmbIn is a VirtualMachineBackup whose conditions read as s.
func vmbIn(s kv.BackupState) runtime.Object {
	b := &kubevirtbackup.VirtualMachineBackup{ObjectMeta: meta("vmb")}
	progressing := func(st metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: string(kv.ConditionProgressing), Status: st, Reason: "R", Message: "m"}
	}
	switch s {
	case kv.BackupWaiting:
		b.Status = &kubevirtbackup.VirtualMachineBackupStatus{Conditions: []metav1.Condition{progressing(metav1.ConditionFalse)}}
	case kv.BackupRunning:
		b.Status = &kubevirtbackup.VirtualMachineBackupStatus{Conditions: []metav1.Condition{progressing(metav1.ConditionTrue)}}
	case kv.BackupComplete, kv.BackupFailed:
		b.Status = &kubevirtbackup.VirtualMachineBackupStatus{Conditions: []metav1.Condition{progressing(metav1.ConditionFalse),
			{Type: string(s), Status: metav1.ConditionTrue, Reason: "R", Message: "m"}}}
	}
	return b
}

func lifeCases() map[string]lifeCase {
	scheme := runtime.NewScheme()
	return map[string]lifeCase{
		"Backup": {
			strategy: backup.NewStatusStrategy(backup.NewStrategy(scheme, nil), backup.NewQueueIndex(ns)),
			changes: changesOf(velerov1.BackupLifecycle, func(p velerov1.BackupPhase) runtime.Object {
				return &velero.Backup{ObjectMeta: meta("b"), Status: velero.BackupStatus{Phase: velero.BackupPhase(p)}}
			}),
			field: "status.phase",
			edit:  func(o runtime.Object) { o.(*velero.Backup).Status.Warnings++ },
		},
		"Restore": {
			strategy: restore.NewStatusStrategy(restore.NewStrategy(scheme, nil)),
			changes: changesOf(velerov1.RestoreLifecycle, func(p velerov1.RestorePhase) runtime.Object {
				return &velero.Restore{ObjectMeta: meta("r"), Spec: velero.RestoreSpec{BackupName: "b"}, Status: velero.RestoreStatus{Phase: velero.RestorePhase(p)}}
			}),
			field: "status.phase",
			edit:  func(o runtime.Object) { o.(*velero.Restore).Status.Warnings++ },
		},
		"DeleteBackupRequest": {
			strategy: deletebackuprequest.NewStatusStrategy(deletebackuprequest.NewStrategy(scheme)),
			changes: changesOf(velerov1.DeleteBackupRequestLifecycle, func(p velerov1.DeleteBackupRequestPhase) runtime.Object {
				return &velero.DeleteBackupRequest{ObjectMeta: meta("d"), Spec: velero.DeleteBackupRequestSpec{BackupName: "b"},
					Status: velero.DeleteBackupRequestStatus{Phase: velero.DeleteBackupRequestPhase(p)}}
			}),
			field: "status.phase",
			edit: func(o runtime.Object) {
				d := o.(*velero.DeleteBackupRequest)
				d.Status.Errors = append(d.Status.Errors, "e")
			},
		},
		"Schedule": {
			strategy: schedule.NewStatusStrategy(schedule.NewStrategy(scheme, false)),
			changes: changesOf(velerov1.ScheduleLifecycle, func(p velerov1.SchedulePhase) runtime.Object {
				return &velero.Schedule{ObjectMeta: meta("s"), Spec: velero.ScheduleSpec{Schedule: "@daily"}, Status: velero.ScheduleStatus{Phase: velero.SchedulePhase(p)}}
			}),
			field: "status.phase",
			edit:  func(o runtime.Object) { o.(*velero.Schedule).Status.LastSkipped = &metav1.Time{} },
		},
		"DataUpload": {
			strategy: dataupload.NewStatusStrategy(dataupload.NewStrategy(scheme)),
			changes: changesOf(velerov2alpha1.DataUploadLifecycle, func(p velerov2alpha1.DataUploadPhase) runtime.Object {
				return &velero.DataUpload{ObjectMeta: meta("du"), Spec: velero.DataUploadSpec{SnapshotType: velero.SnapshotTypeCSI,
					CSISnapshot: &velero.CSISnapshotSpec{VolumeSnapshot: "vs", StorageClass: "sc"}, SourcePVC: "data", SourceNamespace: "shop", BackupStorageLocation: "default"},
					Status: velero.DataUploadStatus{Phase: velero.DataUploadPhase(p)}}
			}),
			field: "status.phase",
			edit:  func(o runtime.Object) { o.(*velero.DataUpload).Status.Progress.BytesDone++ },
		},
		"DataDownload": {
			strategy: datadownload.NewStatusStrategy(datadownload.NewStrategy(scheme)),
			changes: changesOf(velerov2alpha1.DataDownloadLifecycle, func(p velerov2alpha1.DataDownloadPhase) runtime.Object {
				return &velero.DataDownload{ObjectMeta: meta("dd"), Spec: velero.DataDownloadSpec{TargetVolume: velero.TargetVolumeSpec{PVC: "data", Namespace: "shop"},
					SnapshotID: "k1", SourceNamespace: "shop", BackupStorageLocation: "default"},
					Status: velero.DataDownloadStatus{Phase: velero.DataDownloadPhase(p)}}
			}),
			field: "status.phase",
			edit:  func(o runtime.Object) { o.(*velero.DataDownload).Status.Progress.BytesDone++ },
		},
		"VirtualMachineBackup": {
			strategy: virtualmachinebackup.NewStatusStrategy(virtualmachinebackup.NewStrategy(scheme, nil)),
			changes:  changesOf(kv.VirtualMachineBackupLifecycle, vmbIn),
			field:    "status.conditions",
			edit: func(o runtime.Object) {
				b := o.(*kubevirtbackup.VirtualMachineBackup)
				if b.Status == nil {
					b.Status = &kubevirtbackup.VirtualMachineBackupStatus{}
				}
				b.Status.Progress = &kubevirtbackup.BackupProgress{BytesDone: 1}
			},
		},
		"VirtualMachineBackupTracker": {
			strategy: virtualmachinebackuptracker.NewStatusStrategy(virtualmachinebackuptracker.NewStrategy(scheme, nil)),
			changes: changesOf(kv.ChangedBlockTrackingLifecycle, func(s kv.ChangedBlockTrackingState) runtime.Object {
				t := &kubevirtbackup.VirtualMachineBackupTracker{ObjectMeta: meta("t")}
				if s != "" {
					t.Status = &kubevirtbackup.VirtualMachineBackupTrackerStatus{ChangedBlockTracking: &kubevirtbackup.ChangedBlockTrackingStatus{State: kubevirtbackup.ChangedBlockTrackingState(s)}}
				}
				return t
			}),
			field: "status.changedBlockTracking.state",
			edit: func(o runtime.Object) {
				t := o.(*kubevirtbackup.VirtualMachineBackupTracker)
				if t.Status == nil {
					t.Status = &kubevirtbackup.VirtualMachineBackupTrackerStatus{}
				}
				t.Status.LatestCheckpoint = &kubevirtbackup.BackupCheckpoint{Name: "cp"}
			},
		},
	}
}

// update runs a status update through the strategy as the store does.
func update(ctx context.Context, s rest.RESTUpdateStrategy, obj, old runtime.Object) field.ErrorList {
	obj, old = obj.DeepCopyObject(), old.DeepCopyObject()
	s.PrepareForUpdate(ctx, obj, old)
	return s.ValidateUpdate(ctx, obj, old)
}

func asUser(name string, groups ...string) context.Context {
	return genericapirequest.WithUser(context.Background(), &user.DefaultInfo{Name: name, Groups: groups})
}

// TestTransitionTables walks every resource's table through its status
// strategy: as the server's engines, every change the table lists is
// accepted and every other refused at the phase's field; as a client
// (even a cluster admin), no status change at all is accepted, though
// writing the status unchanged is.
func TestTransitionTables(t *testing.T) {
	engine := resource.WithEngine(asUser(user.APIServerUser, user.SystemPrivilegedGroup))
	admin := asUser("admin", user.SystemPrivilegedGroup)
	for kind, c := range lifeCases() {
		t.Run(kind, func(t *testing.T) {
			accepted, refused := 0, 0
			for _, ch := range c.changes {
				errs := update(engine, c.strategy, ch.to, ch.from)
				switch {
				case ch.allowed && len(errs) > 0:
					t.Errorf("%s by an engine: refused (%v), the table allows it", ch.name, errs)
				case !ch.allowed && (len(errs) != 1 || errs[0].Field != c.field):
					t.Errorf("%s by an engine: %v, want one error at %s", ch.name, errs, c.field)
				case ch.allowed:
					accepted++
				default:
					refused++
				}
				if errs := update(admin, c.strategy, ch.to, ch.from); len(errs) != 1 || errs[0].Field != "status" ||
					!strings.Contains(errs[0].Detail, "written by the server's engines only") {
					t.Errorf("%s by a cluster admin: %v, want the status refused", ch.name, errs)
				}
			}
			if accepted == 0 || refused == 0 {
				t.Errorf("walked %d accepted and %d refused changes: the table is not exercised", accepted, refused)
			}
			// Every phase: another status field may change (engine) or not
			// (admin); the same status is accepted from anyone.
			for _, ch := range c.changes {
				edited := ch.from.DeepCopyObject()
				c.edit(edited)
				if errs := update(engine, c.strategy, edited, ch.from); len(errs) > 0 {
					t.Errorf("%s: an engine's edit of another status field in the first phase: %v", ch.name, errs)
				}
				if errs := update(admin, c.strategy, edited, ch.from); len(errs) != 1 || errs[0].Field != "status" {
					t.Errorf("%s: an admin's edit of another status field: %v, want it refused", ch.name, errs)
				}
				if errs := update(admin, c.strategy, ch.from, ch.from); len(errs) > 0 {
					t.Errorf("%s: the same status written back by an admin: %v", ch.name, errs)
				}
			}
		})
	}
}

// TestEngineGroups: members of --engine-groups are engines, others not.
func TestEngineGroups(t *testing.T) {
	e := resource.Engines{Groups: []string{"backstop:engines"}}
	for _, c := range []struct {
		user *user.DefaultInfo
		want bool
	}{
		{&user.DefaultInfo{Name: user.APIServerUser}, true},
		{&user.DefaultInfo{Name: "vendor", Groups: []string{"backstop:engines"}}, true},
		{&user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}}, false},
		{&user.DefaultInfo{Name: "tenant", Groups: []string{"system:authenticated"}}, false},
	} {
		if got := e.Is(c.user); got != c.want {
			t.Errorf("%s %v: engine %v, want %v", c.user.Name, c.user.Groups, got, c.want)
		}
	}
	if (resource.Engines{}).Is(&user.DefaultInfo{Name: "vendor", Groups: []string{""}}) {
		t.Error("with no engine groups, a user in group \"\" is an engine")
	}
}

// TestSyncedBackupCreate: only the engines create a Backup with a status
// (backup sync), and only in a terminal phase; from a client the status
// and the annotation are dropped.
func TestSyncedBackupCreate(t *testing.T) {
	s := backup.NewStrategy(runtime.NewScheme(), nil)
	engine := resource.WithEngine(asUser(user.APIServerUser))
	synced := func(phase velero.BackupPhase) *velero.Backup {
		return &velero.Backup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: ns,
			Annotations: map[string]string{velerov1.SyncedFromLocationAnnotation: "default"}},
			Status: velero.BackupStatus{Phase: phase}}
	}
	for _, c := range []struct {
		name      string
		ctx       context.Context
		phase     velero.BackupPhase
		wantPhase velero.BackupPhase
		wantErr   string
	}{
		{"engine, completed", engine, velero.BackupPhase(velerov1.BackupPhaseCompleted), velero.BackupPhase(velerov1.BackupPhaseCompleted), ""},
		{"engine, in progress", engine, velero.BackupPhase(velerov1.BackupPhaseInProgress), velero.BackupPhase(velerov1.BackupPhaseInProgress), "status.phase"},
		{"client", asUser("admin", user.SystemPrivilegedGroup), velero.BackupPhase(velerov1.BackupPhaseCompleted), "", ""},
	} {
		b := synced(c.phase)
		s.PrepareForCreate(c.ctx, b)
		errs := s.Validate(c.ctx, b)
		if b.Status.Phase != c.wantPhase {
			t.Errorf("%s: phase %q after create, want %q", c.name, b.Status.Phase, c.wantPhase)
		}
		if _, kept := b.Annotations[velerov1.SyncedFromLocationAnnotation]; kept != (c.ctx == engine) {
			t.Errorf("%s: synced annotation kept %v", c.name, kept)
		}
		switch {
		case c.wantErr == "" && len(errs) > 0:
			t.Errorf("%s: %v", c.name, errs)
		case c.wantErr != "" && (len(errs) != 1 || errs[0].Field != c.wantErr):
			t.Errorf("%s: %v, want one error at %s", c.name, errs, c.wantErr)
		}
	}
}
