package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/datamover/kopiarepo"
	"github.com/backstop-io/backstop/pkg/engine/backuprepo"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestDataMoverDisasterRecovery moves a claim's data into an S3 bucket
// from one cluster and restores it in another (its own control plane and
// CSI stack, the same bucket): the second cluster's backup sync finds the
// backup, and its data mover writes the claim back from the kopia
// repository. The repository is one the kopia CLI reads. A wrong
// repository password fails the restore with the reason, and nothing in
// the bucket changes; the right one restores the files byte for byte.
func TestDataMoverDisasterRecovery(t *testing.T) {
	t.Parallel()
	const ns, location, bucket, prefix = "orders", "dr", "disaster", "velero"
	a, snapsA := csiCluster(t)
	srv := framework.StartS3(t)
	srv.MakeBucket(t, bucket)
	ctx := context.Background()
	step := inOrder(t)
	files := map[string][]byte{"README.txt": []byte("the orders\n"), "data/orders.json": []byte(`{"orders":[1,2,3]}`)}
	for i := range 50 {
		files[fmt.Sprintf("data/items/%02d.json", i)] = fmt.Appendf(nil, `{"item":%d}`, i)
	}
	// useBucket gives a cluster the location of the bucket.
	useBucket := func(t *testing.T, c *framework.Cluster) {
		t.Helper()
		creds := fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", srv.AccessKey, srv.SecretKey)
		if _, err := c.Kube.CoreV1().Secrets(adminNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dr-creds"},
			Data: map[string][]byte{"cloud": []byte(creds)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Create(ctx, &velerov1.BackupStorageLocation{
			ObjectMeta: metav1.ObjectMeta{Name: location},
			Spec: velerov1.BackupStorageLocationSpec{Provider: "aws",
				Config:           map[string]string{"s3Url": srv.Endpoint, "region": "us-east-1", "s3ForcePathStyle": "true"},
				Credential:       &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "dr-creds"}, Key: "cloud"},
				StorageType:      velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: bucket, Prefix: prefix}},
				BackupSyncPeriod: &metav1.Duration{Duration: 2 * time.Second}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var l *velerov1.BackupStorageLocation
		if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			l, err = c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Get(ctx, location, metav1.GetOptions{})
			return err == nil && l.Status.Phase == velerov1.BackupStorageLocationPhaseAvailable, nil
		}); err != nil {
			t.Fatalf("location %s not Available: %+v", location, l.Status)
		}
	}

	veleroA, wantsA := veleroCLI(t, a)
	var du *velerov2alpha1.DataUpload
	step("the first cluster moves the claim's data into the bucket", func(t *testing.T) {
		useBucket(t, a)
		if _, err := a.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		a.CSI.CreateClaim(ns, "db", "64Mi", map[string]string{"app": "orders"})
		a.CSI.WriteFiles(ns, "db", files)
		wantsA("backup create", veleroA("backup", "create", "dr-1", "--include-namespaces", ns, "--storage-location", location, "--snapshot-move-data", "--wait"),
			"Backup completed with status: Completed")
		list, err := a.Backstop.VeleroV2alpha1().DataUploads(adminNamespace).List(ctx, metav1.ListOptions{LabelSelector: velerov1.BackupNameLabel + "=dr-1"})
		if err != nil || len(list.Items) != 1 || list.Items[0].Status.Phase != velerov2alpha1.DataUploadPhaseCompleted {
			t.Fatalf("the backup's DataUploads: %v (%v), want one Completed", list, err)
		}
		du = &list.Items[0]
	})

	// The kopia CLI built from the same module, as a Velero user would
	// reach the repository: connected at <prefix>/kopia/<namespace>/ of
	// the bucket with the password, as default@default.
	step("the kopia CLI lists the claim's snapshot in the bucket", func(t *testing.T) {
		endpoint, err := url.Parse(srv.Endpoint)
		if err != nil {
			t.Fatal(err)
		}
		config := filepath.Join(t.TempDir(), "kopia.config")
		kopia := func(args ...string) string {
			t.Helper()
			cmd := exec.CommandContext(ctx, framework.Binary(t, "kopia"), append(args, "--config-file="+config)...)
			cmd.Env = append(os.Environ(), "KOPIA_CHECK_FOR_UPDATES=false", "KOPIA_PASSWORD="+repositoryPassword(t, a, ns, location), "HOME="+t.TempDir())
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("kopia %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return string(out)
		}
		kopia("repository", "connect", "s3", "--bucket="+bucket, "--prefix="+kopiarepo.Prefix(prefix, ns), "--endpoint="+endpoint.Host, "--disable-tls",
			"--access-key="+srv.AccessKey, "--secret-access-key="+srv.SecretKey, "--region=us-east-1",
			"--override-username=default", "--override-hostname=default", "--cache-directory="+t.TempDir())
		var listed []struct {
			ID     string            `json:"id"`
			Tags   map[string]string `json:"tags"`
			Source struct{ Host, UserName, Path string }
		}
		if err := json.Unmarshal([]byte(kopia("snapshot", "list", "--all", "--json")), &listed); err != nil {
			t.Fatal(err)
		}
		if len(listed) != 1 || listed[0].ID != du.Status.SnapshotID || listed[0].Source.Path != kopiarepo.SourcePath(ns, "db") ||
			listed[0].Tags[velerov1.AsyncOperationIDLabel] != du.Labels[velerov1.AsyncOperationIDLabel] {
			t.Errorf("kopia lists %+v, want the DataUpload's snapshot %s of %s with its operation ID", listed, du.Status.SnapshotID, kopiarepo.SourcePath(ns, "db"))
		}
	})

	b, _ := csiCluster(t)
	veleroB, wantsB := veleroCLI(t, b)
	passwordSecret := backuprepo.PasswordSecretName(backuprepo.Name(ns, location))
	step("the second cluster's backup sync finds the backup", func(t *testing.T) {
		// A wrong repository password there, to begin with.
		if _, err := b.Kube.CoreV1().Secrets(adminNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: passwordSecret},
			Data: map[string][]byte{backuprepo.PasswordKey: []byte("not-the-password")}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		useBucket(t, b)
		poll(t, "backup dr-1 synced", 2*time.Minute, func(ctx context.Context) (bool, error) {
			got, err := b.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, "dr-1", metav1.GetOptions{})
			return err == nil && got.Status.Phase == velerov1.BackupPhaseCompleted, nil
		})
	})
	step("a wrong repository password fails the restore with the reason", func(t *testing.T) {
		before := framework.FileSizes(t, srv.Root)
		t.Cleanup(func() {
			if t.Failed() {
				serverLog(t, b, "DataDownload", "dataDownload", "BackupRepository", "epository")
			}
		})
		out := veleroB("restore", "create", "dr-wrong", "--from-backup", "dr-1", "--wait")
		wantsB("restore create", out, "Restore completed with status: PartiallyFailed")
		// The link is Backstop's, through kube-apiserver: the velero CLI
		// trusts it by an S3 location's caCert, which this one (plain
		// http) has none of.
		logs := veleroB("restore", "logs", "dr-wrong", "--insecure-skip-tls-verify")
		if !strings.Contains(logs, "does not open it") {
			t.Errorf("the restore's log lacks the password's failure:\n%s", logs)
		}
		repo, err := b.Backstop.VeleroV1().BackupRepositories(adminNamespace).Get(ctx, backuprepo.Name(ns, location), metav1.GetOptions{})
		if err != nil || repo.Status.Phase != velerov1.BackupRepositoryPhaseNotReady || !strings.Contains(repo.Status.Message, passwordSecret) {
			t.Errorf("BackupRepository: %+v (%v), want NotReady naming the password's Secret", repo, err)
		}
		after := framework.FileSizes(t, srv.Root)
		for name, size := range before {
			if strings.Contains(name, "/kopia/") && after[name] != size {
				t.Errorf("the repository's %s changed (%d bytes, then %d)", name, size, after[name])
			}
		}
		if err := b.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "namespace "+ns+" gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
			_, err := b.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return err != nil, nil
		})
	})
	// The first cluster's password, copied as an admin keeps it for a
	// disaster: the repository's Secret.
	step("with the password, the second cluster restores the claim byte for byte", func(t *testing.T) {
		secret, err := b.Kube.CoreV1().Secrets(adminNamespace).Get(ctx, passwordSecret, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		secret.Data[backuprepo.PasswordKey] = []byte(repositoryPassword(t, a, ns, location))
		if _, err := b.Kube.CoreV1().Secrets(adminNamespace).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		wantsB("restore create", veleroB("restore", "create", "dr-restore", "--from-backup", "dr-1", "--wait"),
			"Restore completed with status: Completed")
		b.CSI.WaitBound(ns, "db")
		if diff := framework.DiffFiles(files, b.CSI.ReadFiles(ns, "db")); diff != "" {
			t.Errorf("the claim restored in the second cluster: %s", diff)
		}
	})

	// The bucket deleted while the first cluster's next upload runs
	// (slowed to 1 MiB/s: 48 s for its 48 MiB, so that a busy machine still
	// sees it running well before its end): the upload fails with the
	// storage's reason, the backup does not complete, and the cluster keeps
	// nothing of the upload.
	step("the bucket disappears mid-upload: the upload fails with the reason", func(t *testing.T) {
		a.StopBackstop(false)
		// The storage checked every 2 s rather than 20: the upload ends sooner.
		a.BackstopArgs = append(a.BackstopArgs, "--data-mover-upload-bytes-per-second=1048576", "--data-mover-storage-check-interval=2s")
		a.StartBackstop()
		a.CSI.WriteFiles(ns, "db", map[string][]byte{"data/more.bin": framework.RandomBytes(t, 48<<20)})
		veleroA("backup", "create", "dr-2", "--include-namespaces", ns, "--storage-location", location, "--snapshot-move-data")
		var du *velerov2alpha1.DataUpload
		poll(t, "the upload of dr-2 InProgress, reading the claim", 2*time.Minute, func(ctx context.Context) (bool, error) {
			list, err := a.Backstop.VeleroV2alpha1().DataUploads(adminNamespace).List(ctx, metav1.ListOptions{LabelSelector: velerov1.BackupNameLabel + "=dr-2"})
			if err != nil || len(list.Items) != 1 {
				return false, err
			}
			du = &list.Items[0]
			return du.Status.Phase == velerov2alpha1.DataUploadPhaseInProgress && du.Status.Progress.BytesDone > 0, nil
		})
		srv.RemoveBucket(t, bucket)
		poll(t, "the upload of dr-2 ended", 3*time.Minute, func(ctx context.Context) (bool, error) {
			got, err := a.Backstop.VeleroV2alpha1().DataUploads(adminNamespace).Get(ctx, du.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			du = got
			return du.Status.Phase.Terminal(), nil
		})
		t.Logf("DataUpload %s: %s: %s", du.Name, du.Status.Phase, du.Status.Message)
		if du.Status.Phase != velerov2alpha1.DataUploadPhaseFailed || du.Status.SnapshotID != "" || !bucketGone(du.Status.Message) {
			t.Errorf("DataUpload %s: %s, snapshot %q (%s); want Failed for the missing bucket, no snapshot", du.Name, du.Status.Phase, du.Status.SnapshotID, du.Status.Message)
		}
		var backup *velerov1.Backup
		poll(t, "backup dr-2 ended", 3*time.Minute, func(ctx context.Context) (bool, error) {
			var err error
			backup, err = a.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, "dr-2", metav1.GetOptions{})
			return err == nil && backup.Status.Phase.Terminal(), nil
		})
		if backup.Status.Phase == velerov1.BackupPhaseCompleted {
			t.Errorf("backup dr-2 Completed without its bucket")
		}
		poll(t, "the cluster keeping nothing of the upload", time.Minute, func(ctx context.Context) (bool, error) {
			_, claimErr := a.Kube.CoreV1().PersistentVolumeClaims(adminNamespace).Get(ctx, du.Name, metav1.GetOptions{})
			_, snapErr := snapsA.SnapshotV1().VolumeSnapshots(adminNamespace).Get(ctx, du.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(claimErr) && apierrors.IsNotFound(snapErr), nil
		})
	})
}

// bucketGone reports whether an upload's message says its storage went:
// kopia's own retries of a write given up ("The specified bucket does not
// exist", the S3 server's words), or the data mover's check of the storage
// (kopiarepo.StorageError), whichever ends the upload first.
func bucketGone(msg string) bool {
	return strings.Contains(msg, "The specified bucket does not exist") || strings.Contains(msg, "the storage location failed while uploading")
}
