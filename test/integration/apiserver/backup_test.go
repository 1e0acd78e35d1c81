package apiserver

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	kvbackupv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/archive"
	"github.com/backstop-io/backstop/pkg/objectstore"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// trackerResource is how VirtualMachineBackupTrackers are filed in a tarball.
const trackerResource = "virtualmachinebackuptrackers.backup.kubevirt.io"

// createTracker creates a VirtualMachineBackupTracker: an inert object of
// the standalone server, which is its own backup source.
func createTracker(t *testing.T, s *framework.Server, namespace, name string, labels map[string]string) {
	t.Helper()
	apiGroup := "kubevirt.io"
	_, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(namespace).Create(context.Background(), &kvbackupv1alpha1.VirtualMachineBackupTracker{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec: kvbackupv1alpha1.VirtualMachineBackupTrackerSpec{Source: corev1.TypedLocalObjectReference{
			APIGroup: &apiGroup, Kind: "VirtualMachine", Name: "vm-" + name}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating tracker %s/%s: %v", namespace, name, err)
	}
}

// waitBackup polls a backup until cond holds.
func waitBackup(t *testing.T, s *framework.Server, name string, what string, cond func(*velerov1.Backup) bool) *velerov1.Backup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var last *velerov1.Backup
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		b, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = b
		return cond(b), nil
	})
	if err != nil {
		t.Fatalf("backup %s never %s; last status %+v", name, what, statusOf(last))
	}
	return last
}

func statusOf(b *velerov1.Backup) any {
	if b == nil {
		return nil
	}
	return b.Status
}

func finished(b *velerov1.Backup) bool { return b.Status.Phase.Terminal() }

// tarballItems lists the items of a backup's tarball in the default
// location as "<groupResource> <namespace>/<name>" (preferred-version
// copies), checking that each also has its unversioned copy.
func tarballItems(t *testing.T, s *framework.Server, backup string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(s.DataDir, "backups", "backups", backup, backup+".tar.gz"))
	if err != nil {
		t.Fatalf("backup %s tarball: %v", backup, err)
	}
	defer f.Close()
	r, err := archive.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	unversioned := map[string]bool{}
	var out []string
	for {
		it, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading backup %s tarball: %v", backup, err)
		}
		key := it.GroupResource + " " + it.Namespace + "/" + it.Name
		if it.Version == "" {
			unversioned[key] = true
			continue
		}
		if !it.Preferred {
			t.Errorf("backup %s: non-preferred version copy %s %s", backup, it.Version, key)
		}
		var obj map[string]any
		if err := json.Unmarshal(it.Data, &obj); err != nil || obj["kind"] == nil {
			t.Errorf("backup %s: item %s is not an object with a kind: %v", backup, key, err)
		}
		out = append(out, key)
	}
	if r.FormatVersion != archive.FormatVersion {
		t.Errorf("backup %s: metadata/version %q", backup, r.FormatVersion)
	}
	for _, k := range out {
		if !unversioned[k] {
			t.Errorf("backup %s: %s has no unversioned copy", backup, k)
		}
	}
	if len(unversioned) != len(out) {
		t.Errorf("backup %s: %d unversioned items, %d preferred-version ones", backup, len(unversioned), len(out))
	}
	sort.Strings(out)
	return out
}

func readGzipFile(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b, err := io.ReadAll(gz)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(b)
}

func backupFile(s *framework.Server, backup, suffix string) string {
	return filepath.Join(s.DataDir, "backups", "backups", backup, backup+suffix)
}

func backupLogs(t *testing.T, s *framework.Server, name string) string {
	t.Helper()
	b, err := s.Clientset.VeleroV1().RESTClient().Get().Namespace(ns).Resource("backups").Name(name).SubResource("logs").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("logs of backup %s: %v", name, err)
	}
	return string(b)
}

