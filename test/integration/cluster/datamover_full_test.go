package cluster

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/datamover/kopiarepo"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestDataMoverFullDisks fills the two disks a data mover writes to. Its
// own scratch space (<data-dir>/datamover: the published volumes, the
// repositories' connections and kopia's caches) full: the DataUpload
// fails with the reason, the server serves on, and once space is freed
// the next backup moves its data. A location on a small filesystem (a
// 32 MiB tmpfs): a backup that fits completes; the next, 48 MiB more,
// runs out of space: its DataUpload fails with the reason, the repository
// saves no snapshot of it, the cluster keeps nothing of it, and the first
// backup still restores byte for byte.
func TestDataMoverFullDisks(t *testing.T) {
	t.Parallel()
	c, snaps := csiCluster(t)
	ctx := context.Background()
	step := inOrder(t)
	velero, wants := veleroCLI(t, c)
	const ns, claim, location = "small", "db", "tmpfs"
	bucket := filepath.Join(c.Dir, "tmpfs-location")
	cleanup := t.Cleanup // the test's, not a step's

	// outOfSpace runs a backup that runs out of space on full: it does not
	// complete, its DataUpload fails with the reason and saves no
	// snapshot, and the cluster keeps nothing of it.
	outOfSpace := func(t *testing.T, backup, full string) *velerov2alpha1.DataUpload {
		t.Helper()
		before := snapshotIDs(c.CSI.Snapshots())
		velero("backup", "create", backup, "--include-namespaces", ns, "--storage-location", location, "--snapshot-move-data", "--wait")
		b, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, backup, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		du := uploadOf(t, c, backup)
		t.Logf("backup %s: %s (%s); DataUpload %s: %s (%s)", b.Name, b.Status.Phase, b.Status.FailureReason, du.Name, du.Status.Phase, du.Status.Message)
		if b.Status.Phase == velerov1.BackupPhaseCompleted {
			t.Errorf("backup %s Completed with %s full", backup, full)
		}
		if du.Status.Phase != velerov2alpha1.DataUploadPhaseFailed || !strings.Contains(du.Status.Message, "no space left on device") || du.Status.SnapshotID != "" {
			t.Errorf("DataUpload %s: %s, snapshot %q (%s); want Failed for the lack of space, no snapshot", du.Name, du.Status.Phase, du.Status.SnapshotID, du.Status.Message)
		}
		poll(t, "the driver's snapshots as before", time.Minute, func(context.Context) (bool, error) {
			return maps.Equal(snapshotIDs(c.CSI.Snapshots()), before), nil
		})
		if _, err := c.Kube.CoreV1().PersistentVolumeClaims(adminNamespace).Get(ctx, du.Name, metav1.GetOptions{}); err == nil {
			t.Errorf("the claim of DataUpload %s is left in %s", du.Name, adminNamespace)
		}
		if left, err := snaps.SnapshotV1().VolumeSnapshots(adminNamespace).Get(ctx, du.Name, metav1.GetOptions{}); err == nil {
			t.Errorf("the moved VolumeSnapshot %s is left", left.Name)
		}
		return du
	}

	step("a location on a 32 MiB filesystem", func(t *testing.T) {
		if err := unix.Mkdir(bucket, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", bucket, "tmpfs", 0, "size=32m,mode=0700"); err != nil {
			t.Fatalf("mounting a tmpfs at %s: %v", bucket, err)
		}
		cleanup(func() { _ = unix.Unmount(bucket, unix.MNT_DETACH) })
		if _, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Create(ctx, &velerov1.BackupStorageLocation{
			ObjectMeta: metav1.ObjectMeta{Name: location},
			Spec: velerov1.BackupStorageLocationSpec{Provider: "velero.io/filesystem",
				StorageType:         velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: bucket}},
				ValidationFrequency: &metav1.Duration{Duration: time.Second}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "location "+location+" Available", 2*time.Minute, func(ctx context.Context) (bool, error) {
			l, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Get(ctx, location, metav1.GetOptions{})
			return err == nil && l.Status.Phase == velerov1.BackupStorageLocationPhaseAvailable, nil
		})
		if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.CSI.CreateClaim(ns, claim, "128Mi", nil)
	})

	first := map[string][]byte{"a.bin": framework.RandomBytes(t, 1<<20), "notes.txt": []byte("the first backup's\n")}
	// The data mover has not run yet: its scratch directory holds no
	// connection (the server made its empty subdirectories at start).
	scratch := filepath.Join(c.BackstopDataDir(), "datamover")
	var filler string
	step("the data mover's scratch space full: the upload fails with the reason, nothing is left", func(t *testing.T) {
		c.CSI.WriteFiles(ns, claim, first)
		if err := unix.Mount("tmpfs", scratch, "tmpfs", 0, "size=64m,mode=0700"); err != nil {
			t.Fatalf("mounting a tmpfs at %s: %v", scratch, err)
		}
		cleanup(func() { _ = unix.Unmount(scratch, unix.MNT_DETACH) })
		for _, dir := range []string{"volumes", "repositories"} {
			if err := unix.Mkdir(filepath.Join(scratch, dir), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		filler = filepath.Join(scratch, "filler")
		fillUp(t, filler)

		outOfSpace(t, "scratch-full", "its data mover's disk")
		if mounted := framework.MountsUnder(t, scratch); len(mounted) != 0 {
			t.Errorf("still mounted in the scratch space: %v", mounted)
		}
	})

	var fits *velerov2alpha1.DataUpload
	step("space freed, a backup that fits completes", func(t *testing.T) {
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		wants("backup create --snapshot-move-data --wait",
			velero("backup", "create", "fits", "--include-namespaces", ns, "--storage-location", location, "--snapshot-move-data", "--wait"),
			"Backup completed with status: Completed")
		fits = uploadOf(t, c, "fits")
		if fits.Status.Phase != velerov2alpha1.DataUploadPhaseCompleted {
			t.Fatalf("DataUpload %s: %s (%s)", fits.Name, fits.Status.Phase, fits.Status.Message)
		}
	})

	step("a backup that does not fit fails its upload with the reason and leaves nothing", func(t *testing.T) {
		c.CSI.WriteFiles(ns, claim, map[string][]byte{"b.bin": framework.RandomBytes(t, 48<<20)})
		du := outOfSpace(t, "overflows", "the location")
		var fs unix.Statfs_t
		_ = unix.Statfs(bucket, &fs)
		t.Logf("DataUpload %s: progress %+v; the location's filesystem: type %x, %d of %d blocks free", du.Name, du.Status.Progress, fs.Type, fs.Bfree, fs.Blocks)
		// The repository holds the first upload's snapshot, and none of
		// the second (complete or not).
		st, err := kopiarepo.FilesystemStorage(ctx, filepath.Join(bucket, filepath.FromSlash(kopiarepo.Prefix("", ns))))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := kopiarepo.Open(ctx, kopiarepo.Config{Storage: st, Password: repositoryPassword(t, c, ns, location), Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer rep.Close(ctx)
		all, err := rep.Snapshots(ctx, kopiarepo.SourcePath(ns, claim))
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 1 || string(all[0].ID) != fits.Status.SnapshotID {
			t.Errorf("the repository holds %d snapshots of the claim, want only the first upload's %s", len(all), fits.Status.SnapshotID)
		}
	})

	// The location full, its availability check may find it unavailable
	// (it writes): the admin grows it first.
	step("the location grown, the first backup still restores byte for byte", func(t *testing.T) {
		if err := unix.Mount("tmpfs", bucket, "tmpfs", unix.MS_REMOUNT, "size=128m,mode=0700"); err != nil {
			t.Fatalf("growing the tmpfs at %s: %v", bucket, err)
		}
		poll(t, "location "+location+" Available", 2*time.Minute, func(ctx context.Context) (bool, error) {
			l, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Get(ctx, location, metav1.GetOptions{})
			return err == nil && l.Status.Phase == velerov1.BackupStorageLocationPhaseAvailable, nil
		})
		wants("restore create --wait",
			velero("restore", "create", "fits-restore", "--from-backup", "fits", "--namespace-mappings", ns+":small-restored", "--wait"),
			"Restore completed with status: Completed")
		c.CSI.WaitBound("small-restored", claim)
		if diff := framework.DiffFiles(first, c.CSI.ReadFiles("small-restored", claim)); diff != "" {
			t.Errorf("the restored claim: %s", diff)
		}
	})
}

// fillUp writes the file at path until its filesystem has no space left.
func fillUp(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, size := range []int{1 << 20, 4 << 10, 1} {
		chunk := make([]byte, size)
		for {
			if _, err := f.Write(chunk); errors.Is(err, unix.ENOSPC) {
				break
			} else if err != nil {
				t.Fatalf("filling %s: %v", path, err)
			}
		}
	}
}

// uploadOf is the one DataUpload of a backup.
func uploadOf(t *testing.T, c *framework.Cluster, backup string) *velerov2alpha1.DataUpload {
	t.Helper()
	list, err := c.Backstop.VeleroV2alpha1().DataUploads(adminNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: velerov1.BackupNameLabel + "=" + backup})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("the DataUploads of %s: %v (%v), want one", backup, list, err)
	}
	return &list.Items[0]
}
