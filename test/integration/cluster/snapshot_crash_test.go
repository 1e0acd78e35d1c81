package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapshotclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/failpoint"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestSnapshotCrashPoints is the crash matrix of backups with CSI
// snapshots: the server is killed at each point a backup of claims passes
// (a snapshot taken and not recorded, snapshots waited for, the backup
// finalizing, its deletion half done), started again, and then no snapshot
// is orphaned: no VolumeSnapshot of a backup is left in the claims'
// namespace, every kept VolumeSnapshotContent is a Completed backup's
// (Retain, one per snapshot it counts), and the driver holds exactly the
// snapshots of those contents.
func TestSnapshotCrashPoints(t *testing.T) {
	t.Parallel()
	c, snaps := csiCluster(t)
	ctx := context.Background()
	const ns = "ledger"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, claim := range []string{"db", "wal"} {
		c.CSI.CreateClaim(ns, claim, "64Mi", nil)
		c.CSI.WriteFiles(ns, claim, map[string][]byte{"entries.log": []byte("entries of " + claim + "\n")})
	}
	velero, wants := veleroCLI(t, c)
	backupOf := func(name string) {
		velero("backup", "create", name, "--include-namespaces", ns)
	}
	movingBackupOf := func(name string) {
		velero("backup", "create", name, "--include-namespaces", ns, "--snapshot-move-data")
	}

	points := []snapshotCrashPoint{
		{point: failpoint.BackupOperationStarted, drive: func(_ *testing.T, b string) { backupOf(b) }, want: velerov1.BackupPhaseFailed},
		// Killed while the backup waits for its snapshots: the restart
		// resumes the wait from the item operations file, and the backup
		// completes.
		{point: failpoint.BackupWaitingForOps, drive: func(_ *testing.T, b string) { backupOf(b) }, want: velerov1.BackupPhaseCompleted, resumed: true},
		{point: failpoint.BackupFinalizing, drive: func(_ *testing.T, b string) { backupOf(b) }, want: velerov1.BackupPhaseCompleted},
		// The server (its backup engine with its data mover) killed while
		// an upload runs: the restart resumes the backup's wait and the
		// node's data mover runs the upload again; the backup completes,
		// and the data mover leaves no claim or storage snapshot
		// (dataUploadOrphans, snapshotOrphans).
		{point: failpoint.DataUploadInProgress, drive: func(_ *testing.T, b string) { movingBackupOf(b) }, want: velerov1.BackupPhaseCompleted, resumed: true},
		{point: failpoint.DeletionInProgress, drive: func(t *testing.T, b string) {
			backupOf(b)
			poll(t, "backup "+b+" Completed", 3*time.Minute, func(ctx context.Context) (bool, error) {
				got, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, b, metav1.GetOptions{})
				return err == nil && got.Status.Phase == velerov1.BackupPhaseCompleted, nil
			})
			wants("backup delete", velero("backup", "delete", b, "--confirm"), fmt.Sprintf("Request to delete backup %q submitted successfully", b))
		}},
	}
	for _, point := range failpoint.ClusterPoints {
		if !slices.ContainsFunc(points, func(p snapshotCrashPoint) bool { return p.point == point }) {
			t.Errorf("cluster crash point %s has no scenario", point)
		}
	}
	for _, p := range points {
		t.Run(p.point, func(t *testing.T) {
			name := "at-" + p.point
			c.StopBackstop(false)
			c.BackstopEnv = []string{failpoint.EnvVar + "=" + p.point}
			c.StartBackstop()
			p.drive(t, name)
			poll(t, "the server killed at "+p.point, 3*time.Minute, func(context.Context) (bool, error) {
				return !c.BackstopRunning(), nil
			})
			c.BackstopEnv = nil
			c.StartBackstop()

			poll(t, "backup "+name+" settled after the restart", 3*time.Minute, func(ctx context.Context) (bool, error) {
				b, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, name, metav1.GetOptions{})
				if p.want == "" {
					return apierrors.IsNotFound(err), nil
				}
				return err == nil && b.Status.Phase.Terminal(), nil
			})
			if p.want != "" {
				b, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if b.Status.Phase != p.want {
					t.Fatalf("backup %s after the restart: %s (%s), want %s", name, b.Status.Phase, b.Status.FailureReason, p.want)
				}
				if p.resumed {
					wants("backup logs", velero("backup", "logs", name), "Backup resumed after a restart of the server")
					dus, err := c.Backstop.VeleroV2alpha1().DataUploads(adminNamespace).List(ctx, metav1.ListOptions{LabelSelector: velerov1.BackupNameLabel + "=" + name})
					if err != nil {
						t.Fatal(err)
					}
					for _, du := range dus.Items {
						if du.Status.Phase != velerov2alpha1.DataUploadPhaseCompleted {
							t.Errorf("DataUpload %s of the resumed backup: %s (%s), want Completed", du.Name, du.Status.Phase, du.Status.Message)
						}
					}
				}
				if p.want == velerov1.BackupPhaseCompleted && (b.Spec.SnapshotMoveData == nil || !*b.Spec.SnapshotMoveData) && b.Status.CSIVolumeSnapshotsCompleted != 2 {
					t.Errorf("backup %s: %d CSI snapshots completed, want one per claim (2)", name, b.Status.CSIVolumeSnapshotsCompleted)
				}
			}
			// orphans is the last listing that succeeded.
			var orphans []string
			var listErr error
			if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
				found, err := snapshotOrphans(ctx, c, snaps, ns)
				if err == nil {
					var left []string
					left, err = dataUploadOrphans(ctx, c)
					found = append(found, left...)
				}
				if listErr = err; err != nil {
					return false, nil
				}
				orphans = found
				return len(orphans) == 0, nil
			}); err != nil {
				serverLog(t, c, "data-mover", "DataUpload", "dataUpload", "Cleaning up")
				t.Fatalf("snapshots orphaned after a crash at %s: %v (last listing error: %v)", p.point, orphans, listErr)
			}
		})
	}
}

