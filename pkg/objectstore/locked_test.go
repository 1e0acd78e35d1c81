package objectstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// lockedLocation is a location on bucket of srv in mode.
func lockedLocation(t *testing.T, srv *framework.S3Server, bucket, mode string) *velerov1.BackupStorageLocation {
	bsl := &velerov1.BackupStorageLocation{Spec: velerov1.BackupStorageLocationSpec{
		Provider:    "aws",
		StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: bucket, Prefix: "cluster-a"}},
		Config: map[string]string{S3ConfigURL: srv.Endpoint, S3ConfigRegion: "us-east-1", S3ConfigForcePathStyle: "true",
			S3ConfigCredentialsFile: srv.CredentialsFile(t, "default"), velerov1.ObjectLockModeConfigKey: mode},
	}}
	bsl.Name = bucket
	return bsl
}

// TestS3ObjectLock runs the store checks against a bucket made with
// object lock on a real S3 server (versitygw with versioning), then what
// the lock promises: a locked object is neither deleted nor rewritten, by
// Backstop or by anyone holding the bucket's credentials, and reads as it
// was written; once its date has passed it is deleted, every version.
func TestS3ObjectLock(t *testing.T) {
	ctx := context.Background()
	srv := framework.StartVersionedS3(t)
	srv.MakeLockedBucket(t, "locked")
	attacker := srv.Client(t)

	open := func(t *testing.T, bsl *velerov1.BackupStorageLocation) *Locked {
		t.Helper()
		s, _, err := Opener{}.Open(ctx, bsl)
		if err != nil {
			t.Fatal(err)
		}
		l, ok := s.(*Locked)
		if !ok {
			t.Fatalf("a location with %s opens as %T, want *Locked", velerov1.ObjectLockModeConfigKey, s)
		}
		return l
	}
	store := open(t, lockedLocation(t, srv, "locked", velerov1.ObjectLockCompliance))

	t.Run("conformance", func(t *testing.T) {
		testStore(t, store, 20<<20)
	})

	t.Run("a bucket without object lock fails the probe", func(t *testing.T) {
		srv.MakeBucket(t, "plain")
		err := open(t, lockedLocation(t, srv, "plain", velerov1.ObjectLockGovernance)).Probe(ctx)
		if err == nil || !strings.Contains(err.Error(), "has no object lock") {
			t.Errorf("probe of a bucket without object lock: %v", err)
		}
	})

	t.Run("locked: refused to Backstop and to a holder of the credentials", func(t *testing.T) {
		key := "cluster-a/backups/b1/b1.tar.gz"
		if err := store.Put(ctx, key, strings.NewReader("written once")); err != nil {
			t.Fatal(err)
		}
		until := time.Now().Add(time.Hour)
		if mode, err := RetainPrefix(ctx, NewHashing(store), "cluster-a/backups/b1/", until, key); err != nil || mode != velerov1.ObjectLockCompliance {
			t.Fatalf("RetainPrefix: %q, %v", mode, err)
		}
		if err := store.Delete(ctx, key); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "COMPLIANCE") {
			t.Errorf("deleting a locked object: %v, want ErrLocked naming its mode", err)
		}
		if err := store.Put(ctx, key, strings.NewReader("rewritten")); !errors.Is(err, ErrLocked) {
			t.Errorf("rewriting a locked object: %v, want ErrLocked", err)
		}
		// What the store lets anyone do: a version on top, a delete
		// marker; what it refuses: removing the locked version,
		// shortening its lock.
		ransom, err := attacker.PutObject(ctx, "locked", key, strings.NewReader("ransom"), -1, minio.PutObjectOptions{})
		if err != nil {
			t.Fatalf("an overwrite (a new version): %v", err)
		}
		if err := attacker.RemoveObject(ctx, "locked", key, minio.RemoveObjectOptions{}); err != nil {
			t.Fatalf("a delete without a version (a delete marker): %v", err)
		}
		versions := 0
		for obj := range attacker.ListObjects(ctx, "locked", minio.ListObjectsOptions{Prefix: key, WithVersions: true}) {
			if obj.Err != nil {
				t.Fatal(obj.Err)
			}
			versions++
			if obj.IsDeleteMarker {
				continue
			}
			err := attacker.RemoveObject(ctx, "locked", key, minio.RemoveObjectOptions{VersionID: obj.VersionID})
			if obj.VersionID == ransom.VersionID {
				if err != nil {
					t.Errorf("removing the attacker's own version: %v", err)
				}
				continue
			}
			if err == nil {
				t.Errorf("the locked version %s was removed", obj.VersionID)
			}
			short := time.Now().Add(time.Second)
			mode := minio.Compliance
			if err := attacker.PutObjectRetention(ctx, "locked", key, minio.PutObjectRetentionOptions{Mode: &mode, RetainUntilDate: &short, VersionID: obj.VersionID, GovernanceBypass: true}); err == nil {
				t.Errorf("the lock of version %s was shortened", obj.VersionID)
			}
		}
		if versions != 3 {
			t.Errorf("the key has %d versions, want 3 (Backstop's, the overwrite, the delete marker)", versions)
		}
		if got := read(t, store, key); got != "written once" {
			t.Errorf("the locked object reads %q", got)
		}
		if keys, err := store.List(ctx, "cluster-a/backups/b1/"); err != nil || len(keys) != 1 || keys[0] != key {
			t.Errorf("list under a delete marker: %v, %v", keys, err)
		}
	})

	t.Run("governance: Backstop never bypasses it", func(t *testing.T) {
		gov := open(t, lockedLocation(t, srv, "locked", velerov1.ObjectLockGovernance))
		key := "cluster-a/backups/b2/b2-logs.gz"
		if err := gov.Put(ctx, key, strings.NewReader("log")); err != nil {
			t.Fatal(err)
		}
		if err := gov.Retain(ctx, key, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := gov.Delete(ctx, key); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "GOVERNANCE") {
			t.Errorf("deleting an object under governance: %v, want ErrLocked", err)
		}
	})

	t.Run("after its date: deleted, every version", func(t *testing.T) {
		key := "cluster-a/backups/b3/velero-backup.json"
		if err := store.Put(ctx, key, strings.NewReader("{}")); err != nil {
			t.Fatal(err)
		}
		until := time.Now().Add(6 * time.Second)
		if err := store.Retain(ctx, key, until); err != nil {
			t.Fatal(err)
		}
		if _, err := attacker.PutObject(ctx, "locked", key, strings.NewReader("ransom"), -1, minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := store.Delete(ctx, key); !errors.Is(err, ErrLocked) {
			t.Fatalf("deleting before its date: %v, want ErrLocked", err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := store.Delete(ctx, key)
			if err == nil {
				break
			}
			if !errors.Is(err, ErrLocked) || time.Now().After(deadline) {
				t.Fatalf("deleting after its date (%s): %v", until.Format(time.RFC3339), err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		for obj := range attacker.ListObjects(ctx, "locked", minio.ListObjectsOptions{Prefix: key, WithVersions: true}) {
			t.Errorf("left after the delete: version %s (%v)", obj.VersionID, obj.Err)
		}
	})
}
