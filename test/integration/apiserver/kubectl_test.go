package apiserver

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

func examples(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "artifacts", "examples", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("example %s: %v", name, err)
	}
	return p
}

func mustKubectl(t *testing.T, s *framework.Server, args ...string) string {
	t.Helper()
	out, err := s.Kubectl(nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestKubectl drives the server with kubectl the way a user would.
func TestKubectl(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{Args: withoutBackupEngine})

	// create from the examples; the storage location first so backups default to it.
	mustKubectl(t, s, "create", "-f", examples(t, "backupstoragelocation.yaml"))
	out := mustKubectl(t, s, "apply", "-f", filepath.Dir(examples(t, "backup.yaml")))
	for _, want := range []string{"backup.velero.io/nightly-apps", "schedule.velero.io/daily-shop", "restore.velero.io/restore-shop",
		"nonadminbackup.oadp.openshift.io/my-app", "virtualmachinebackup.backup.kubevirt.io/backup1",
		"virtualmachinebackuptracker.backup.kubevirt.io/my-backup-tracker"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %s:\n%s", want, out)
		}
	}

	// get: the columns of `velero backup get`.
	out = mustKubectl(t, s, "get", "backups", "-n", ns)
	header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
	if got, want := strings.Join(header, " "), "NAME STATUS ERRORS WARNINGS CREATED EXPIRES STORAGE LOCATION SELECTOR"; got != want {
		t.Errorf("backup columns %q, want %q", got, want)
	}
	if !strings.Contains(out, "nightly-apps") || !strings.Contains(out, "local") || !strings.Contains(out, "backup=true") {
		t.Errorf("backup row lacks name, default location or selector:\n%s", out)
	}
	out = mustKubectl(t, s, "get", "backups", "-n", ns, "-o", "wide")
	if !strings.Contains(out, "QUEUE POSITION") || !strings.Contains(out, "CANCEL") {
		t.Errorf("-o wide lacks the wide columns:\n%s", out)
	}
	out = mustKubectl(t, s, "get", "schedules", "-n", ns)
	if h := strings.Join(strings.Fields(strings.SplitN(out, "\n", 2)[0]), " "); h != "NAME STATUS SCHEDULE LAST BACKUP AGE PAUSED" {
		t.Errorf("schedule columns %q", h)
	}
	out = mustKubectl(t, s, "get", "vmbackup", "-n", "ns1")
	if h := strings.Join(strings.Fields(strings.SplitN(out, "\n", 2)[0]), " "); h != "NAME TYPE PHASE CHECKPOINT AGE" {
		t.Errorf("virtualmachinebackup columns %q", h)
	}
	if out = mustKubectl(t, s, "get", "velero", "-n", ns, "-o", "name"); !strings.Contains(out, "backup.velero.io/nightly-apps") ||
		!strings.Contains(out, "schedule.velero.io/daily-shop") {
		t.Errorf("kubectl get velero (category) lists:\n%s", out)
	}

	// -o yaml: defaults applied, the seed's spellings normalized.
	out = mustKubectl(t, s, "get", "backup", "nightly-apps", "-n", ns, "-o", "yaml")
	for _, want := range []string{"ttl: 72h0m0s", "storageLocation: local", "velero.io/storage-location: local"} {
		if !strings.Contains(out, want) {
			t.Errorf("backup yaml lacks %q:\n%s", want, out)
		}
	}
	out = mustKubectl(t, s, "get", "virtualmachinebackup", "backup1", "-n", "ns1", "-o", "jsonpath={.spec.source.kind}/{.spec.source.name}/{.spec.mode}")
	if out != "VirtualMachineBackupTracker/my-backup-tracker/Push" {
		t.Errorf("normalized virtualmachinebackup source/mode = %q", out)
	}

	// patch.
	mustKubectl(t, s, "patch", "backup", "nightly-apps", "-n", ns, "--type", "merge", "-p", `{"spec":{"cancel":true}}`)
	if out = mustKubectl(t, s, "get", "backup", "nightly-apps", "-n", ns, "-o", "jsonpath={.spec.cancel} {.metadata.generation}"); out != "true 2" {
		t.Errorf("after patch: cancel/generation = %q, want \"true 2\"", out)
	}

	// server-side apply by a second manager.
	applied := `apiVersion: velero.io/v1
kind: Schedule
metadata:
  name: daily-shop
  namespace: backstop-system
spec:
  schedule: "45 * * * *"
  template:
    includedNamespaces: [shop]
`
	if _, err := s.Kubectl([]byte(applied), "apply", "--server-side", "--field-manager", "ops-team", "--force-conflicts", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	out = mustKubectl(t, s, "get", "schedule", "daily-shop", "-n", ns, "-o", "jsonpath={.spec.schedule}|{.metadata.managedFields[*].manager}")
	if !strings.HasPrefix(out, "45 * * * *|") || !strings.Contains(out, "ops-team") {
		t.Errorf("after server-side apply: %q", out)
	}

	// explain reads the published OpenAPI.
	out = mustKubectl(t, s, "explain", "backup.spec.cancel")
	if !strings.Contains(out, "cancel") || !strings.Contains(out, "boolean") || !strings.Contains(out, "FinalizingCancelled") {
		t.Errorf("explain backup.spec.cancel:\n%s", out)
	}
	if out = mustKubectl(t, s, "explain", "virtualmachinebackup.spec.backupTracker"); !strings.Contains(out, "string") {
		t.Errorf("explain virtualmachinebackup.spec.backupTracker:\n%s", out)
	}

	// wait --for=jsonpath sees a status change (of a backup that was not
	// cancelled: nightly-apps has failed as cancelled, for good).
	createBackup(t, s, "watched", "app")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waitCmd := exec.CommandContext(ctx, framework.Binary(t, "kubectl"), "--kubeconfig", s.KubeconfigPath, "wait", "-n", ns,
		"--for=jsonpath={.status.phase}=Completed", "backup/watched", "--timeout=50s")
	waitOut := &strings.Builder{}
	waitCmd.Stdout, waitCmd.Stderr = waitOut, waitOut
	if err := waitCmd.Start(); err != nil {
		t.Fatal(err)
	}
	// get -w sees an update.
	watchCmd := exec.CommandContext(ctx, framework.Binary(t, "kubectl"), "--kubeconfig", s.KubeconfigPath, "get", "-w", "-n", ns,
		"backup/watched", "-o", "jsonpath={.status.phase}{\"\\n\"}")
	stdout, err := watchCmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watchCmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() { // the initial state
		t.Fatalf("kubectl get -w printed nothing")
	}
	setBackupPhase(t, s, "watched", velerov1.BackupPhaseCompleted)
	sawUpdate := false
	for lines.Scan() {
		if lines.Text() == "Completed" {
			sawUpdate = true
			break
		}
	}
	if !sawUpdate {
		t.Errorf("kubectl get -w did not show the update")
	}
	_ = watchCmd.Process.Kill()
	_ = watchCmd.Wait()
	if err := waitCmd.Wait(); err != nil {
		t.Errorf("kubectl wait: %v: %s", err, waitOut)
	}

	// delete.
	// A NonAdminBackup is deleted as its example says: deleteBackup (a
	// plain delete waits for its owner to say what becomes of the data).
	mustKubectl(t, s, "patch", "nab", "my-app", "-n", "tenant-a", "--type=merge", "-p", `{"spec":{"deleteBackup":true}}`)
	mustKubectl(t, s, "wait", "--for=delete", "nab/my-app", "-n", "tenant-a", "--timeout=60s")
	// Deleting the backup deletes the restores made from it too.
	mustKubectl(t, s, "delete", "--ignore-not-found", "-f", filepath.Dir(examples(t, "backup.yaml")))
	mustKubectl(t, s, "delete", "backup", "watched", "-n", ns)
	if out = mustKubectl(t, s, "get", "backups,schedules,restores", "-n", ns, "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("objects left after delete:\n%s", out)
	}
	if out = mustKubectl(t, s, "get", "bsl", "-n", ns, "-o", "name"); strings.TrimSpace(out) != "backupstoragelocation.velero.io/default" {
		t.Errorf("storage locations after delete: %q, want only the default one", out)
	}
}
