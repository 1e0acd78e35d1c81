package apiserver

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// veleroCLI runs the real velero CLI (v1.18.3) against the server.
func veleroCLI(t *testing.T, s *framework.Server, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, framework.Binary(t, "velero"), append([]string{"--kubeconfig", s.KubeconfigPath, "-n", ns}, args...)...)
	// The CLI keeps its client config under $HOME/.config/velero.
	cmd.Env = append(cmd.Environ(), "HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("velero %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String() + stderr.String()
}

func requireContains(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("%s: output lacks %q:\n%s", what, w, out)
		}
	}
}

// TestVeleroCLI: the unmodified velero CLI works against the server.
func TestVeleroCLI(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{Args: withoutBackupEngine})
	ctx := context.Background()
	bucket := createFilesystemLocation(t, s, "local")

	requireContains(t, "velero version", veleroCLI(t, s, "version"), "Client:", "Version: v1.18.3", "Server:")

	requireContains(t, "backup create", veleroCLI(t, s, "backup", "create", "b1", "--include-namespaces", "shop", "--ttl", "24h"),
		`Backup request "b1" submitted successfully`)
	b, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, "b1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Spec.TTL.Duration != 24*time.Hour || b.Spec.StorageLocation != "local" || len(b.Spec.IncludedNamespaces) != 1 {
		t.Errorf("backup made by the CLI: ttl %v location %q namespaces %v", b.Spec.TTL, b.Spec.StorageLocation, b.Spec.IncludedNamespaces)
	}
	requireContains(t, "backup get", veleroCLI(t, s, "backup", "get"), "NAME", "b1", "local")
	// describe reads the backup's files through download requests: none
	// exist yet, which it reports as such rather than as an error.
	out := veleroCLI(t, s, "backup", "describe", "b1")
	requireContains(t, "backup describe", out, "Name:", "b1", "Included:", "shop", "TTL:", "24h0m0s")
	if strings.Contains(out, "<error") {
		t.Errorf("backup describe reports an error:\n%s", out)
	}
	// logs (of a finished backup) are downloaded from the storage location
	// through a signed link.
	setBackupPhase(t, s, "b1", velerov1.BackupPhaseCompleted)
	putGzip(t, filepath.Join(bucket, "backups", "b1", "b1-logs.gz"), "level=info msg=\"backup b1 went fine\"\n")
	requireContains(t, "backup logs", veleroCLI(t, s, "backup", "logs", "b1"), `backup b1 went fine`)
	// describe of a completed backup reads more of its files, none an error.
	if out := veleroCLI(t, s, "backup", "describe", "b1", "--details"); strings.Contains(out, "<error") || !strings.Contains(out, "Completed") {
		t.Errorf("describe of the completed backup:\n%s", out)
	}
	requireContains(t, "schedule create", veleroCLI(t, s, "schedule", "create", "s1", "--schedule", "0 1 * * *", "--include-namespaces", "shop", "--skip-immediately=true"),
		`Schedule "s1" created successfully`)
	// --skip-immediately=true is consumed by the schedule engine.
	sched := waitSchedule(t, s, "s1", "consuming skipImmediately", func(sch *velerov1.Schedule) bool {
		return sch.Status.LastSkipped != nil && sch.Spec.SkipImmediately != nil && !*sch.Spec.SkipImmediately
	})
	if sched.Spec.Schedule != "0 1 * * *" || strings.Join(sched.Spec.Template.IncludedNamespaces, ",") != "shop" {
		t.Errorf("schedule made by the CLI: %+v", sched.Spec)
	}
	requireContains(t, "schedule get", veleroCLI(t, s, "schedule", "get"), "NAME", "s1", "0 1 * * *", "Enabled")
	requireContains(t, "schedule describe", veleroCLI(t, s, "schedule", "describe", "s1", "--colorized=false"), "Phase:  Enabled", "Schedule:  0 1 * * *", "Included:  shop")
	requireContains(t, "backup create --from-schedule", veleroCLI(t, s, "backup", "create", "--from-schedule", "s1"), "submitted successfully")
	if bs := scheduleBackups(t, s, "s1"); len(bs) != 1 || !strings.HasPrefix(bs[0].Name, "s1-") {
		t.Errorf("backups from schedule s1: %v", bs)
	}
	veleroCLI(t, s, "schedule", "pause", "s1")
	if sched, err = s.Clientset.VeleroV1().Schedules(ns).Get(ctx, "s1", metav1.GetOptions{}); err != nil || !sched.Spec.Paused {
		t.Errorf("after velero schedule pause: paused=%v err=%v", sched.Spec.Paused, err)
	}
	veleroCLI(t, s, "schedule", "unpause", "s1", "--skip-immediately=false")
	if sched, err = s.Clientset.VeleroV1().Schedules(ns).Get(ctx, "s1", metav1.GetOptions{}); err != nil || sched.Spec.Paused ||
		sched.Spec.SkipImmediately == nil || *sched.Spec.SkipImmediately {
		t.Errorf("after velero schedule unpause --skip-immediately=false: paused=%v skipImmediately=%v err=%v", sched.Spec.Paused, sched.Spec.SkipImmediately, err)
	}

	requireContains(t, "restore create", veleroCLI(t, s, "restore", "create", "r1", "--from-backup", "b1"), `Restore request "r1" submitted successfully`)
	requireContains(t, "restore get", veleroCLI(t, s, "restore", "get"), "NAME", "r1", "b1")

	requireContains(t, "backup delete", veleroCLI(t, s, "backup", "delete", "b1", "--confirm"), "Request to delete backup \"b1\" submitted successfully")
	dbrs, err := s.Clientset.VeleroV1().DeleteBackupRequests(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(dbrs.Items) != 1 || dbrs.Items[0].Spec.BackupName != "b1" {
		t.Errorf("delete backup requests after velero backup delete: %+v", dbrs.Items)
	}
}

// createFilesystemLocation creates a default filesystem storage location
// in the admin namespace and returns its directory.
func createFilesystemLocation(t *testing.T, s *framework.Server, name string) string {
	t.Helper()
	return createFilesystemLocationAt(t, s, name, t.TempDir())
}

// createFilesystemLocationAt is createFilesystemLocation with its bucket
// at dir: on a shared server, a directory that lives as long as the server
// (the location is still checked after the test ends).
func createFilesystemLocationAt(t *testing.T, s *framework.Server, name, dir string) string {
	t.Helper()
	_, err := s.Clientset.VeleroV1().BackupStorageLocations(ns).Create(context.Background(), &velerov1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: velerov1.BackupStorageLocationSpec{Provider: "filesystem", Default: true,
			StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: dir}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the storage location: %v", err)
	}
	return dir
}

// putGzip writes a gzip-compressed file, as backups store logs.
func putGzip(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(content)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestServerStatusRequest: a new request is answered with the server version.
func TestServerStatusRequest(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := s.Clientset.VeleroV1().ServerStatusRequests(ns).Create(ctx, &velerov1.ServerStatusRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		req, err = s.Clientset.VeleroV1().ServerStatusRequests(ns).Get(ctx, req.Name, metav1.GetOptions{})
		return err == nil && req.Status.Phase == velerov1.ServerStatusRequestPhaseProcessed, err
	})
	if err != nil {
		t.Fatalf("request not processed: %v (status %+v)", err, req.Status)
	}
	if req.Status.ServerVersion == "" || req.Status.ProcessedTimestamp == nil {
		t.Errorf("processed request lacks version or timestamp: %+v", req.Status)
	}
}
