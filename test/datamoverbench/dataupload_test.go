//go:build bench

package datamoverbench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/datamover/kopiarepo"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// BenchmarkDataUploadVersusKopiaCLI runs the whole data mover: a claim of
// the harness's CSI stack holding the data set, backed up with
// snapshotMoveData (its DataUpload makes a claim of the snapshot,
// publishes it, uploads it into an S3 location, writes its status), again
// after 1% of it changed, then restored into a new claim (a DataDownload);
// against the kopia CLI run on the same claim's files, published, into a
// bucket of its own on the same S3 server. Timed for Backstop: a
// DataUpload's and a DataDownload's InProgress to Completed (the moving of
// bytes; the storage snapshot and the claim made of it before, which the
// CLI does not do, are reported beside). Memory: the server's peak RSS in
// each step (the whole server: API, storage and every engine) and the
// CLI's.
func BenchmarkDataUploadVersusKopiaCLI(b *testing.B) {
	const ns, claim, location, prefix = "bench", "data", "bench", "velero"
	c := framework.StartClusterWith(b, framework.ClusterOptions{CSI: true})
	srv := framework.StartS3(b)
	srv.MakeBucket(b, "backstop")
	srv.MakeBucket(b, "kopia")
	ctx := context.Background()
	admin := framework.BackstopNamespace

	creds := fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", srv.AccessKey, srv.SecretKey)
	if _, err := c.Kube.CoreV1().Secrets(admin).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bench-creds"},
		Data: map[string][]byte{"cloud": []byte(creds)}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := c.Backstop.VeleroV1().BackupStorageLocations(admin).Create(ctx, &velerov1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Name: location},
		Spec: velerov1.BackupStorageLocationSpec{Provider: "aws",
			Config:      map[string]string{"s3Url": srv.Endpoint, "region": "us-east-1", "s3ForcePathStyle": "true"},
			Credential:  &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "bench-creds"}, Key: "cloud"},
			StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: "backstop", Prefix: prefix}}},
	}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	until(b, "location "+location+" Available", 2*time.Minute, func(ctx context.Context) (bool, error) {
		l, err := c.Backstop.VeleroV1().BackupStorageLocations(admin).Get(ctx, location, metav1.GetOptions{})
		return err == nil && l.Status.Phase == velerov1.BackupStorageLocationPhaseAvailable, nil
	})
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	c.CSI.CreateClaim(ns, claim, "4Gi", nil)
	var total float64
	c.CSI.WithVolume(ns, claim, false, func(dir string) {
		writeDataSet(b, dir)
		total = float64(framework.DirBytes(b, dir))
	})

	// The kopia CLI on the published claim, its source named alike at
	// every run (the publish directory is new each time).
	kopia := kopiaCLI(b, srv, kopiarepo.Prefix(prefix, ns))
	kopiaSnapshot := func() (r run, id string) {
		c.CSI.WithVolume(ns, claim, true, func(dir string) {
			r = kopia("snapshot", "create", dir, "--override-source=/bench/data", "--json")
		})
		return r, snapshotID(b, r)
	}
	bucket := func(name string) int64 { return framework.DirBytes(b, filepath.Join(srv.Root, name)) }
	// The server's memory: its peak RSS reset before each step.
	pid := c.BackstopPID()
	peakMiB := func() float64 { return float64(framework.ProcStatus(b, pid, "VmHWM")) / 1024 }

	backup := func(name string) moved {
		framework.ResetPeakRSS(b, pid)
		w, err := c.Backstop.VeleroV2alpha1().DataUploads(admin).Watch(ctx, metav1.ListOptions{LabelSelector: velerov1.BackupNameLabel + "=" + name})
		if err != nil {
			b.Fatal(err)
		}
		defer w.Stop()
		created := time.Now()
		if _, err := c.Backstop.VeleroV1().Backups(admin).Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: velerov1.BackupSpec{IncludedNamespaces: []string{ns}, StorageLocation: location, SnapshotMoveData: boolPtr(true)}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		m := follow(b, w, created, func(o any) (string, string) {
			du := o.(*velerov2alpha1.DataUpload)
			return string(du.Status.Phase), du.Status.SnapshotID + " " + du.Status.Message
		}, string(velerov2alpha1.DataUploadPhaseInProgress), string(velerov2alpha1.DataUploadPhaseCompleted), string(velerov2alpha1.DataUploadPhaseFailed))
		m.peakMiB = peakMiB()
		// The backup completes after its DataUpload (its operations
		// polled, its tarball rewritten).
		until(b, "backup "+name+" Completed", 5*time.Minute, func(ctx context.Context) (bool, error) {
			bk, err := c.Backstop.VeleroV1().Backups(admin).Get(ctx, name, metav1.GetOptions{})
			if err == nil && bk.Status.Phase != velerov1.BackupPhaseCompleted && bk.Status.Phase.Terminal() {
				return false, fmt.Errorf("backup %s ended %s", name, bk.Status.Phase)
			}
			return err == nil && bk.Status.Phase == velerov1.BackupPhaseCompleted, nil
		})
		return m
	}

	type row struct {
		what              string
		backstop          moved
		kopiaCL           run
		backstopBytes     int64
		kopiaBytes        int64
		size              float64
		backstopSnapshots string
	}
	var rows []row
	idle := float64(framework.ProcStatus(b, pid, "VmRSS")) / 1024

	b0, k0 := bucket("backstop"), bucket("kopia")
	first := backup("first")
	firstKopia, _ := kopiaSnapshot()
	rows = append(rows, row{what: "first upload (1 GiB)", backstop: first, kopiaCL: firstKopia,
		backstopBytes: bucket("backstop") - b0, kopiaBytes: bucket("kopia") - k0, size: total})

	var changed int64
	c.CSI.WithVolume(ns, claim, false, func(dir string) { changed = changeOnePercent(b, dir) })
	b1, k1 := bucket("backstop"), bucket("kopia")
	second := backup("second")
	secondKopia, kopiaID := kopiaSnapshot()
	rows = append(rows, row{what: fmt.Sprintf("after a 1%% change (%.1f MiB)", float64(changed)/(1<<20)), backstop: second, kopiaCL: secondKopia,
		backstopBytes: bucket("backstop") - b1, kopiaBytes: bucket("kopia") - k1, size: float64(changed)})

	// The restore: a DataDownload into a new claim, and the CLI into an
	// empty directory.
	framework.ResetPeakRSS(b, pid)
	w, err := c.Backstop.VeleroV2alpha1().DataDownloads(admin).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	created := time.Now()
	if _, err := c.Backstop.VeleroV1().Restores(admin).Create(ctx, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "restore"},
		Spec: velerov1.RestoreSpec{BackupName: "second", NamespaceMapping: map[string]string{ns: ns + "-restored"}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	restored := follow(b, w, created, func(o any) (string, string) {
		dd := o.(*velerov2alpha1.DataDownload)
		return string(dd.Status.Phase), dd.Status.Message
	}, string(velerov2alpha1.DataDownloadPhaseInProgress), string(velerov2alpha1.DataDownloadPhaseCompleted), string(velerov2alpha1.DataDownloadPhaseFailed))
	w.Stop()
	restored.peakMiB = peakMiB()
	restoreK := kopia("snapshot", "restore", kopiaID, filepath.Join(b.TempDir(), "restored"))
	rows = append(rows, row{what: "restore (1 GiB)", backstop: restored, kopiaCL: restoreK, size: total})

	var report strings.Builder
	fmt.Fprintf(&report, "\nthe server's RSS when idle before the first upload: %.0f MiB\n", idle)
	fmt.Fprintf(&report, "\n| %s | Backstop (DataUpload, DataDownload) | kopia CLI | Backstop / kopia |\n|---|---|---|---|\n", "step")
	for _, r := range rows {
		fmt.Fprintf(&report, "| %s: seconds moving data (InProgress to Completed) | %.1f | %.1f | %.2fx the time |\n", r.what, r.backstop.moving.Seconds(), r.kopiaCL.seconds,
			r.backstop.moving.Seconds()/r.kopiaCL.seconds)
		fmt.Fprintf(&report, "| %s: MB/s of data | %.0f | %.0f | %.2fx the throughput |\n", r.what, r.size/1e6/r.backstop.moving.Seconds(), r.size/1e6/r.kopiaCL.seconds,
			r.kopiaCL.seconds/r.backstop.moving.Seconds())
		fmt.Fprintf(&report, "| %s: seconds before, making and publishing the claim | %.1f | | |\n", r.what, r.backstop.before.Seconds())
		if r.backstopBytes != 0 || r.kopiaBytes != 0 {
			fmt.Fprintf(&report, "| %s: MiB written to the bucket | %.1f | %.1f | %.2fx the data |\n", r.what, float64(r.backstopBytes)/(1<<20), float64(r.kopiaBytes)/(1<<20),
				float64(r.backstopBytes)/r.size)
		}
		fmt.Fprintf(&report, "| %s: peak RSS, MiB | %.0f (the server) | %.0f | |\n", r.what, r.backstop.peakMiB, r.kopiaCL.peakMiB)
	}
	fmt.Print(report.String())
	b.ReportMetric(rows[0].kopiaCL.seconds/rows[0].backstop.moving.Seconds(), "first-upload-throughput-vs-kopia")
	b.ReportMetric(float64(rows[1].backstopBytes)/rows[1].size, "written-per-changed-byte")
	b.ReportMetric(rows[2].kopiaCL.seconds/rows[2].backstop.moving.Seconds(), "restore-throughput-vs-kopia")
}

