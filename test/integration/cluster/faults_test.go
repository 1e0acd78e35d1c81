package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// slowBackupArgs make a backup of faultObjects ConfigMaps take many list
// requests at a low rate, so that faults land while it runs.
var slowBackupArgs = []string{"--client-page-size=5", "--client-qps=10", "--client-burst=1"}

const faultObjects = 400

// TestFaults: kube-apiserver killed and restarted while a backup reads the
// cluster, and a namespace deleted during its own backup. Each backup ends
// with a clear result; the server does not crash.
func TestFaults(t *testing.T) {
	t.Parallel()
	c := framework.StartCluster(t)
	c.StopBackstop(false)
	// The engines' Lease outlasts kube-apiserver's restart, however slow
	// the machine: the engines keep running through it (the default
	// renew deadline, 10 s, stops them when the restart takes longer, and
	// the backup under way fails, as Velero's would with its pod).
	c.BackstopArgs = append(c.BackstopArgs, slowBackupArgs...)
	c.BackstopArgs = append(c.BackstopArgs, "--leader-elect-lease-duration=3m", "--leader-elect-renew-deadline=2m")
	c.StartBackstop()

	t.Run("kube-apiserver-restarted-during-a-backup", func(t *testing.T) {
		fill(t, c, "big")
		b := startBackup(t, c, "during-restart", "big")
		c.RestartKubeAPIServer()
		b = waitBackupEnd(t, c, b.Name)
		if !c.BackstopRunning() {
			t.Fatal("backstop-apiserver exited")
		}
		// Completed (client-go and the pager rode out the restart), or
		// PartiallyFailed with the failed lists as errors in its log.
		switch b.Status.Phase {
		case velerov1.BackupPhaseCompleted:
			if b.Status.Progress == nil || b.Status.Progress.ItemsBackedUp < faultObjects {
				t.Errorf("Completed with progress %+v, want every ConfigMap", b.Status.Progress)
			}
		case velerov1.BackupPhasePartiallyFailed:
			log := backupLog(t, c, b.Name)
			if b.Status.Errors == 0 || !strings.Contains(log, "listing configmaps") {
				t.Errorf("PartiallyFailed with %d errors and no failed list in its log:\n%s", b.Status.Errors, log)
			}
		default:
			t.Errorf("backup during a kube-apiserver restart: %s (%s), want Completed or PartiallyFailed", b.Status.Phase, b.Status.FailureReason)
		}
		t.Logf("backup during a kube-apiserver restart: %s, %d errors, progress %+v", b.Status.Phase, b.Status.Errors, b.Status.Progress)
		// And the next backup is whole.
		again := runBackup(t, c, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "after-restart"}, Spec: velerov1.BackupSpec{IncludedNamespaces: []string{"big"}}})
		if again.Status.Phase != velerov1.BackupPhaseCompleted || again.Status.Progress.ItemsBackedUp < faultObjects {
			t.Errorf("the backup after the restart: %s, progress %+v", again.Status.Phase, again.Status.Progress)
		}
	})

	t.Run("namespace-deleted-during-its-backup", func(t *testing.T) {
		fill(t, c, "doomed")
		b := startBackup(t, c, "of-doomed", "doomed")
		if err := c.Kube.CoreV1().Namespaces().Delete(context.Background(), "doomed", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		b = waitBackupEnd(t, c, b.Name)
		if !c.BackstopRunning() {
			t.Fatal("backstop-apiserver exited")
		}
		// A paged list reads one snapshot (the continue token keeps the
		// first page's resource version): the backup holds the namespace
		// as it was when the list began, with no error.
		if b.Status.Phase != velerov1.BackupPhaseCompleted || b.Status.Errors != 0 {
			t.Errorf("backup of a namespace deleted under it: %s, %d errors (%s)\n%s", b.Status.Phase, b.Status.Errors, b.Status.FailureReason, backupLog(t, c, b.Name))
		}
		t.Logf("backup of a namespace deleted under it: %s, progress %+v", b.Status.Phase, b.Status.Progress)
	})
}

// fill creates namespace ns with faultObjects ConfigMaps.
func fill(t *testing.T, c *framework.Cluster, ns string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range faultObjects {
		if _, err := c.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i)}, Data: map[string]string{"i": fmt.Sprint(i)},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// startBackup creates a backup of namespace ns and waits until it has
// backed up its first items.
func startBackup(t *testing.T, c *framework.Cluster, name, ns string) *velerov1.Backup {
	t.Helper()
	b, err := c.Backstop.VeleroV1().Backups(adminNamespace).Create(context.Background(), &velerov1.Backup{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: velerov1.BackupSpec{IncludedNamespaces: []string{ns}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	poll(t, "backup "+name+" to be under way", time.Minute, func(ctx context.Context) (bool, error) {
		b, err = c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if b.Status.Phase.Terminal() {
			return false, fmt.Errorf("backup %s ended before the fault: %s", name, b.Status.Phase)
		}
		return b.Status.Phase == velerov1.BackupPhaseInProgress && b.Status.Progress != nil && b.Status.Progress.ItemsBackedUp > 0, nil
	})
	return b
}

// waitBackupEnd waits until the backup has ended. Its reads go to
// kube-apiserver, which may be restarting: errors are retried until the
// deadline.
func waitBackupEnd(t *testing.T, c *framework.Cluster, name string) *velerov1.Backup {
	t.Helper()
	var b *velerov1.Backup
	poll(t, "backup "+name+" to end", 3*time.Minute, func(ctx context.Context) (bool, error) {
		got, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		b = got
		return b.Status.Phase.Terminal(), nil
	})
	return b
}

// backupLog is the backup's log, through kube-apiserver.
func backupLog(t *testing.T, c *framework.Cluster, name string) string {
	t.Helper()
	out, err := c.Kubectl(c.AdminKubeconfig, nil, "get", "--raw", "/apis/velero.io/v1/namespaces/"+adminNamespace+"/backups/"+name+"/logs")
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return out
}
