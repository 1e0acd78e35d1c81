//go:build bench

package clusterbench

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapshotclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

var claims = flag.Int("clusterbench.claims", 100, "claims of the snapshot benchmark")

// BenchmarkVolumeSnapshots: a backup of a namespace of N claims on the
// CSI stack of the harness (the hostpath driver, snapshot-controller,
// csi-snapshotter), from its creation to every snapshot it takes
// ReadyToUse, against the limit: a bare client creating the same N
// VolumeSnapshots at once and waiting for them. Both are timed by one
// watcher of the snapshots' VolumeSnapshotContents (ready-s); the backup's
// time to Completed is reported beside (completed-s: its operations
// polled at --item-operation-sync-frequency, then the tarball rewritten).
func BenchmarkVolumeSnapshots(b *testing.B) {
	c := framework.StartClusterWith(b, framework.ClusterOptions{CSI: true})
	c.StopBackstop(false)
	c.BackstopArgs = append(c.BackstopArgs, "--item-operation-sync-frequency=1s")
	c.StartBackstop()
	snaps, err := snapshotclient.NewForConfig(c.Admin)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	const ns = "volumes"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	names := make([]string, *claims)
	for i := range names {
		names[i] = fmt.Sprintf("claim-%03d", i)
		c.CSI.CreateClaim(ns, names[i], "16Mi", nil)
	}
	for _, name := range names {
		c.CSI.WaitBound(ns, name)
	}

	// ready waits until the snapshots of want VolumeSnapshots of the
	// namespace whose names start with prefix have been seen ReadyToUse:
	// their VolumeSnapshotContents', set from the driver's answer, what a
	// backup waits for (a backup's VolumeSnapshots go soon after; their
	// contents stay).
	ready := func(b *testing.B, prefix string, want int) {
		b.Helper()
		seen := map[string]bool{}
		var last error
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
			list, err := snaps.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
			if last = err; err != nil {
				return false, nil
			}
			for _, vsc := range list.Items {
				ref := vsc.Spec.VolumeSnapshotRef
				if ref.Namespace == ns && strings.HasPrefix(ref.Name, prefix) && vsc.Status != nil && vsc.Status.ReadyToUse != nil && *vsc.Status.ReadyToUse {
					seen[ref.Name] = true
				}
			}
			return len(seen) >= want, nil
		}); err != nil {
			b.Fatalf("the snapshots of %d VolumeSnapshots %s* ReadyToUse: %d seen (%v, last list: %v)", want, prefix, len(seen), err, last)
		}
	}

	b.Run("impl=reference-create-and-wait", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			label := fmt.Sprintf("ref-%d", i)
			start := time.Now()
			var wg sync.WaitGroup
			errs := make(chan error, len(names))
			for _, claim := range names {
				wg.Add(1)
				go func() {
					defer wg.Done()
					class, source := framework.CSISnapshotClass, claim
					_, err := snaps.SnapshotV1().VolumeSnapshots(ns).Create(ctx, &snapshotv1.VolumeSnapshot{
						ObjectMeta: metav1.ObjectMeta{Name: label + "-" + claim, Labels: map[string]string{"run": label}},
						Spec:       snapshotv1.VolumeSnapshotSpec{VolumeSnapshotClassName: &class, Source: snapshotv1.VolumeSnapshotSource{PersistentVolumeClaimName: &source}},
					}, metav1.CreateOptions{})
					if err != nil {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			ready(b, label+"-", len(names))
			b.ReportMetric(time.Since(start).Seconds(), "ready-s")
			// Gone before what runs next, which the snapshot controllers
			// would otherwise serve beside these deletions.
			b.StopTimer()
			if err := snaps.SnapshotV1().VolumeSnapshots(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "run=" + label}); err != nil {
				b.Fatal(err)
			}
			if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
				list, err := snaps.SnapshotV1().VolumeSnapshots(ns).List(ctx, metav1.ListOptions{LabelSelector: "run=" + label})
				return err == nil && len(list.Items) == 0, nil
			}); err != nil {
				b.Fatalf("the reference's VolumeSnapshots gone: %v", err)
			}
			b.StartTimer()
		}
	})

	b.Run("impl=backstop", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			name := fmt.Sprintf("volumes-%d", i)
			start := time.Now()
			if _, err := c.Backstop.VeleroV1().Backups(adminNamespace).Create(ctx, &velerov1.Backup{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       velerov1.BackupSpec{IncludedNamespaces: []string{ns}},
			}, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			ready(b, "velero-", len(names))
			b.ReportMetric(time.Since(start).Seconds(), "ready-s")
			done := waitBackup(b, c, name, start)
			if done.Status.Phase != velerov1.BackupPhaseCompleted || done.Status.CSIVolumeSnapshotsCompleted != len(names) {
				b.Fatalf("backup %s: %s, %d CSI snapshots completed, want %d", name, done.Status.Phase, done.Status.CSIVolumeSnapshotsCompleted, len(names))
			}
			b.ReportMetric(time.Since(start).Seconds(), "completed-s")
		}
	})
}
