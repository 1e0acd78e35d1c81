package apiserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestImmutableLocation: a location on an S3 bucket made with object lock
// (config objectLockMode) locks every object of each backup when it
// completes, until the backup's expiration, each written once (one
// version); deleting the backup before then is refused (the Backup stays,
// the DeleteBackupRequest says why), and a client delete waits for the
// lock's end; a client holding the bucket's credentials can neither remove
// nor shorten the lock of any object, and what it puts on top or deletes
// without a version changes nothing Backstop reads: the backup verifies,
// restores whole, and a second server syncs it from the bucket; once
// expired, garbage collection deletes it, every version.
func TestImmutableLocation(t *testing.T) {
	t.Parallel()
	framework.StorageIndependent(t, "object lock (the object store client)")
	srv := framework.StartVersionedS3(t)
	srv.MakeLockedBucket(t, "vault")
	srv.MakeBucket(t, "plain")
	attacker := srv.Client(t)
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	createTracker(t, s, "vaulted", "t1", map[string]string{"app": "ledger"})
	createTracker(t, s, "vaulted", "t2", map[string]string{"app": "ledger"})
	original := trackersOf(t, s, "vaulted")

	credentials := srv.CredentialsFile(t, "default")
	location := func(name, bucket, mode string) *velerov1.BackupStorageLocation {
		return &velerov1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: velerov1.BackupStorageLocationSpec{Provider: "aws",
				StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: bucket, Prefix: "cluster-a"}},
				Config: map[string]string{"s3Url": srv.Endpoint, "region": "us-east-1", "s3ForcePathStyle": "true",
					"credentialsFile": credentials, velerov1.ObjectLockModeConfigKey: mode}}}
	}
	backup := func(t *testing.T, name string, ttl time.Duration) *velerov1.Backup {
		t.Helper()
		if _, err := s.Clientset.VeleroV1().Backups(ns).Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: velerov1.BackupSpec{IncludedNamespaces: []string{"vaulted"}, StorageLocation: "vault", TTL: metav1.Duration{Duration: ttl}}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		b := waitBackup(t, s, name, "finished", finished)
		if b.Status.Phase != velerov1.BackupPhaseCompleted {
			t.Fatalf("backup %s: %s %q", name, b.Status.Phase, b.Status.FailureReason)
		}
		return b
	}
	// versions are the versions of the objects of a backup in the bucket,
	// by key.
	versions := func(t *testing.T, backup string) map[string][]minio.ObjectInfo {
		t.Helper()
		out := map[string][]minio.ObjectInfo{}
		for obj := range attacker.ListObjects(ctx, "vault", minio.ListObjectsOptions{Prefix: "cluster-a/backups/" + backup + "/", Recursive: true, WithVersions: true}) {
			if obj.Err != nil {
				t.Fatal(obj.Err)
			}
			out[obj.Key] = append(out[obj.Key], obj)
		}
		return out
	}
	gone := func(t *testing.T, name string) {
		t.Helper()
		pollCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := wait.PollUntilContextCancel(pollCtx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}); err != nil {
			t.Fatalf("backup %s still there after its lock ended", name)
		}
		if left := versions(t, name); len(left) != 0 {
			t.Errorf("left in the bucket after backup %s was deleted: %v", name, left)
		}
	}
	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow()
		}
	}

	step("refused at admission: an unknown mode, a filesystem location", func(t *testing.T) {
		bad := location("bad-mode", "vault", "WORM")
		_, err := s.Clientset.VeleroV1().BackupStorageLocations(ns).Create(ctx, bad, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.config["+velerov1.ObjectLockModeConfigKey+"]") {
			t.Errorf("mode WORM: %v, want 422 naming the field", err)
		}
		fs := location("fs-lock", t.TempDir(), velerov1.ObjectLockGovernance)
		fs.Spec.Provider, fs.Spec.Config = "filesystem", map[string]string{velerov1.ObjectLockModeConfigKey: velerov1.ObjectLockGovernance}
		_, err = s.Clientset.VeleroV1().BackupStorageLocations(ns).Create(ctx, fs, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "filesystem provider cannot lock") {
			t.Errorf("a filesystem location with object lock: %v, want 422", err)
		}
	})

	step("a bucket made without object lock: the location is Unavailable", func(t *testing.T) {
		if _, err := s.Clientset.VeleroV1().BackupStorageLocations(ns).Create(ctx, location("plain", "plain", velerov1.ObjectLockCompliance), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		l := waitLocation(t, s, "plain", func(l *velerov1.BackupStorageLocation) bool { return l.Status.Phase != "" })
		if l.Status.Phase != velerov1.BackupStorageLocationPhaseUnavailable || !strings.Contains(l.Status.Message, "has no object lock") {
			t.Errorf("location plain: %s %q", l.Status.Phase, l.Status.Message)
		}
	})

	var kept *velerov1.Backup
	var before *velerov1.BackupVerification
	step("every object of a backup is written once and locked until its expiration", func(t *testing.T) {
		if _, err := s.Clientset.VeleroV1().BackupStorageLocations(ns).Create(ctx, location("vault", "vault", velerov1.ObjectLockCompliance), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitLocation(t, s, "vault", func(l *velerov1.BackupStorageLocation) bool {
			return l.Status.Phase == velerov1.BackupStorageLocationPhaseAvailable
		})
		kept = backup(t, "kept", time.Hour)
		c := meta.FindStatusCondition(kept.Status.Conditions, velerov1.BackupConditionLocked)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != velerov1.ObjectLockCompliance {
			t.Errorf("condition Locked: %+v", c)
		}
		verified := requestVerification(t, s, "kept", "before-the-attack")
		if before = verified.Status.Verification; verifiedCondition(verified).Status != metav1.ConditionTrue || before.Objects != 8 || before.Items == 0 {
			t.Errorf("verification: %+v", before)
		}
		objects := versions(t, "kept")
		if len(objects) != 9 {
			t.Errorf("%d objects, want 9 (velero's eight and the manifest): %v", len(objects), objects)
		}
		for key, vs := range objects {
			if len(vs) != 1 {
				t.Errorf("%s: %d versions, want 1 (written once)", key, len(vs))
				continue
			}
			info, err := attacker.StatObject(ctx, "vault", key, minio.StatObjectOptions{VersionID: vs[0].VersionID})
			if err != nil {
				t.Fatal(err)
			}
			until, _ := time.Parse(time.RFC3339, info.Metadata.Get("X-Amz-Object-Lock-Retain-Until-Date"))
			if mode := info.Metadata.Get("X-Amz-Object-Lock-Mode"); mode != velerov1.ObjectLockCompliance || !until.Equal(kept.Status.Expiration.Time.Truncate(time.Second)) {
				t.Errorf("%s: locked %q until %s, want COMPLIANCE until the expiration %s", key, mode, until, kept.Status.Expiration.UTC())
			}
		}
	})

	step("deleting it before then is refused: the Backup stays, the request says why", func(t *testing.T) {
		out := veleroCLI(t, s, "backup", "delete", "kept", "--confirm")
		requireContains(t, "velero backup delete", out, "Request to delete backup \"kept\" submitted successfully")
		var req *velerov1.DeleteBackupRequest
		pollCtx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := wait.PollUntilContextCancel(pollCtx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			list, err := s.Clientset.VeleroV1().DeleteBackupRequests(ns).List(ctx, metav1.ListOptions{LabelSelector: velerov1.BackupNameLabel + "=kept"})
			if err != nil || len(list.Items) != 1 {
				return false, nil
			}
			req = &list.Items[0]
			return req.Status.Phase == velerov1.DeleteBackupRequestPhaseProcessed, nil
		}); err != nil {
			t.Fatalf("the deletion request was never processed: %+v", req)
		}
		if len(req.Status.Errors) != 1 || !strings.Contains(req.Status.Errors[0], "cannot be deleted before") || !strings.Contains(req.Status.Errors[0], "COMPLIANCE") {
			t.Errorf("the request's errors: %q", req.Status.Errors)
		}
		b, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, "kept", metav1.GetOptions{})
		if err != nil || b.Status.Phase != velerov1.BackupPhaseCompleted || b.DeletionTimestamp != nil {
			t.Errorf("backup kept after the refused deletion: %v %+v", err, b)
		}
		if n := len(versions(t, "kept")); n != 9 {
			t.Errorf("%d objects left, want 9", n)
		}
	})

	step("a client holding the bucket's credentials cannot remove or rewrite any object", func(t *testing.T) {
		shorter := time.Now().Add(time.Second)
		compliance := minio.Compliance
		for key, vs := range versions(t, "kept") {
			locked := vs[0].VersionID
			if err := attacker.RemoveObject(ctx, "vault", key, minio.RemoveObjectOptions{VersionID: locked, GovernanceBypass: true}); err == nil {
				t.Errorf("%s: its locked version was removed", key)
			}
			if err := attacker.PutObjectRetention(ctx, "vault", key, minio.PutObjectRetentionOptions{Mode: &compliance, RetainUntilDate: &shorter,
				VersionID: locked, GovernanceBypass: true}); err == nil {
				t.Errorf("%s: its lock was shortened", key)
			}
			if _, err := attacker.PutObject(ctx, "vault", key, strings.NewReader("encrypted by ransomware"), -1, minio.PutObjectOptions{}); err != nil {
				t.Fatalf("%s: an overwrite (a new version on top): %v", key, err)
			}
			if err := attacker.RemoveObject(ctx, "vault", key, minio.RemoveObjectOptions{}); err != nil {
				t.Fatalf("%s: a delete without a version (a delete marker on top): %v", key, err)
			}
		}
		// What the attacker sees now: nothing.
		for obj := range attacker.ListObjects(ctx, "vault", minio.ListObjectsOptions{Prefix: "cluster-a/backups/kept/", Recursive: true}) {
			t.Errorf("listed without versions after the deletes: %s (%v)", obj.Key, obj.Err)
		}
	})

	step("the backup verifies and restores whole", func(t *testing.T) {
		b := requestVerification(t, s, "kept", "after-the-attack")
		after := b.Status.Verification
		if c := verifiedCondition(b); c.Status != metav1.ConditionTrue || after.Objects != before.Objects || after.Bytes != before.Bytes || after.Items != before.Items {
			t.Errorf("verification after the attack: %+v %+v, before it %+v", c, after, before)
		}
		for _, name := range []string{"t1", "t2"} {
			if err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers("vaulted").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		r := createRestore(t, s, "after-the-attack", velerov1.RestoreSpec{BackupName: "kept"})
		if r.Status.Phase != velerov1.RestorePhaseCompleted {
			t.Fatalf("restore after the attack: %s %+v", r.Status.Phase, r.Status.Progress)
		}
		if got := trackersOf(t, s, "vaulted"); got != original {
			t.Errorf("restored:\n%s\nwant\n%s", got, original)
		}
		if logs := backupLogs(t, s, "kept"); !strings.Contains(logs, `msg="Backup completed"`) {
			t.Errorf("the backup's log after the attack:\n%s", logs)
		}
	})

	step("a second server syncs it from the bucket, locked", func(t *testing.T) {
		second := framework.Start(t, framework.Options{Args: []string{"--backup-sync-period=1s"}})
		l := location("vault", "vault", velerov1.ObjectLockCompliance)
		l.Spec.AccessMode = velerov1.BackupStorageLocationAccessModeReadOnly
		if _, err := second.Clientset.VeleroV1().BackupStorageLocations(ns).Create(ctx, l, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		synced := waitBackup(t, second, "kept", "synced", func(b *velerov1.Backup) bool { return b.Status.Phase != "" })
		if c := meta.FindStatusCondition(synced.Status.Conditions, velerov1.BackupConditionLocked); synced.Status.Phase != velerov1.BackupPhaseCompleted || c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("synced: %s, Locked %+v", synced.Status.Phase, c)
		}
	})

	step("once expired: garbage collection deletes a backup, and a client's delete goes through", func(t *testing.T) {
		expiring := backup(t, "expiring", 20*time.Second)
		early := backup(t, "deleted-early", 20*time.Second)
		if err := s.Clientset.VeleroV1().Backups(ns).Delete(ctx, "deleted-early", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// Before the lock's date: still there (the one a client
		// deleted, being deleted), every object too.
		for _, b := range []*velerov1.Backup{expiring, early} {
			if c := meta.FindStatusCondition(b.Status.Conditions, velerov1.BackupConditionLocked); c == nil || c.Status != metav1.ConditionTrue {
				t.Fatalf("backup %s (TTL 20s) is not locked: %+v", b.Name, b.Status.Conditions)
			}
			got, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, b.Name, metav1.GetOptions{})
			if !time.Now().Before(b.Status.Expiration.Time) {
				t.Fatalf("backup %s expired before it could be checked (it completed at %s)", b.Name, b.Status.CompletionTimestamp)
			}
			if err != nil || len(versions(t, b.Name)) != 9 {
				t.Errorf("backup %s before its lock's date: %v, %d objects", b.Name, err, len(versions(t, b.Name)))
			}
			if err == nil && b.Name == early.Name && got.DeletionTimestamp == nil {
				t.Errorf("backup %s was deleted by a client but has no deletionTimestamp", b.Name)
			}
		}
		gone(t, "expiring")
		gone(t, "deleted-early")
		if _, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, "kept", metav1.GetOptions{}); err != nil {
			t.Errorf("backup kept, not expired: %v", err)
		}
	})
}