// moved is a DataUpload's or a DataDownload's run as its watch saw it.
type moved struct {
	// before is from the backup's (the restore's) creation to InProgress;
	// moving from InProgress to Completed.
	before, moving time.Duration
	peakMiB        float64
}

// follow reads w until the object reaches done, timing inProgress and
// done; failed ends the benchmark.
func follow(b *testing.B, w watch.Interface, created time.Time, phase func(any) (string, string), inProgress, done, failed string) moved {
	b.Helper()
	deadline := time.After(10 * time.Minute)
	var started time.Time
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatal("the watch ended")
			}
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			p, detail := phase(ev.Object)
			now := time.Now()
			switch p {
			case inProgress:
				if started.IsZero() {
					started = now
				}
			case done:
				if started.IsZero() {
					b.Fatalf("%s without %s seen", done, inProgress)
				}
				return moved{before: started.Sub(created), moving: now.Sub(started)}
			case failed:
				b.Fatalf("%s: %s", failed, detail)
			}
		case <-deadline:
			b.Fatalf("not %s in 10 minutes", done)
		}
	}
}

// until polls cond each second until it holds, for at most timeout.
func until(b *testing.B, what string, timeout time.Duration, cond func(context.Context) (bool, error)) {
	b.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, cond); err != nil {
		b.Fatalf("%s: %v", what, err)
	}
}

func boolPtr(v bool) *bool { return &v }