// TestBackupRuns: backups of the server's own objects (it is its own
// source in standalone mode) take what their filters select, in Velero's
// tarball layout in the default storage location, with metadata, resource
// list, results and logs beside it.
func TestBackupRuns(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	createTracker(t, s, "shop", "t1", map[string]string{"app": "web"})
	createTracker(t, s, "shop", "t2", nil)
	createTracker(t, s, "shop", "t4", map[string]string{"app": "web", "velero.io/exclude-from-backup": "true"})
	createTracker(t, s, "other", "t3", map[string]string{"tier": "db"})
	createTracker(t, s, "sales", "t5", nil)

	tracker := func(nsName string) string { return trackerResource + " " + nsName }
	for _, c := range []struct {
		name string
		spec velerov1.BackupSpec
		want []string
	}{
		{"one-namespace", velerov1.BackupSpec{IncludedNamespaces: []string{"shop"}},
			[]string{tracker("shop/t1"), tracker("shop/t2")}},
		{"glob-namespaces", velerov1.BackupSpec{IncludedNamespaces: []string{"s*"}, ExcludedNamespaces: []string{"shop"}},
			[]string{tracker("sales/t5")}},
		{"label-selector", velerov1.BackupSpec{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			[]string{tracker("shop/t1")}},
		{"or-label-selectors", velerov1.BackupSpec{OrLabelSelectors: []*metav1.LabelSelector{
			{MatchLabels: map[string]string{"app": "web"}}, {MatchLabels: map[string]string{"tier": "db"}}}},
			[]string{tracker("other/t3"), tracker("shop/t1")}},
		{"excluded-resource", velerov1.BackupSpec{IncludedNamespaces: []string{"shop", "other"}, ExcludedResources: []string{"virtualmachinebackuptracker"}},
			nil},
		{"included-resource-by-kind", velerov1.BackupSpec{ExcludedNamespaces: []string{ns}, IncludedResources: []string{"VirtualMachineBackupTracker.backup.kubevirt.io"}},
			[]string{tracker("other/t3"), tracker("sales/t5"), tracker("shop/t1"), tracker("shop/t2")}},
		{"scoped-filters", velerov1.BackupSpec{IncludedNamespaces: []string{"other"}, IncludedNamespaceScopedResources: []string{"*"}},
			[]string{tracker("other/t3")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := s.Clientset.VeleroV1().Backups(ns).Create(ctx, &velerov1.Backup{
				ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: ns}, Spec: c.spec,
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			b := waitBackup(t, s, c.name, "finished", finished)
			if b.Status.Phase != velerov1.BackupPhaseCompleted {
				t.Fatalf("phase %s (failure %q, validation %v), want Completed", b.Status.Phase, b.Status.FailureReason, b.Status.ValidationErrors)
			}
			got := tarballItems(t, s, c.name)
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("items\n got %q\nwant %q", got, c.want)
			}
			st := b.Status
			if st.Progress == nil || st.Progress.ItemsBackedUp != len(c.want) || st.Progress.TotalItems != len(c.want) {
				t.Errorf("progress %+v, want %d of %d", st.Progress, len(c.want), len(c.want))
			}
			if st.StartTimestamp == nil || st.CompletionTimestamp == nil || st.CompletionTimestamp.Before(st.StartTimestamp) ||
				st.Expiration == nil || !st.Expiration.Equal(&metav1.Time{Time: st.StartTimestamp.Add(b.Spec.TTL.Duration)}) ||
				st.FormatVersion != archive.FormatVersion || st.Errors != 0 {
				t.Errorf("status %+v", st)
			}
			// velero-backup.json is the backup with its final status.
			var stored velerov1.Backup
			data, err := os.ReadFile(filepath.Join(s.DataDir, "backups", "backups", c.name, "velero-backup.json"))
			if err != nil || json.Unmarshal(data, &stored) != nil || stored.Status.Phase != velerov1.BackupPhaseCompleted ||
				stored.UID != b.UID || stored.Kind != "Backup" {
				t.Errorf("velero-backup.json: %v %s", err, truncate(string(data)))
			}
			var list map[string][]string
			if err := json.Unmarshal([]byte(readGzipFile(t, backupFile(s, c.name, "-resource-list.json.gz"))), &list); err != nil {
				t.Fatalf("resource list: %v", err)
			}
			var listed []string
			for kind, entries := range list {
				if kind != "backup.kubevirt.io/v1alpha1/VirtualMachineBackupTracker" {
					t.Errorf("resource list has %s", kind)
				}
				for _, e := range entries {
					listed = append(listed, tracker(e))
				}
			}
			sort.Strings(listed)
			if strings.Join(listed, ",") != strings.Join(c.want, ",") {
				t.Errorf("resource list %v, want %v", listed, c.want)
			}
			var results map[string]map[string]any
			if err := json.Unmarshal([]byte(readGzipFile(t, backupFile(s, c.name, "-results.gz"))), &results); err != nil ||
				len(results["errors"]) != 0 {
				t.Errorf("results: %v %v", results, err)
			}
			if logs := backupLogs(t, s, c.name); !strings.Contains(logs, `msg="Backup completed"`) || !strings.Contains(logs, "backup="+ns+"/"+c.name) {
				t.Errorf("logs:\n%s", logs)
			}
		})
	}

	// A backup naming a storage location that does not exist fails validation.
	if _, err := s.Clientset.VeleroV1().Backups(ns).Create(ctx, &velerov1.Backup{
		ObjectMeta: metav1.ObjectMeta{Name: "nowhere", Namespace: ns}, Spec: velerov1.BackupSpec{StorageLocation: "missing"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := waitBackup(t, s, "nowhere", "finished", finished)
	if b.Status.Phase != velerov1.BackupPhaseFailedValidation || len(b.Status.ValidationErrors) != 1 || !strings.Contains(b.Status.ValidationErrors[0], `"missing" does not exist`) {
		t.Errorf("backup to a missing location: %s %v", b.Status.Phase, b.Status.ValidationErrors)
	}
}

// slowSource throttles the backup client so that a backup of a few dozen
// items runs for seconds: one item per request, two requests a second.
var slowSource = []string{"--client-page-size=1", "--client-qps=2", "--client-burst=1"}

// TestCancelRunningBackup: a cancel stops a running backup while it
// collects items; its data is deleted but its log, and it ends Failed with
// the seed's reason after FinalizingCancelled. Deleting a running backup
// stops it and removes its data.
func TestCancelRunningBackup(t *testing.T) {
	t.Parallel()
	framework.StorageIndependent(t, "cancelling a running backup (the backup engine and the object store)")
	s := framework.Start(t, framework.Options{Args: slowSource})
	ctx := context.Background()
	const items = 40
	for i := 0; i < items; i++ {
		createTracker(t, s, "big", fmt.Sprintf("t%02d", i), nil)
	}
	w, err := s.Clientset.VeleroV1().Backups(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	createBackup(t, s, "slow", "big")
	running := waitBackup(t, s, "slow", "collecting items", func(b *velerov1.Backup) bool {
		return b.Status.Phase == velerov1.BackupPhaseInProgress && b.Status.Progress != nil && b.Status.Progress.ItemsBackedUp > 0
	})
	if err := s.Clientset.VeleroV1().RESTClient().Post().Namespace(ns).Resource("backups").Name("slow").SubResource("cancel").Do(ctx).Error(); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	b := waitBackup(t, s, "slow", "finished", finished)
	if b.Status.Phase != velerov1.BackupPhaseFailed || b.Status.FailureReason != "Backup cancelled by user" || b.Status.CompletionTimestamp == nil {
		t.Errorf("cancelled backup: phase %s reason %q", b.Status.Phase, b.Status.FailureReason)
	}
	if b.Status.Progress == nil || b.Status.Progress.ItemsBackedUp >= items {
		t.Errorf("cancelled backup went on to the end: progress %+v (was %+v at the cancel)", b.Status.Progress, running.Status.Progress)
	}
	var phases []velerov1.BackupPhase
	for done := false; !done; {
		select {
		case ev := <-w.ResultChan():
			if bk, ok := ev.Object.(*velerov1.Backup); ok && ev.Type == watch.Modified && bk.Name == "slow" {
				if len(phases) == 0 || phases[len(phases)-1] != bk.Status.Phase {
					phases = append(phases, bk.Status.Phase)
				}
				done = bk.Status.Phase == velerov1.BackupPhaseFailed
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("watch: phases so far %v", phases)
		}
	}
	if got := fmt.Sprint(phases); !strings.HasSuffix(got, "InProgress FinalizingCancelled Failed]") {
		t.Errorf("phases %s, want ... InProgress FinalizingCancelled Failed", got)
	}
	for _, suffix := range []string{".tar.gz", "-resource-list.json.gz", "-results.gz"} {
		if _, err := os.Stat(backupFile(s, "slow", suffix)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s of the cancelled backup: %v, want it deleted", suffix, err)
		}
	}
	if logs := backupLogs(t, s, "slow"); !strings.Contains(logs, "Backup cancelled by user") {
		t.Errorf("logs of the cancelled backup:\n%s", logs)
	}
	// Cancelling it again is idempotent: accepted, and nothing changes.
	again := &velerov1.Backup{}
	if err := s.Clientset.VeleroV1().RESTClient().Post().Namespace(ns).Resource("backups").Name("slow").SubResource("cancel").Do(ctx).Into(again); err != nil ||
		again.ResourceVersion != b.ResourceVersion || again.Status.Phase != velerov1.BackupPhaseFailed {
		t.Errorf("cancelling the cancelled backup again: %v, rv %s (was %s), phase %s", err, again.ResourceVersion, b.ResourceVersion, again.Status.Phase)
	}
	// A completed backup cannot be cancelled.
	createBackup(t, s, "small", "nothing-here")
	waitBackup(t, s, "small", "finished", finished)
	if err := s.Clientset.VeleroV1().RESTClient().Post().Namespace(ns).Resource("backups").Name("small").SubResource("cancel").Do(ctx).Error(); !apierrors.IsConflict(err) {
		t.Errorf("cancelling a completed backup: %v, want 409 Conflict", err)
	}

	// Deleting a running backup stops it and removes what it wrote.
	createBackup(t, s, "deleted", "big")
	waitBackup(t, s, "deleted", "collecting items", func(b *velerov1.Backup) bool {
		return b.Status.Phase == velerov1.BackupPhaseInProgress && b.Status.Progress != nil && b.Status.Progress.ItemsBackedUp > 0
	})
	if err := s.Clientset.VeleroV1().Backups(ns).Delete(ctx, "deleted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The engine goes on with the next backup; the deleted one's data goes.
	createBackup(t, s, "after", "nothing-here")
	if b := waitBackup(t, s, "after", "finished", finished); b.Status.Phase != velerov1.BackupPhaseCompleted {
		t.Errorf("backup after the deleted one: %s %q", b.Status.Phase, b.Status.FailureReason)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		entries, err := os.ReadDir(filepath.Join(s.DataDir, "backups", "backups", "deleted"))
		return errors.Is(err, os.ErrNotExist) || (err == nil && len(entries) == 0), nil
	}); err != nil {
		entries, _ := os.ReadDir(filepath.Join(s.DataDir, "backups", "backups", "deleted"))
		t.Errorf("data of the deleted running backup left: %v", entries)
	}
	// Its finalizer held it until then; now it is gone.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, "deleted", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Errorf("the deleted running backup is still there: %v", err)
	}
}

// TestBackupInterruptedByRestart: a backup running when the server is
// killed ends Failed with a reason at the next start and its partial data
// is removed; the queue goes on (nothing stuck InProgress, velero #10519).
func TestBackupInterruptedByRestart(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{Args: slowSource})
	for i := 0; i < 20; i++ {
		createTracker(t, s, "big", fmt.Sprintf("t%02d", i), nil)
	}
	createBackup(t, s, "interrupted", "big")
	createBackup(t, s, "next", "big") // queued behind it (same namespace)
	waitBackup(t, s, "interrupted", "collecting items", func(b *velerov1.Backup) bool {
		return b.Status.Phase == velerov1.BackupPhaseInProgress && b.Status.Progress != nil && b.Status.Progress.ItemsBackedUp > 0
	})
	s.Restart(true)
	b := waitBackup(t, s, "interrupted", "finished", finished)
	if b.Status.Phase != velerov1.BackupPhaseFailed || !strings.Contains(b.Status.FailureReason, "server stopped while the backup was in progress") {
		t.Errorf("interrupted backup: %s %q", b.Status.Phase, b.Status.FailureReason)
	}
	if _, err := os.Stat(backupFile(s, "interrupted", ".tar.gz")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("tarball of the interrupted backup: %v, want none", err)
	}
	if logs := backupLogs(t, s, "interrupted"); !strings.Contains(logs, "server stopped while the backup was in progress") {
		t.Errorf("logs of the interrupted backup:\n%s", logs)
	}
	next := waitBackup(t, s, "next", "finished", finished)
	if next.Status.Phase != velerov1.BackupPhaseCompleted || next.Status.Progress.ItemsBackedUp != 20 {
		t.Errorf("backup queued behind the interrupted one: %s %+v", next.Status.Phase, next.Status.Progress)
	}
	if got := tarballItems(t, s, "next"); len(got) != 20 {
		t.Errorf("backup queued behind the interrupted one has %d items", len(got))
	}
}

// TestBackupToS3: a backup into an S3 storage location (a real S3 server
// on loopback) lands in the bucket under the location's prefix in Velero's
// layout, and its log is read back from there.
func TestBackupToS3(t *testing.T) {
	t.Parallel()
	framework.StorageIndependent(t, "backups to an S3 location (the object store client)")
	srv := framework.StartS3(t)
	srv.MakeBucket(t, "velero")
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	createTracker(t, s, "shop", "t1", nil)
	if _, err := s.Clientset.VeleroV1().BackupStorageLocations(ns).Create(ctx, &velerov1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Name: "s3", Namespace: ns},
		Spec: velerov1.BackupStorageLocationSpec{
			Provider:    "aws",
			StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: "velero", Prefix: "cluster-a"}},
			Config: map[string]string{"s3Url": srv.Endpoint, "region": "us-east-1", "s3ForcePathStyle": "true",
				"credentialsFile": srv.CredentialsFile(t, "default")},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitLocation(t, s, "s3", func(l *velerov1.BackupStorageLocation) bool {
		return l.Status.Phase == velerov1.BackupStorageLocationPhaseAvailable
	})
	if _, err := s.Clientset.VeleroV1().Backups(ns).Create(ctx, &velerov1.Backup{
		ObjectMeta: metav1.ObjectMeta{Name: "to-s3", Namespace: ns},
		Spec:       velerov1.BackupSpec{IncludedNamespaces: []string{"shop"}, StorageLocation: "s3"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := waitBackup(t, s, "to-s3", "finished", finished)
	if b.Status.Phase != velerov1.BackupPhaseCompleted || b.Status.Progress.ItemsBackedUp != 1 {
		t.Fatalf("backup to S3: %s %q %+v", b.Status.Phase, b.Status.FailureReason, b.Status.Progress)
	}
	dir := filepath.Join(srv.Root, "velero", "cluster-a", "backups", "to-s3")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{"backstop-manifest.json", "to-s3-itemoperations.json.gz", "to-s3-logs.gz", "to-s3-resource-list.json.gz", "to-s3-results.gz",
		"to-s3-volumeinfo.json.gz", "to-s3-volumesnapshots.json.gz", "to-s3.tar.gz", "velero-backup.json"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("objects in the bucket:\n got %v\nwant %v", names, want)
	}
	if m := checkBackupManifest(t, dir, "to-s3"); b.Status.SizeBytes != m.Size() || m.Size() == 0 {
		t.Errorf("backup to S3: status.sizeBytes %d, its objects hold %d bytes", b.Status.SizeBytes, m.Size())
	}
	verified := requestVerification(t, s, "to-s3", "s3")
	if v, c := verified.Status.Verification, verifiedCondition(verified); c.Status != metav1.ConditionTrue || v.Objects != len(want)-1 || v.Items == 0 {
		t.Errorf("verified through S3: condition %+v, verification %+v", c, v)
	}
	if _, err := os.Stat(filepath.Join(s.DataDir, "backups", "backups", "to-s3")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the backup also went to the default location: %v", err)
	}
	if logs := backupLogs(t, s, "to-s3"); !strings.Contains(logs, `msg="Backup completed"`) {
		t.Errorf("logs read from S3:\n%s", logs)
	}
}

// checkBackupManifest checks a backup's manifest (written last) against the
// objects of its directory dir (a location that is not encrypted): every
// other object listed, with its size and sha256. It returns the manifest.
func checkBackupManifest(t *testing.T, dir, backup string) *objectstore.Manifest {
	t.Helper()
	files, err := framework.ReadTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	var m objectstore.Manifest
	if err := json.Unmarshal(files[objectstore.ManifestFile], &m); err != nil || m.Backup != backup || m.Kind != objectstore.ManifestKind {
		t.Fatalf("the manifest of %s: %v %+v", backup, err, m)
	}
	delete(files, objectstore.ManifestFile)
	listed := map[string]bool{}
	for _, o := range m.Objects {
		listed[o.Name] = true
		sum := sha256.Sum256(files[o.Name])
		if data, ok := files[o.Name]; !ok || int64(len(data)) != o.Size || hex.EncodeToString(sum[:]) != o.SHA256 {
			t.Errorf("manifest of %s: %+v, the object has %d bytes (present %v), sha256 %x", backup, o, len(files[o.Name]), ok, sum)
		}
	}
	for name := range files {
		if !listed[name] {
			t.Errorf("object %s of backup %s not in its manifest", name, backup)
		}
	}
	return &m
}
