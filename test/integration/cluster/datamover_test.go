package cluster

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/datamover/kopiarepo"
	"github.com/backstop-io/backstop/pkg/engine/backuprepo"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestDataMover moves claims' snapshot data into the storage location
// (backups with snapshotMoveData): a DataUpload per claim, run by the
// data mover of the node that has the CSI driver's node service; the
// repository is the location's kopia repository in Velero's layout,
// holding each claim's files byte for byte; nothing is left in the
// cluster or the driver; the next backup uploads only what changed.
func TestDataMover(t *testing.T) {
	t.Parallel()
	c, snaps := csiCluster(t)
	ctx := context.Background()
	step := inOrder(t)
	velero, wants := veleroCLI(t, c)
	const ns = "shop"
	content := map[string]map[string][]byte{"db": volumeFiles(t), "logs": {"app.log": []byte("started\n"), "archive/2026-11.log": []byte("rotated\n")}}
	// The location is the default one: a directory of the server's.
	repoDir := filepath.Join(c.BackstopDataDir(), "backups", filepath.FromSlash(kopiarepo.Prefix("", ns)))

	// uploads returns a backup's DataUploads by claim, once each has ended.
	uploads := func(t *testing.T, backup string) map[string]*velerov2alpha1.DataUpload {
		t.Helper()
		out := map[string]*velerov2alpha1.DataUpload{}
		list, err := c.Backstop.VeleroV2alpha1().DataUploads(adminNamespace).List(ctx, metav1.ListOptions{LabelSelector: velerov1.BackupNameLabel + "=" + backup})
		if err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			du := &list.Items[i]
			out[du.Spec.SourcePVC] = du
		}
		return out
	}
	// restored reads a kopia snapshot of the repository back.
	// openRepository opens the repository as a client of its own would
	// (closed when the test step ends).
	openRepository := func(t *testing.T) *kopiarepo.Repository {
		t.Helper()
		st, err := kopiarepo.FilesystemStorage(ctx, repoDir)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := kopiarepo.Open(ctx, kopiarepo.Config{Storage: st, Password: repositoryPassword(t, c, ns, "default"), Dir: t.TempDir()})
		if err != nil {
			t.Fatalf("opening the repository at %s: %v", repoDir, err)
		}
		t.Cleanup(func() { _ = rep.Close(ctx) })
		return rep
	}
	restored := func(t *testing.T, id string) map[string][]byte {
		t.Helper()
		dir := t.TempDir()
		if _, err := openRepository(t).Restore(ctx, id, dir, nil); err != nil {
			t.Fatal(err)
		}
		files, err := framework.ReadTree(dir)
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	// leftNothing waits until the cluster and the driver hold nothing of
	// the data mover's: no VolumeSnapshot in the claims' namespace or the
	// admin namespace, no claim of a DataUpload's in the admin namespace,
	// no driver snapshot but those there before.
	leftNothing := func(t *testing.T, before map[string]bool, dus map[string]*velerov2alpha1.DataUpload) {
		t.Helper()
		var left string
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			for _, n := range []string{ns, adminNamespace} {
				vs, err := snaps.SnapshotV1().VolumeSnapshots(n).List(ctx, metav1.ListOptions{})
				if err != nil {
					return false, err
				}
				if len(vs.Items) > 0 {
					left = fmt.Sprintf("VolumeSnapshot %s/%s", n, vs.Items[0].Name)
					return false, nil
				}
			}
			claims, err := c.Kube.CoreV1().PersistentVolumeClaims(adminNamespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, claim := range claims.Items {
				for _, du := range dus {
					if claim.Name == du.Name {
						left = fmt.Sprintf("PVC %s/%s (%s)", adminNamespace, claim.Name, claim.Status.Phase)
						return false, nil
					}
				}
			}
			now := snapshotIDs(c.CSI.Snapshots())
			left = fmt.Sprintf("the driver's snapshots %v, before %v", now, before)
			return maps.Equal(now, before), nil
		})
		if err != nil {
			t.Fatalf("the data mover left %s: %v", left, err)
		}
	}

	step("claims with files", func(t *testing.T) {
		if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for claim, files := range content {
			c.CSI.CreateClaim(ns, claim, "256Mi", nil)
			c.CSI.WriteFiles(ns, claim, files)
		}
	})

	var first map[string]*velerov2alpha1.DataUpload
	step("a backup that moves its snapshots' data", func(t *testing.T) {
		before := snapshotIDs(c.CSI.Snapshots())
		wants("backup create --snapshot-move-data --wait",
			velero("backup", "create", "moved-1", "--include-namespaces", ns, "--snapshot-move-data", "--wait"),
			"Backup completed with status: Completed")
		first = uploads(t, "moved-1")
		if len(first) != len(content) {
			t.Fatalf("the backup has %d DataUploads, want one per claim (%d)", len(first), len(content))
		}
		for claim, du := range first {
			var size int64
			for _, data := range content[claim] {
				size += int64(len(data))
			}
			st := du.Status
			if st.Phase != velerov2alpha1.DataUploadPhaseCompleted || st.SnapshotID == "" || st.Node != framework.HarnessNode || st.AcceptedByNode != framework.HarnessNode {
				t.Errorf("DataUpload %s of %s: phase %s, snapshot %q, node %q (accepted by %q); want Completed by %s: %s",
					du.Name, claim, st.Phase, st.SnapshotID, st.Node, st.AcceptedByNode, framework.HarnessNode, st.Message)
			}
			if st.Progress.TotalBytes != size || st.Progress.BytesDone != size {
				t.Errorf("DataUpload of %s: progress %d of %d bytes, want %d of %d", claim, st.Progress.BytesDone, st.Progress.TotalBytes, size, size)
			}
			if du.Spec.SourceNamespace != ns || du.Spec.BackupStorageLocation != "default" || du.Spec.CSISnapshot == nil || du.Spec.CSISnapshot.Driver != framework.CSIDriver {
				t.Errorf("DataUpload of %s: spec %+v", claim, du.Spec)
			}
			if st.Path != kopiarepo.SourcePath(ns, claim) {
				t.Errorf("DataUpload of %s: path %q, want the kopia source %q", claim, st.Path, kopiarepo.SourcePath(ns, claim))
			}
		}
		b, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, "moved-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if b.Status.BackupItemOperationsAttempted != 2 || b.Status.BackupItemOperationsCompleted != 2 {
			t.Errorf("backup operations: %d attempted, %d completed; want 2, 2", b.Status.BackupItemOperationsAttempted, b.Status.BackupItemOperationsCompleted)
		}
		leftNothing(t, before, first)
	})

	step("the repository is the location's, in Velero's layout, with each claim's files", func(t *testing.T) {
		repo, err := c.Backstop.VeleroV1().BackupRepositories(adminNamespace).Get(ctx, backuprepo.Name(ns, "default"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wantLabels := map[string]string{velerov1.VolumeNamespaceLabel: ns, velerov1.StorageLocationLabel: "default", velerov1.RepositoryTypeLabel: "kopia"}
		if repo.Status.Phase != velerov1.BackupRepositoryPhaseReady || !maps.Equal(repo.Labels, wantLabels) || repo.Spec.VolumeNamespace != ns ||
			repo.Spec.BackupStorageLocation != "default" || repo.Spec.RepositoryType != "kopia" {
			t.Errorf("BackupRepository: labels %v, spec %+v, status %+v", repo.Labels, repo.Spec, repo.Status)
		}
		// Its own password, random, in the admin namespace; Velero's
		// shared one is not made.
		if p := repositoryPassword(t, c, ns, "default"); len(p) < 40 || p == backuprepo.DefaultPassword {
			t.Errorf("the repository's password %q, want a random one", p)
		}
		if _, err := c.Kube.CoreV1().Secrets(adminNamespace).Get(ctx, backuprepo.CredentialsSecret, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Secret %s: %v, want none made", backuprepo.CredentialsSecret, err)
		}
		// Velero's repository in the bucket: kopia's format blob and
		// Velero's marker under <prefix>/kopia/<namespace>/.
		for _, blob := range []string{"kopia.repository.f", "udmrepo.Repository.f"} {
			if _, err := os.Stat(filepath.Join(repoDir, blob)); err != nil {
				t.Errorf("the repository's %s: %v", blob, err)
			}
		}
		for claim, du := range first {
			if diff := framework.DiffFiles(content[claim], restored(t, du.Status.SnapshotID)); diff != "" {
				t.Errorf("snapshot %s of %s in the repository: %s", du.Status.SnapshotID, claim, diff)
			}
		}
		out := velero("backup", "describe", "moved-1", "--details", "--colorized=false")
		wants("backup describe --details", out, "Snapshot Move Data:", "Data Movement:", "Data Mover: velero", "Uploader Type: kopia")
	})

	step("the next backup uploads what changed", func(t *testing.T) {
		before := snapshotIDs(c.CSI.Snapshots())
		added := make([]byte, 1<<20)
		if _, err := rand.Read(added); err != nil {
			t.Fatal(err)
		}
		c.CSI.WriteFiles(ns, "db", map[string][]byte{"data/added.bin": added})
		content["db"]["data/added.bin"] = added
		wants("backup create --snapshot-move-data --wait",
			velero("backup", "create", "moved-2", "--include-namespaces", ns, "--snapshot-move-data", "--wait"),
			"Backup completed with status: Completed")
		second := uploads(t, "moved-2")
		db, logs := second["db"], second["logs"]
		if db == nil || logs == nil || db.Status.Phase != velerov2alpha1.DataUploadPhaseCompleted || logs.Status.Phase != velerov2alpha1.DataUploadPhaseCompleted {
			t.Fatalf("the second backup's DataUploads: %v", second)
		}
		if got := db.Status.IncrementalBytes; got != int64(len(added)) {
			t.Errorf("db's second upload read %d bytes of new files, want the %d added", got, len(added))
		}
		if got := logs.Status.IncrementalBytes; got != 0 {
			t.Errorf("logs' second upload read %d bytes of new files, want none", got)
		}
		if diff := framework.DiffFiles(content["db"], restored(t, db.Status.SnapshotID)); diff != "" {
			t.Errorf("the second snapshot of db: %s", diff)
		}
		leftNothing(t, before, second)
	})

	// The backup restored into another namespace: each claim provisioned
	// anew (selecting only the volume made for it), a DataDownload each,
	// run by the data mover, which writes the kopia snapshot into a new
	// volume and hands it to the claim; the files byte for byte, nothing
	// left in the admin namespace, the volume's reclaim policy as it was.
	step("a restore writes each claim's data back, into a mapped namespace", func(t *testing.T) {
		const restored = "shop-restored"
		wants("restore create --wait",
			velero("restore", "create", "moved-2-restore", "--from-backup", "moved-2", "--namespace-mappings", ns+":"+restored, "--wait"),
			"Restore completed with status: Completed")
		r, err := c.Backstop.VeleroV1().Restores(adminNamespace).Get(ctx, "moved-2-restore", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.RestoreItemOperationsAttempted != 2 || r.Status.RestoreItemOperationsCompleted != 2 {
			t.Errorf("restore operations: %d attempted, %d completed; want 2, 2", r.Status.RestoreItemOperationsAttempted, r.Status.RestoreItemOperationsCompleted)
		}
		dds, err := c.Backstop.VeleroV2alpha1().DataDownloads(adminNamespace).List(ctx, metav1.ListOptions{LabelSelector: velerov1.RestoreNameLabel + "=moved-2-restore"})
		if err != nil || len(dds.Items) != 2 {
			t.Fatalf("the restore's DataDownloads: %v (%v), want one per claim", dds, err)
		}
		for _, dd := range dds.Items {
			st := dd.Status
			if st.Phase != velerov2alpha1.DataDownloadPhaseCompleted || st.Node != framework.HarnessNode || dd.Spec.SourceNamespace != ns || dd.Spec.TargetVolume.Namespace != restored {
				t.Errorf("DataDownload %s: spec %+v, status %+v", dd.Name, dd.Spec, st)
			}
			if _, err := c.Kube.CoreV1().PersistentVolumeClaims(adminNamespace).Get(ctx, dd.Name, metav1.GetOptions{}); err == nil {
				t.Errorf("the claim of DataDownload %s is left in %s", dd.Name, adminNamespace)
			}
		}
		for claim, files := range content {
			pvc := c.CSI.WaitBound(restored, claim)
			pv, err := c.Kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.Labels[velerov1.DynamicPVRestoreLabel] == "" {
				t.Errorf("the volume of %s/%s: reclaim policy %s, labels %v", restored, claim, pv.Spec.PersistentVolumeReclaimPolicy, pv.Labels)
			}
			if diff := framework.DiffFiles(files, c.CSI.ReadFiles(restored, claim)); diff != "" {
				t.Errorf("restored claim %s/%s: %s", restored, claim, diff)
			}
		}
	})

	// Cancelled while its upload runs (uploads slowed to 4 MiB/s: db's
	// 64 new MiB take about 16 seconds): the upload stops, the DataUpload is
	// Canceled, the repository holds no snapshot of it (complete or not),
	// the backup ends Failed as the seed has it, its logs kept, and the
	// cluster holds nothing of the data mover's.
	step("cancelling the backup stops its upload", func(t *testing.T) {
		c.StopBackstop(false)
		c.BackstopArgs = append(c.BackstopArgs, "--data-mover-upload-bytes-per-second=4194304")
		c.StartBackstop()
		// New data: what kopia already holds would not be uploaded again.
		more := make([]byte, 64<<20)
		if _, err := rand.Read(more); err != nil {
			t.Fatal(err)
		}
		c.CSI.WriteFiles(ns, "db", map[string][]byte{"data/more.bin": more})
		before := snapshotIDs(c.CSI.Snapshots())
		velero("backup", "create", "moved-3", "--include-namespaces", ns, "--snapshot-move-data")
		var du *velerov2alpha1.DataUpload
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			du = uploads(t, "moved-3")["db"]
			return du != nil && du.Status.Phase == velerov2alpha1.DataUploadPhaseInProgress, nil
		}); err != nil {
			for claim, d := range uploads(t, "moved-3") {
				t.Logf("DataUpload of %s: cancel %v, status %+v", claim, d.Spec.Cancel, d.Status)
			}
			serverLog(t, c, "data-mover", "DataUpload", "dataUpload")
			t.Fatalf("db's DataUpload of moved-3 not InProgress: %v", err)
		}
		if err := c.Backstop.VeleroV1().RESTClient().Post().Namespace(adminNamespace).Resource("backups").Name("moved-3").SubResource("cancel").Do(ctx).Error(); err != nil {
			t.Fatalf("backups/cancel: %v", err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			du = uploads(t, "moved-3")["db"]
			return du.Status.Phase == velerov2alpha1.DataUploadPhaseCanceled, nil
		}); err != nil {
			t.Fatalf("db's DataUpload not Canceled: cancel %v, status %+v", du.Spec.Cancel, du.Status)
		}
		if du.Status.SnapshotID != "" || !du.Spec.Cancel {
			t.Errorf("the cancelled DataUpload: cancel %v, snapshot %q; want cancel and no snapshot", du.Spec.Cancel, du.Status.SnapshotID)
		}
		var b *velerov1.Backup
		poll(t, "backup moved-3 Failed", 2*time.Minute, func(ctx context.Context) (bool, error) {
			var err error
			b, err = c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, "moved-3", metav1.GetOptions{})
			return err == nil && b.Status.Phase == velerov1.BackupPhaseFailed, nil
		})
		logs := velero("backup", "logs", "moved-3")
		for _, want := range []string{velerov1.BackupCancelledReason, du.Labels[velerov1.AsyncOperationIDLabel]} {
			if !strings.Contains(logs, want) {
				t.Errorf("the log of the cancelled backup lacks %q:\n%s", want, logs)
			}
		}
		rep := openRepository(t)
		all, err := rep.Snapshots(ctx, kopiarepo.SourcePath(ns, "db"))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range all {
			if m.IncompleteReason != "" || m.Tags[velerov1.AsyncOperationIDLabel] == du.Labels[velerov1.AsyncOperationIDLabel] {
				t.Errorf("the repository holds snapshot %s of the cancelled upload (incomplete: %q)", m.ID, m.IncompleteReason)
			}
		}
		if len(all) != 2 {
			t.Errorf("the repository holds %d snapshots of db, want the 2 of the completed backups", len(all))
		}
		leftNothing(t, before, uploads(t, "moved-3"))
	})

	// Deleting a backup forgets its kopia snapshots (their data goes at
	// the repository's maintenance) and deletes its DataUploads; the
	// other backups' snapshots stay.
	step("deleting a backup forgets its snapshots", func(t *testing.T) {
		second := uploads(t, "moved-2")
		wants("backup delete", velero("backup", "delete", "moved-1", "--confirm"), `Request to delete backup "moved-1" submitted successfully`)
		poll(t, "backup moved-1 gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
			_, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, "moved-1", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if left := uploads(t, "moved-1"); len(left) != 0 {
			t.Errorf("DataUploads of the deleted backup left: %v", left)
		}
		rep := openRepository(t)
		for claim, du := range first {
			if _, err := rep.SourceOf(ctx, du.Status.SnapshotID); !errors.Is(err, kopiarepo.ErrNoSnapshot) {
				t.Errorf("the deleted backup's snapshot %s of %s: %v, want it forgotten", du.Status.SnapshotID, claim, err)
			}
		}
		for claim, du := range second {
			if _, err := rep.SourceOf(ctx, du.Status.SnapshotID); err != nil {
				t.Errorf("backup moved-2's snapshot %s of %s: %v, want it kept", du.Status.SnapshotID, claim, err)
			}
		}
	})

	// Every backup deleted, the repository's maintenance (run by the
	// server every spec.maintenanceFrequency, kopia's schedule choosing
	// quick or full) frees their data once asked for a full maintenance
	// without kopia's safety delays: the bucket is back to about the
	// repository's own metadata.
	step("maintenance frees the space of deleted backups", func(t *testing.T) {
		repos := c.Backstop.VeleroV1().BackupRepositories(adminNamespace)
		name := backuprepo.Name(ns, "default")
		br, err := repos.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(br.Status.RecentMaintenance); n == 0 || br.Status.LastMaintenanceTime == nil || br.Status.RecentMaintenance[n-1].Result != velerov1.BackupRepositoryMaintenanceSucceeded {
			t.Errorf("the repository's maintenance so far: last %v, recent %+v; want it maintained since it was made", br.Status.LastMaintenanceTime, br.Status.RecentMaintenance)
		}
		for _, b := range []string{"moved-2", "moved-3"} {
			wants("backup delete", velero("backup", "delete", b, "--confirm"), fmt.Sprintf("Request to delete backup %q submitted successfully", b))
		}
		poll(t, "every backup gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
			list, err := c.Backstop.VeleroV1().Backups(adminNamespace).List(ctx, metav1.ListOptions{})
			return err == nil && len(list.Items) == 0, nil
		})
		withData := framework.DirBytes(t, repoDir)
		patch := `{"spec":{"maintenanceFrequency":"1s","repositoryConfig":{"fullMaintenanceInterval":"1s","maintenanceSafety":"none"}}}`
		if _, err := repos.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		// The repository's own metadata: its format, Velero's marker,
		// kopia's parameters, schedule, indexes and maintenance logs.
		const metadata = 1 << 20
		var left int64
		var last velerov1.BackupRepositoryMaintenanceStatus
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			br, err := repos.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if n := len(br.Status.RecentMaintenance); n > 0 {
				last = br.Status.RecentMaintenance[n-1]
			}
			left = framework.DirBytes(t, repoDir)
			return left <= metadata, nil
		}); err != nil {
			t.Fatalf("the bucket holds %d bytes of the repository (%d before), want at most %d; last maintenance %+v", left, withData, metadata, last)
		}
		t.Logf("the repository in the bucket: %d bytes with the deleted backups' data, %d after a full maintenance", withData, left)
		if last.Result != velerov1.BackupRepositoryMaintenanceSucceeded || last.CompleteTimestamp == nil {
			t.Errorf("the last maintenance %+v, want it Succeeded", last)
		}
		// Back to Velero's frequency: maintenance every second writes a
		// log each time.
		if _, err := repos.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"maintenanceFrequency":"1h"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}

// serverLog logs the lines of the server's log that hold one of words.
func serverLog(t *testing.T, c *framework.Cluster, words ...string) {
	data, err := os.ReadFile(filepath.Join(c.Dir, "logs", "backstop-apiserver.log"))
	if err != nil {
		t.Log(err)
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		for _, w := range words {
			if strings.Contains(line, w) {
				t.Log(line)
				break
			}
		}
	}
}

// repositoryPassword is the password of the kopia repository of namespace
// ns in location, as the server keeps it: its Secret in the admin
// namespace.
func repositoryPassword(t *testing.T, c *framework.Cluster, ns, location string) string {
	t.Helper()
	name := backuprepo.PasswordSecretName(backuprepo.Name(ns, location))
	s, err := c.Kube.CoreV1().Secrets(adminNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the password of repository %s: %v", backuprepo.Name(ns, location), err)
	}
	return string(s.Data[backuprepo.PasswordKey])
}
