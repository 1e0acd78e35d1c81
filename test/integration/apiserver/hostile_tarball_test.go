package apiserver

import (
	"archive/tar"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/archive/archivetest"
	"github.com/backstop-io/backstop/test/integration/conformance"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// trackerItem is a VirtualMachineBackupTracker as a backup holds it, the
// namespace and name in its JSON as given, padded with an annotation of
// pad bytes.
func trackerItem(namespace, name string, pad int) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"backup.kubevirt.io/v1alpha1","kind":"VirtualMachineBackupTracker",`+
		`"metadata":{"name":%q,"namespace":%q,"annotations":{"pad":%q}},`+
		`"spec":{"source":{"apiGroup":"kubevirt.io","kind":"VirtualMachine","name":"vm1"}}}`, name, namespace, strings.Repeat("x", pad))
}

const trackers = "virtualmachinebackuptrackers.backup.kubevirt.io"

// TestRestoreHostileTarballs: a backup's tarball is input from a bucket,
// which others than the server may write (a tenant's own location). Each
// case replaces a real backup's tarball in the default location with a
// crafted one and restores it: entries that would leave their place
// (.., absolute names, links, duplicates, a scope or a name the JSON
// claims) are skipped with a warning or restored where their path says;
// a gzip bomb, too many items or too much scratch space fail the restore
// with the limit in its reason, and the next restore runs; the data
// directory's files are unchanged throughout.
func TestRestoreHostileTarballs(t *testing.T) {
	t.Parallel()
	framework.StorageIndependent(t, "hostile tarballs (the restore engine's reader)")
	s := framework.Start(t, framework.Options{Args: []string{"--restore-max-items=50", "--restore-max-bytes=8388608", "--restore-max-scratch-bytes=1048576"}})
	ctx := context.Background()
	createTracker(t, s, "hostile", "seed", nil)
	filesBefore := conformance.DataDirSums(t, s.DataDir)
	n := 0
	restoreCrafted := func(t *testing.T, entries []archivetest.Entry) *velerov1.Restore {
		t.Helper()
		n++
		name := fmt.Sprintf("crafted-%d", n)
		createBackup(t, s, name, "hostile")
		if b := waitBackup(t, s, name, "finished", finished); b.Status.Phase != velerov1.BackupPhaseCompleted {
			t.Fatalf("backup %s: %s", name, b.Status.Phase)
		}
		tarball := filepath.Join(s.DataDir, "backups", "backups", name, name+".tar.gz")
		if err := os.WriteFile(tarball, archivetest.Build(t, entries...), 0o644); err != nil {
			t.Fatal(err)
		}
		filesBefore[filepath.Join("backups", "backups", name, name+".tar.gz")] = conformance.DataDirSums(t, s.DataDir)[filepath.Join("backups", "backups", name, name+".tar.gz")]
		return createRestore(t, s, name, velerov1.RestoreSpec{BackupName: name, IncludedNamespaces: []string{"hostile"}})
	}
	failedWith := func(t *testing.T, r *velerov1.Restore, flag string) {
		t.Helper()
		if r.Status.Phase != velerov1.RestorePhaseFailed || !strings.Contains(r.Status.FailureReason, flag) {
			t.Errorf("restore %s: %s %q, want Failed naming %s", r.Name, r.Status.Phase, r.Status.FailureReason, flag)
		}
	}

	t.Run("a gzip bomb", func(t *testing.T) {
		failedWith(t, restoreCrafted(t, []archivetest.Entry{{Name: "metadata/junk", Zeros: 1 << 30}}), "--restore-max-bytes")
	})
	t.Run("too many items", func(t *testing.T) {
		var entries []archivetest.Entry
		for i := range 60 {
			entries = append(entries, archivetest.Item(trackers, "v1alpha1", "hostile", fmt.Sprintf("t%d", i), trackerItem("hostile", fmt.Sprintf("t%d", i), 0)))
		}
		failedWith(t, restoreCrafted(t, entries), "--restore-max-items")
	})
	t.Run("too much scratch space", func(t *testing.T) {
		var entries []archivetest.Entry
		for i := range 4 {
			entries = append(entries, archivetest.Item(trackers, "v1alpha1", "hostile", fmt.Sprintf("big%d", i), trackerItem("hostile", fmt.Sprintf("big%d", i), 400<<10)))
		}
		failedWith(t, restoreCrafted(t, entries), "--restore-max-scratch-bytes")
	})
	t.Run("entries out of place", func(t *testing.T) {
		good := archivetest.Item(trackers, "v1alpha1", "hostile", "good", trackerItem("hostile", "good", 0))
		dup := good
		dup.Data = trackerItem("hostile", "good", 10)
		r := restoreCrafted(t, []archivetest.Entry{
			good, dup,
			{Name: "resources/" + trackers + "/v1alpha1-preferredversion/namespaces/../../../../pki/ca.crt.json", Data: trackerItem("hostile", "dotdot", 0)},
			{Name: "/resources/" + trackers + "/v1alpha1-preferredversion/namespaces/hostile/absolute.json", Data: trackerItem("hostile", "absolute", 0)},
			{Name: "resources/" + trackers + "/v1alpha1-preferredversion/namespaces/hostile/link.json", Type: tar.TypeSymlink, Linkname: "/etc/shadow"},
			// The JSON claims another namespace and name than the path:
			// the path decides.
			archivetest.Item(trackers, "v1alpha1", "hostile", "renamed", trackerItem("elsewhere", "evil", 0)),
			// A namespaced kind filed as cluster-scoped.
			archivetest.Item(trackers, "v1alpha1", "", "clusterwide", trackerItem("", "clusterwide", 0)),
			// A namespace the restore does not take.
			archivetest.Item(trackers, "v1alpha1", "elsewhere", "other", trackerItem("elsewhere", "other", 0)),
		})
		if r.Status.Phase != velerov1.RestorePhaseCompleted {
			t.Fatalf("restore %s: %s %q (errors %d)", r.Name, r.Status.Phase, r.Status.FailureReason, r.Status.Errors)
		}
		logs := restoreLogs(t, s, r.Name)
		for _, want := range []string{"ca.crt.json", "a name with an element", "an absolute name", "not a regular file", "seen before", "filed in the backup as cluster-scoped"} {
			if !strings.Contains(logs, want) {
				t.Errorf("restore log says nothing of %q:\n%s", want, logs)
			}
		}
		kv := s.Clientset.BackupV1alpha1()
		for _, want := range []string{"good", "renamed"} {
			if _, err := kv.VirtualMachineBackupTrackers("hostile").Get(ctx, want, metav1.GetOptions{}); err != nil {
				t.Errorf("tracker hostile/%s: %v", want, err)
			}
		}
		for _, gone := range [][2]string{{"elsewhere", "evil"}, {"hostile", "evil"}, {"elsewhere", "other"}, {"hostile", "dotdot"}, {"hostile", "absolute"}, {"hostile", "link"}} {
			if _, err := kv.VirtualMachineBackupTrackers(gone[0]).Get(ctx, gone[1], metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("tracker %s/%s restored: %v", gone[0], gone[1], err)
			}
		}
		if got, err := kv.VirtualMachineBackupTrackers("hostile").Get(ctx, "good", metav1.GetOptions{}); err == nil && got.Annotations["pad"] != "" {
			t.Errorf("the duplicate entry was restored over the first one")
		}
	})
	// Nothing of the data directory changed but the backups the test made
	// and the files it replaced.
	after := conformance.DataDirSums(t, s.DataDir)
	for f := range after {
		if strings.HasPrefix(f, filepath.Join("backups", "backups", "crafted-")) || strings.HasPrefix(f, filepath.Join("backups", "restores", "crafted-")) {
			filesBefore[f] = after[f]
		}
	}
	conformance.CompareSums(t, filesBefore, after)
}

// TestBackupSyncBoundedPerPass: a location holding more backups than
// --backup-sync-max-per-pass (a bucket a tenant filled) is taken a pass at a
// time: the first pass makes that many Backups and says the rest wait.
func TestBackupSyncBoundedPerPass(t *testing.T) {
	t.Parallel()
	framework.StorageIndependent(t, "the backup sync engine's bound per pass")
	first := framework.Start(t, framework.Options{})
	ctx := context.Background()
	createTracker(t, first, "app", "t1", nil)
	createBackup(t, first, "seed", "app")
	if b := waitBackup(t, first, "seed", "finished", finished); b.Status.Phase != velerov1.BackupPhaseCompleted {
		t.Fatalf("backup seed: %s", b.Status.Phase)
	}
	bucket := filepath.Join(first.DataDir, "backups")
	seed, err := os.ReadFile(filepath.Join(bucket, "backups", "seed", "velero-backup.json"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		name := fmt.Sprintf("copy-%d", i)
		if err := os.MkdirAll(filepath.Join(bucket, "backups", name), 0o755); err != nil {
			t.Fatal(err)
		}
		data := strings.Replace(string(seed), `"name":"seed"`, fmt.Sprintf(`"name":%q`, name), 1)
		if err := os.WriteFile(filepath.Join(bucket, "backups", name, "velero-backup.json"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	second := framework.Start(t, framework.Options{Args: []string{"--backup-sync-period=1h", "--backup-sync-max-per-pass=2"}})
	if _, err := second.Clientset.VeleroV1().BackupStorageLocations(ns).Create(ctx, &velerov1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Name: "first", Namespace: ns},
		Spec: velerov1.BackupStorageLocationSpec{Provider: "filesystem", AccessMode: velerov1.BackupStorageLocationAccessModeReadOnly,
			StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: bucket}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		log, err := os.ReadFile(filepath.Join(second.DataDir, "server.log"))
		return err == nil && strings.Contains(string(log), "Sync pass at its limit"), nil
	}); err != nil {
		t.Fatal("the sync pass never reached its limit")
	}
	list, err := second.Clientset.VeleroV1().Backups(ns).List(ctx, metav1.ListOptions{LabelSelector: velerov1.StorageLocationLabel + "=first"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Errorf("the first pass made %d Backups of the 6 the location holds, want 2", len(list.Items))
	}
}
