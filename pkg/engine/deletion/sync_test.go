package deletion

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/enginetest"
	"github.com/backstop-io/backstop/pkg/failpoint"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// TestDeletionDecisions: what a DeleteBackupRequest comes to, decided on a
// fake API and a filesystem location in a temporary directory.
func TestDeletionDecisions(t *testing.T) {
	const ns = "backstop-system"
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	request := func(name, backup string, phase velerov1.DeleteBackupRequestPhase, uid string) *velerov1.DeleteBackupRequest {
		r := &velerov1.DeleteBackupRequest{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("req-" + name), CreationTimestamp: metav1.NewTime(now.Add(-time.Minute))},
			Spec: velerov1.DeleteBackupRequestSpec{BackupName: backup}, Status: velerov1.DeleteBackupRequestStatus{Phase: phase}}
		if uid != "" {
			r.Labels = map[string]string{velerov1.BackupUIDLabel: uid}
		}
		return r
	}
	backup := func(phase velerov1.BackupPhase) *velerov1.Backup {
		return &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: ns, UID: "b-uid"},
			Spec: velerov1.BackupSpec{StorageLocation: "default"}, Status: velerov1.BackupStatus{Phase: phase}}
	}
	// locked is a completed backup whose objects are locked until its
	// expiration.
	locked := func(expiration time.Time) *velerov1.Backup {
		b := backup(velerov1.BackupPhaseCompleted)
		b.Status.Expiration = &metav1.Time{Time: expiration}
		b.Status.Conditions = []metav1.Condition{{Type: velerov1.BackupConditionLocked, Status: metav1.ConditionTrue, Reason: velerov1.ObjectLockCompliance}}
		return b
	}
	for _, tc := range []struct {
		name string
		objs []runtime.Object
		// wantErrors are words of the request's errors once Processed
		// (nil: it is not Processed).
		wantErrors []string
		// backupGone: the Backup is deleted (or never was); dataGone: its
		// files too; cancelled: it was cancelled first.
		backupGone, dataGone, cancelled bool
	}{
		{name: "the backup does not exist", objs: []runtime.Object{request("r", "b", "", "")}, wantErrors: []string{"backup b not found"}, backupGone: true},
		{name: "another request deletes it", objs: []runtime.Object{backup(velerov1.BackupPhaseCompleted),
			request("r0", "b", velerov1.DeleteBackupRequestPhaseInProgress, ""), request("r", "b", velerov1.DeleteBackupRequestPhaseNew, "")},
			wantErrors: []string{"already being deleted by request r0"}},
		{name: "the backup was replaced by one of the same name", objs: []runtime.Object{backup(velerov1.BackupPhaseCompleted), request("r", "b", "", "old-uid")},
			wantErrors: []string{"replaced by a newer backup"}},
		{name: "a running backup is cancelled first", objs: []runtime.Object{backup(velerov1.BackupPhaseInProgress), request("r", "b", "", "")},
			cancelled: true},
		{name: "a completed backup: data, restores and Backup gone", objs: []runtime.Object{backup(velerov1.BackupPhaseCompleted), request("r", "b", "", "b-uid"),
			&velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "from-b", Namespace: ns}, Spec: velerov1.RestoreSpec{BackupName: "b"}}},
			wantErrors: []string{}, backupGone: true, dataGone: true},
		{name: "a locked backup before its lock's date: refused, nothing changes", objs: []runtime.Object{locked(now.Add(time.Hour)), request("r", "b", "", "b-uid")},
			wantErrors: []string{"cannot be deleted before 2026-11-26T01:00:05Z: its objects are locked in storage location default (S3 object lock, COMPLIANCE)"}},
		{name: "a locked backup within the store's clock skew: refused", objs: []runtime.Object{locked(now.Add(-time.Second)), request("r", "b", "", "b-uid")},
			wantErrors: []string{"cannot be deleted before"}},
		{name: "a locked backup after its lock's date: deleted", objs: []runtime.Object{locked(now.Add(-time.Minute)), request("r", "b", "", "b-uid"),
			&velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "from-b", Namespace: ns}, Spec: velerov1.RestoreSpec{BackupName: "b"}}},
			wantErrors: []string{}, backupGone: true, dataGone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bucket := t.TempDir()
			store, err := objectstore.NewFilesystem(bucket)
			if err != nil {
				t.Fatal(err)
			}
			layout := objectstore.NewLayout("")
			var keys []string // the backup's tarball, its restore's log
			for _, f := range []struct {
				kind velerov1.DownloadTargetKind
				name string
			}{{velerov1.DownloadTargetKindBackupContents, "b"}, {velerov1.DownloadTargetKindRestoreLog, "from-b"}} {
				key, err := layout.Key(f.kind, f.name)
				if err != nil {
					t.Fatal(err)
				}
				if err := store.Put(context.Background(), key, strings.NewReader("x")); err != nil {
					t.Fatal(err)
				}
				keys = append(keys, key)
			}
			location := &velerov1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns},
				Spec: velerov1.BackupStorageLocationSpec{Provider: objectstore.ProviderFilesystem,
					StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: bucket}}}}
			w := enginetest.New(t, append(tc.objs, location)...)
			v := w.Factory.Velero().V1()
			c, err := New(w.Client, Informers{Requests: v.DeleteBackupRequests(), Backups: v.Backups(), Restores: v.Restores(), Locations: v.BackupStorageLocations()},
				objectstore.Opener{}, nil, nil, clocktesting.NewFakeClock(now), failpoint.Set{})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := c.sync(ctx, cache.ObjectName{Namespace: ns, Name: "r"}); err != nil {
				t.Fatal(err)
			}
			req, err := w.Client.VeleroV1().DeleteBackupRequests(ns).Get(ctx, "r", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.wantErrors == nil:
				if req.Status.Phase != velerov1.DeleteBackupRequestPhaseInProgress {
					t.Errorf("request %s, want InProgress while the backup stops", req.Status.Phase)
				}
			case req.Status.Phase != velerov1.DeleteBackupRequestPhaseProcessed || len(req.Status.Errors) != len(tc.wantErrors):
				t.Errorf("request %s %v, want Processed with errors saying %v", req.Status.Phase, req.Status.Errors, tc.wantErrors)
			default:
				for _, want := range tc.wantErrors {
					if !strings.Contains(strings.Join(req.Status.Errors, "\n"), want) {
						t.Errorf("errors %q, want them to say %q", req.Status.Errors, want)
					}
				}
			}
			if b, err := w.Client.VeleroV1().Backups(ns).Get(ctx, "b", metav1.GetOptions{}); err == nil && len(tc.wantErrors) > 0 && b.Status.Phase != velerov1.BackupPhaseCompleted {
				t.Errorf("a backup whose deletion was refused is %s, want it as it was (Completed)", b.Status.Phase)
			}
			b, err := w.Client.VeleroV1().Backups(ns).Get(ctx, "b", metav1.GetOptions{})
			if gone := apierrors.IsNotFound(err); gone != tc.backupGone {
				t.Errorf("Backup gone: %v, want %v", gone, tc.backupGone)
			}
			if tc.cancelled && (b == nil || !b.Spec.Cancel) {
				t.Errorf("the running backup was not cancelled: %+v", b)
			}
			_, statErr := os.Stat(filepath.Join(bucket, filepath.FromSlash(keys[0])))
			_, restoreErr := os.Stat(filepath.Join(bucket, filepath.FromSlash(keys[1])))
			if gone := os.IsNotExist(statErr) && os.IsNotExist(restoreErr); gone != tc.dataGone {
				t.Errorf("the backup's and its restore's data gone: %v (%v, %v), want %v", gone, statErr, restoreErr, tc.dataGone)
			}
			if _, err := w.Client.VeleroV1().Restores(ns).Get(ctx, "from-b", metav1.GetOptions{}); tc.dataGone && !apierrors.IsNotFound(err) {
				t.Errorf("the backup's restore is still there: %v", err)
			}
		})
	}
}