// snapshotCrashPoint is a crash point of TestSnapshotCrashPoints: how a
// backup is driven to it, and the backup's phase after the restart ("":
// gone).
type snapshotCrashPoint struct {
	point string
	drive func(t *testing.T, backup string)
	want  velerov1.BackupPhase
	// resumed: the restart resumes the backup (its log says so) and each
	// of its DataUploads completes.
	resumed bool
}

// snapshotOrphans lists the snapshots nobody owns: VolumeSnapshots of a
// backup in the claims' namespace (a finished backup leaves none),
// VolumeSnapshotContents of a backup that does not exist or did not
// complete (or kept otherwise than Retain, or more or fewer than it
// counts), and driver snapshots no such content holds.
func snapshotOrphans(ctx context.Context, c *framework.Cluster, snaps snapshotclient.Interface, ns string) ([]string, error) {
	var out []string
	left, err := snaps.SnapshotV1().VolumeSnapshots(ns).List(ctx, metav1.ListOptions{LabelSelector: velerov1.BackupNameLabel})
	if err != nil {
		return nil, err
	}
	for _, vs := range left.Items {
		out = append(out, fmt.Sprintf("VolumeSnapshot %s/%s of backup %s", vs.Namespace, vs.Name, vs.Labels[velerov1.BackupNameLabel]))
	}
	backups, err := c.Backstop.VeleroV1().Backups(adminNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	completed := map[string]*velerov1.Backup{}
	for i, b := range backups.Items {
		if b.Status.Phase == velerov1.BackupPhaseCompleted && b.DeletionTimestamp == nil {
			completed[string(b.UID)] = &backups.Items[i]
		}
	}
	contents, err := snaps.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	held, perBackup := map[string]bool{}, map[string]int{}
	for _, content := range contents.Items {
		uid := content.Labels[velerov1.BackupUIDLabel]
		b := completed[uid]
		switch {
		case b == nil:
			out = append(out, fmt.Sprintf("VolumeSnapshotContent %s of no completed backup (UID %q; policy %s, deleting %v, finalizers %v)",
				content.Name, uid, content.Spec.DeletionPolicy, content.DeletionTimestamp != nil, content.Finalizers))
		case content.Spec.DeletionPolicy != snapshotv1.VolumeSnapshotContentRetain || content.DeletionTimestamp != nil:
			out = append(out, fmt.Sprintf("VolumeSnapshotContent %s of backup %s: policy %s, deleting %v", content.Name, b.Name, content.Spec.DeletionPolicy, content.DeletionTimestamp != nil))
		}
		perBackup[uid]++
		if st := content.Status; st != nil && st.SnapshotHandle != nil {
			held[*st.SnapshotHandle] = true
		}
	}
	for uid, b := range completed {
		if perBackup[uid] != b.Status.CSIVolumeSnapshotsCompleted {
			out = append(out, fmt.Sprintf("backup %s: %d VolumeSnapshotContents kept, %d snapshots completed", b.Name, perBackup[uid], b.Status.CSIVolumeSnapshotsCompleted))
		}
	}
	for _, s := range c.CSI.Snapshots() {
		if !held[s.GetSnapshotId()] {
			out = append(out, "driver snapshot "+s.GetSnapshotId()+" that no backup's content holds")
		}
	}
	return out, nil
}

// dataUploadOrphans lists what the data mover left of DataUploads that
// ended: one not ended (of a backup that did), and a claim of one's in
// the admin namespace.
func dataUploadOrphans(ctx context.Context, c *framework.Cluster) ([]string, error) {
	var out []string
	dus, err := c.Backstop.VeleroV2alpha1().DataUploads(adminNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, du := range dus.Items {
		if !du.Status.Phase.Terminal() {
			out = append(out, fmt.Sprintf("DataUpload %s %s of an ended backup", du.Name, du.Status.Phase))
		}
		_, err := c.Kube.CoreV1().PersistentVolumeClaims(adminNamespace).Get(ctx, du.Name, metav1.GetOptions{})
		if err == nil {
			out = append(out, "the claim of DataUpload "+du.Name)
		} else if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	return out, nil
}
