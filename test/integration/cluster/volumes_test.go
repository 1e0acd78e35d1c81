package cluster

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapshotclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// volumeFiles are what the volume tests write into a claim: text, a 64 MiB
// random file, and many small files in nested directories.
func volumeFiles(t *testing.T) map[string][]byte {
	t.Helper()
	files := map[string][]byte{"README.txt": []byte("the shop's orders\n")}
	big := make([]byte, 64<<20)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	files["data/orders.bin"] = big
	for i := range 200 {
		files[fmt.Sprintf("data/small/%02d/item-%03d.json", i%10, i)] = fmt.Appendf(nil, `{"item":%d}`, i)
	}
	return files
}

// csiCluster starts a cluster with the CSI stack, and the admin's client
// of its snapshot API.
func csiCluster(t *testing.T) (*framework.Cluster, snapshotclient.Interface) {
	t.Helper()
	c := framework.StartClusterWith(t, framework.ClusterOptions{CSI: true})
	snaps, err := snapshotclient.NewForConfig(c.Admin)
	if err != nil {
		t.Fatal(err)
	}
	return c, snaps
}

// TestVolumeSnapshots runs the CSI stack of the harness and the volume
// data of backups on it.
func TestVolumeSnapshots(t *testing.T) {
	t.Parallel()
	c, snaps := csiCluster(t)
	ctx := context.Background()
	step := inOrder(t)
	const ns = "csi-stack"
	files := volumeFiles(t)

	// The stack itself, as a user of it sees it: a claim provisioned, its
	// files written through the node service, a VolumeSnapshot taken by
	// the driver, a claim restored from it with the snapshot's files (not
	// those written after it), and the driver's snapshot gone with the
	// VolumeSnapshot (deletion policy Delete).
	step("the CSI stack provisions, snapshots and restores a claim", func(t *testing.T) {
		if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.CSI.CreateClaim(ns, "data", "1Gi", nil)
		c.CSI.WriteFiles(ns, "data", files)
		if diff := framework.DiffFiles(files, c.CSI.ReadFiles(ns, "data")); diff != "" {
			t.Fatalf("read back from the claim: %s", diff)
		}
		before := len(c.CSI.Snapshots())

		class, claim := framework.CSISnapshotClass, "data"
		vs := &snapshotv1.VolumeSnapshot{
			ObjectMeta: metav1.ObjectMeta{Name: "data-snap", Namespace: ns},
			Spec: snapshotv1.VolumeSnapshotSpec{
				VolumeSnapshotClassName: &class,
				Source:                  snapshotv1.VolumeSnapshotSource{PersistentVolumeClaimName: &claim},
			},
		}
		if _, err := snaps.SnapshotV1().VolumeSnapshots(ns).Create(ctx, vs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var handle string
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := snaps.SnapshotV1().VolumeSnapshots(ns).Get(ctx, vs.Name, metav1.GetOptions{})
			if err != nil || got.Status == nil || got.Status.ReadyToUse == nil || !*got.Status.ReadyToUse || got.Status.BoundVolumeSnapshotContentName == nil {
				return false, nil
			}
			content, err := snaps.SnapshotV1().VolumeSnapshotContents().Get(ctx, *got.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
			if err != nil || content.Status == nil || content.Status.SnapshotHandle == nil {
				return false, nil
			}
			handle = *content.Status.SnapshotHandle
			return true, nil
		}); err != nil {
			t.Fatalf("VolumeSnapshot %s/%s ReadyToUse: %v", ns, vs.Name, err)
		}
		if got := c.CSI.Snapshots(); len(got) != before+1 || !hasSnapshot(got, handle) {
			t.Fatalf("the driver has %d snapshots, want %d with %s", len(got), before+1, handle)
		}

		// Written after the snapshot: not in the restored claim.
		c.CSI.WriteFiles(ns, "data", map[string][]byte{"later.txt": []byte("after the snapshot")})

		storageClass := framework.CSIStorageClass
		restored := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data-restored", Namespace: ns},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: &storageClass,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				DataSource:       &corev1.TypedLocalObjectReference{APIGroup: &snapshotv1.SchemeGroupVersion.Group, Kind: "VolumeSnapshot", Name: vs.Name},
			},
		}
		if _, err := c.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, restored, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.CSI.WaitBound(ns, restored.Name)
		if diff := framework.DiffFiles(files, c.CSI.ReadFiles(ns, restored.Name)); diff != "" {
			t.Fatalf("the claim restored from the snapshot: %s", diff)
		}

		if err := snaps.SnapshotV1().VolumeSnapshots(ns).Delete(ctx, vs.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := snaps.SnapshotV1().VolumeSnapshots(ns).Get(ctx, vs.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err) && !hasSnapshot(c.CSI.Snapshots(), handle), nil
		}); err != nil {
			t.Fatalf("the VolumeSnapshot and the driver's snapshot %s gone after its deletion: %v", handle, err)
		}
	})

	velero, wants := veleroCLI(t, c)
	const orders = "orders"
	dbFiles := files
	logFiles := map[string][]byte{"app.log": []byte("started\n"), "archive/2026-11.log": []byte("rotated\n")}
	var taken map[string]bool // the driver's snapshots the backup took

	// A backup of a namespace with two claims: a VolumeSnapshot of each,
	// waited for, recorded in the backup (the tarball, the volume info
	// file, the status); no VolumeSnapshot is left in the namespace, the
	// contents stay with deletion policy Retain (the backup owns the
	// driver's snapshots).
	step("a backup snapshots each claim and keeps the snapshots", func(t *testing.T) {
		if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: orders}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.CSI.CreateClaim(orders, "db", "1Gi", map[string]string{"app": "db"})
		c.CSI.CreateClaim(orders, "logs", "512Mi", nil)
		c.CSI.WriteFiles(orders, "db", dbFiles)
		c.CSI.WriteFiles(orders, "logs", logFiles)
		before := snapshotIDs(c.CSI.Snapshots())

		wants("backup create --wait", velero("backup", "create", "orders-1", "--include-namespaces", orders, "--wait"),
			"Backup completed with status: Completed")
		b, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, "orders-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if b.Status.CSIVolumeSnapshotsAttempted != 2 || b.Status.CSIVolumeSnapshotsCompleted != 2 || b.Status.BackupItemOperationsCompleted != 2 {
			t.Errorf("status: CSI snapshots %d attempted, %d completed; operations %d completed; want 2, 2, 2",
				b.Status.CSIVolumeSnapshotsAttempted, b.Status.CSIVolumeSnapshotsCompleted, b.Status.BackupItemOperationsCompleted)
		}
		taken = map[string]bool{}
		for id := range snapshotIDs(c.CSI.Snapshots()) {
			if !before[id] {
				taken[id] = true
			}
		}
		if len(taken) != 2 {
			t.Fatalf("the backup left %d new snapshots in the driver, want 2", len(taken))
		}
		left, err := snaps.SnapshotV1().VolumeSnapshots(orders).List(ctx, metav1.ListOptions{})
		if err != nil || len(left.Items) != 0 {
			t.Errorf("VolumeSnapshots left in %s: %v (%v)", orders, left, err)
		}
		contents, err := snaps.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{LabelSelector: velerov1.BackupNameLabel + "=orders-1"})
		if err != nil || len(contents.Items) != 2 {
			t.Fatalf("the backup's VolumeSnapshotContents: %v (%v), want 2 kept", contents, err)
		}
		for _, content := range contents.Items {
			if content.Spec.DeletionPolicy != snapshotv1.VolumeSnapshotContentRetain || content.Labels[velerov1.BackupUIDLabel] != string(b.UID) {
				t.Errorf("content %s: policy %s, labels %v; want Retain and the backup's UID", content.Name, content.Spec.DeletionPolicy, content.Labels)
			}
		}

		out := velero("backup", "describe", "orders-1", "--details", "--colorized=false")
		wants("backup describe --details", out, "CSI Snapshots:", "orders/db:", "orders/logs:", "Snapshot Content Name:",
			"CSI Driver: "+framework.CSIDriver, "Result: succeeded",
			"snapshot.storage.k8s.io/v1/VolumeSnapshot:", "snapshot.storage.k8s.io/v1/VolumeSnapshotContent:")
		for id := range taken {
			wants("backup describe --details", out, "Storage Snapshot ID: "+id)
		}
	})

	// Volume policies (Velero's resource policies, a ConfigMap the backup
	// names): a claim skipped by capacity, both by storage class; a bad
	// policy fails the backup's validation, saying why.
	step("volume policies decide which claims are snapshotted", func(t *testing.T) {
		for _, tc := range []struct{ name, policy string }{
			{"by-capacity", "{conditions: {capacity: '0,600Mi'}, action: {type: skip}}"},
			{"by-class", "{conditions: {storageClass: [" + framework.CSIStorageClass + "]}, action: {type: skip}}"},
			{"bad", "{conditions: {capacity: '1Gi'}, action: {type: skip}}"},
		} {
			if _, err := c.Kube.CoreV1().ConfigMaps(adminNamespace).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "policy-" + tc.name},
				Data:       map[string]string{"policy.yaml": "version: v1\nvolumePolicies: [" + tc.policy + "]\n"},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			name      string
			snapshots int
		}{{"by-capacity", 1}, {"by-class", 0}} {
			velero("backup", "create", "orders-"+tc.name, "--include-namespaces", orders, "--resource-policies-configmap", "policy-"+tc.name, "--wait")
			b, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, "orders-"+tc.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if b.Status.Phase != velerov1.BackupPhaseCompleted || b.Status.CSIVolumeSnapshotsAttempted != tc.snapshots || b.Status.CSIVolumeSnapshotsCompleted != tc.snapshots {
				t.Errorf("backup orders-%s: %s, CSI snapshots %d attempted, %d completed; want Completed, %d",
					tc.name, b.Status.Phase, b.Status.CSIVolumeSnapshotsAttempted, b.Status.CSIVolumeSnapshotsCompleted, tc.snapshots)
			}
			velero("backup", "delete", "orders-"+tc.name, "--confirm")
		}
		velero("backup", "create", "orders-bad-policy", "--include-namespaces", orders, "--resource-policies-configmap", "policy-bad")
		poll(t, "backup orders-bad-policy FailedValidation", time.Minute, func(ctx context.Context) (bool, error) {
			b, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, "orders-bad-policy", metav1.GetOptions{})
			return err == nil && b.Status.Phase == velerov1.BackupPhaseFailedValidation, nil
		})
		wants("backup describe", velero("backup", "describe", "orders-bad-policy", "--colorized=false"),
			"fail to read the ResourcePolicies from ConfigMap "+adminNamespace+"/policy-bad", "wrong format of Capacity 1Gi")
	})

	// What a restore brings back is the backup's moment: a file written
	// after it is not there.
	step("a file written after the backup", func(t *testing.T) {
		c.CSI.WriteFiles(orders, "db", map[string][]byte{"later.txt": []byte("after the backup")})
	})

	// The namespace lost, and restored: each claim provisioned anew from
	// its snapshot, with the snapshot's files.
	step("a restore brings the claims back from their snapshots", func(t *testing.T) {
		if err := c.Kube.CoreV1().Namespaces().Delete(ctx, orders, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "namespace "+orders+" gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
			_, err := c.Kube.CoreV1().Namespaces().Get(ctx, orders, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		wants("restore create --wait", velero("restore", "create", "orders-1-back", "--from-backup", "orders-1", "--wait"),
			"Restore completed with status: Completed")
		for claim, want := range map[string]map[string][]byte{"db": dbFiles, "logs": logFiles} {
			pvc := c.CSI.WaitBound(orders, claim)
			if pvc.Spec.DataSource == nil || pvc.Spec.DataSource.Kind != "VolumeSnapshot" {
				t.Errorf("claim %s: data source %v, want its VolumeSnapshot", claim, pvc.Spec.DataSource)
			}
			if diff := framework.DiffFiles(want, c.CSI.ReadFiles(orders, claim)); diff != "" {
				t.Errorf("claim %s restored: %s", claim, diff)
			}
		}
	})

	// Beside the namespace, under another name: the same snapshots again.
	step("a restore under namespaceMapping", func(t *testing.T) {
		wants("restore create --wait", velero("restore", "create", "orders-1-copy", "--from-backup", "orders-1",
			"--namespace-mappings", orders+":orders-copy", "--wait"), "Restore completed with status: Completed")
		c.CSI.WaitBound("orders-copy", "db")
		if diff := framework.DiffFiles(dbFiles, c.CSI.ReadFiles("orders-copy", "db")); diff != "" {
			t.Errorf("claim db restored into orders-copy: %s", diff)
		}
	})

	// The driver down: snapshots cannot be cut. One backup waits out its
	// csiSnapshotTimeout and ends PartiallyFailed, saying why; another is
	// cancelled while it waits. Once the driver is back, neither left a
	// VolumeSnapshot or a snapshot behind.
	step("the CSI driver stops; two backups wait for their snapshots", func(t *testing.T) {
		c.CSI.StopDriver(false)
		velero("backup", "create", "orders-stuck", "--include-namespaces", orders, "--csi-snapshot-timeout", "15s")
		velero("backup", "create", "orders-cancelled", "--include-namespaces", orders)
		for _, name := range []string{"orders-stuck", "orders-cancelled"} {
			poll(t, "backup "+name+" waiting for its snapshots", 2*time.Minute, func(ctx context.Context) (bool, error) {
				b, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, name, metav1.GetOptions{})
				return err == nil && b.Status.Phase == velerov1.BackupPhaseWaitingForPluginOperations, nil
			})
		}
	})
	ended := func(t *testing.T, name string) *velerov1.Backup {
		t.Helper()
		var b *velerov1.Backup
		poll(t, "backup "+name+" ended", 3*time.Minute, func(ctx context.Context) (bool, error) {
			var err error
			b, err = c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, name, metav1.GetOptions{})
			return err == nil && b.Status.Phase.Terminal(), nil
		})
		return b
	}
	step("a snapshot never ready: PartiallyFailed after csiSnapshotTimeout", func(t *testing.T) {
		b := ended(t, "orders-stuck")
		if b.Status.Phase != velerov1.BackupPhasePartiallyFailed || b.Status.CSIVolumeSnapshotsAttempted != 2 || b.Status.CSIVolumeSnapshotsCompleted != 0 ||
			b.Status.BackupItemOperationsFailed != 2 {
			t.Errorf("phase %s, CSI snapshots %d attempted, %d completed, operations %d failed; want PartiallyFailed, 2, 0, 2",
				b.Status.Phase, b.Status.CSIVolumeSnapshotsAttempted, b.Status.CSIVolumeSnapshotsCompleted, b.Status.BackupItemOperationsFailed)
		}
		wants("backup logs", velero("backup", "logs", "orders-stuck"), "was not ready to use within csiSnapshotTimeout 15s")
	})
	step("a backup cancelled while it waits for its snapshots", func(t *testing.T) {
		if _, err := c.Backstop.VeleroV1().Backups(adminNamespace).Patch(ctx, "orders-cancelled", types.MergePatchType,
			[]byte(`{"spec":{"cancel":true}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		b := ended(t, "orders-cancelled")
		if b.Status.Phase != velerov1.BackupPhaseFailed || b.Status.FailureReason != velerov1.BackupCancelledReason {
			t.Errorf("phase %s (%q), want Failed (%q)", b.Status.Phase, b.Status.FailureReason, velerov1.BackupCancelledReason)
		}
		wants("backup logs", velero("backup", "logs", "orders-cancelled"), "Waiting for async operations")
	})
	// The server killed while a backup waits for its snapshots (the driver
	// down): the next start resumes the wait, whose snapshots are never
	// ready, so the backup ends PartiallyFailed after csiSnapshotTimeout and
	// discards them.
	step("the server killed while a backup waits for its snapshots", func(t *testing.T) {
		velero("backup", "create", "orders-killed", "--include-namespaces", orders, "--csi-snapshot-timeout", "15s")
		poll(t, "backup orders-killed waiting for its snapshots", 2*time.Minute, func(ctx context.Context) (bool, error) {
			b, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, "orders-killed", metav1.GetOptions{})
			return err == nil && b.Status.Phase == velerov1.BackupPhaseWaitingForPluginOperations, nil
		})
		c.StopBackstop(true)
		c.StartBackstop()
		b := ended(t, "orders-killed")
		if b.Status.Phase != velerov1.BackupPhasePartiallyFailed || b.Status.BackupItemOperationsFailed != 2 {
			t.Errorf("phase %s (%q), %d operations failed; want PartiallyFailed, both failed", b.Status.Phase, b.Status.FailureReason, b.Status.BackupItemOperationsFailed)
		}
		wants("backup logs", velero("backup", "logs", "orders-killed"), "Backup resumed after a restart of the server", "was not ready to use within csiSnapshotTimeout")
	})
	// Once the driver is back, none of their VolumeSnapshots is left and
	// each of their contents is deleted or being deleted with deletion
	// policy Delete: what the server asks for. Whether the driver's
	// snapshot of a content deleted while the driver was down goes too is
	// csi-snapshotter's part, and external-snapshotter v8.7.0 can keep one
	// when the deletion races the cut it starts when it comes back: not
	// asserted here (the deletion step below checks the driver).
	step("the driver back: nothing of those backups is left", func(t *testing.T) {
		c.CSI.StartDriver()
		var left []string
		err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			var now []string
			defer func() { left = now }()
			for _, name := range []string{"orders-stuck", "orders-cancelled", "orders-killed"} {
				list, err := snaps.SnapshotV1().VolumeSnapshots(orders).List(ctx, metav1.ListOptions{LabelSelector: velerov1.BackupNameLabel + "=" + name})
				if err != nil {
					now = left
					return false, nil
				}
				for _, vs := range list.Items {
					now = append(now, fmt.Sprintf("VolumeSnapshot %s of %s (deleted %v)", vs.Name, name, vs.DeletionTimestamp != nil))
				}
			}
			contents, err := snaps.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
			if err != nil {
				now = left
				return false, nil
			}
			for _, vsc := range contents.Items {
				ref := vsc.Spec.VolumeSnapshotRef
				if ref.Namespace != orders || vsc.Spec.Source.VolumeHandle == nil || vsc.Labels[velerov1.BackupUIDLabel] != "" {
					continue // not a snapshot cut in orders, or one a backup keeps
				}
				if _, err := snaps.SnapshotV1().VolumeSnapshots(orders).Get(ctx, ref.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					continue // a VolumeSnapshot that is not gone is listed above
				}
				if vsc.DeletionTimestamp == nil || vsc.Spec.DeletionPolicy != snapshotv1.VolumeSnapshotContentDelete {
					now = append(now, fmt.Sprintf("content %s of a discarded VolumeSnapshot (policy %s, deleted %v)", vsc.Name, vsc.Spec.DeletionPolicy, vsc.DeletionTimestamp != nil))
				}
			}
			return len(now) == 0, nil
		})
		if err != nil {
			t.Fatalf("what those backups made, left: %v (%v)", left, err)
		}
	})

	// Deleting the backup deletes its snapshots in the driver.
	step("deleting the backup deletes its snapshots", func(t *testing.T) {
		wants("backup delete", velero("backup", "delete", "orders-1", "--confirm"), `Request to delete backup "orders-1" submitted successfully`)
		poll(t, "the backup and its snapshots gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
			if _, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, "orders-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
			left := snapshotIDs(c.CSI.Snapshots())
			for id := range taken {
				if left[id] {
					return false, nil
				}
			}
			return true, nil
		})
	})
}

// snapshotIDs are the IDs of the driver's snapshots.
func snapshotIDs(list []*csi.Snapshot) map[string]bool {
	ids := map[string]bool{}
	for _, s := range list {
		ids[s.GetSnapshotId()] = true
	}
	return ids
}

// hasSnapshot reports whether the driver's list has the snapshot.
func hasSnapshot(list []*csi.Snapshot, handle string) bool {
	for _, s := range list {
		if s.GetSnapshotId() == handle {
			return true
		}
	}
	return false
}
