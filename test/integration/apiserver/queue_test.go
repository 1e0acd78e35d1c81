package apiserver

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

func createBackup(t *testing.T, s *framework.Server, name string, namespaces ...string) {
	t.Helper()
	if _, err := s.Clientset.VeleroV1().Backups(ns).Create(context.Background(), &velerov1.Backup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       velerov1.BackupSpec{IncludedNamespaces: namespaces},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// queueState is the phase and reported position of each backup.
func queueState(t *testing.T, s *framework.Server) map[string]string {
	t.Helper()
	list, err := s.Clientset.VeleroV1().Backups(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, b := range list.Items {
		out[b.Name] = fmt.Sprintf("%s/%d", b.Status.Phase, b.Status.QueuePosition)
	}
	return out
}

// waitQueue polls until the backups are in the wanted phases/positions.
func waitQueue(t *testing.T, s *framework.Server, want map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got map[string]string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		got = queueState(t, s)
		for name, w := range want {
			if got[name] != w {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("queue state %v, want %v", got, want)
	}
}

// TestBackupQueue runs the concurrent-backup design's scenario through the
// real server with --concurrent-backups=2 (the backup engine's transitions
// are made by the test): backup5 starts before backup3 and backup4, and
// queue positions are exact on get, list and watch without the queued
// backups being rewritten.
func TestBackupQueue(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{Args: append([]string{"--concurrent-backups=2"}, withoutBackupEngine...)})
	ctx := context.Background()

	createBackup(t, s, "backup1", "ns1", "ns2")
	waitQueue(t, s, map[string]string{"backup1": "ReadyToStart/0"})
	setBackupPhase(t, s, "backup1", velerov1.BackupPhaseInProgress)

	for _, b := range []struct {
		name string
		ns   []string
	}{
		{"backup2", []string{"ns2", "ns3", "ns5"}},
		{"backup3", []string{"ns4", "ns3"}},
		{"backup4", []string{"ns5", "ns6"}},
		{"backup5", []string{"ns8", "ns9"}},
	} {
		createBackup(t, s, b.name, b.ns...)
		// Created one after the other, so the queue order is creation order.
		waitQueue(t, s, map[string]string{b.name: queueStateOf(b.name)})
	}
	waitQueue(t, s, map[string]string{
		"backup1": "InProgress/0",
		"backup2": "Queued/1", "backup3": "Queued/2", "backup4": "Queued/3",
		"backup5": "ReadyToStart/0",
	})
	b4, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, "backup4", metav1.GetOptions{})
	if err != nil || b4.Status.QueuePosition != 3 {
		t.Fatalf("get backup4: position %d, %v", b4.Status.QueuePosition, err)
	}
	rvQueued := b4.ResourceVersion

	w, err := s.Clientset.VeleroV1().Backups(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: b4.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// backup1 completes: backup2 may start (backup5 runs, one slot free).
	setBackupPhase(t, s, "backup1", velerov1.BackupPhaseCompleted)
	waitQueue(t, s, map[string]string{
		"backup2": "ReadyToStart/0", "backup3": "Queued/1", "backup4": "Queued/2", "backup5": "ReadyToStart/0",
	})
	// backup4 moved up without being written.
	b4, err = s.Clientset.VeleroV1().Backups(ns).Get(ctx, "backup4", metav1.GetOptions{})
	if err != nil || b4.Status.QueuePosition != 2 || b4.ResourceVersion != rvQueued {
		t.Errorf("backup4 after backup2 left the queue: position %d rv %s (was %s), %v", b4.Status.QueuePosition, b4.ResourceVersion, rvQueued, err)
	}
	// Watch events carry the position at the time they are sent: backup2's
	// move to ReadyToStart comes with position 0.
	deadline := time.After(30 * time.Second)
	for seen := false; !seen; {
		select {
		case ev := <-w.ResultChan():
			if b, ok := ev.Object.(*velerov1.Backup); ok && ev.Type == watch.Modified && b.Name == "backup2" && b.Status.Phase == velerov1.BackupPhaseReadyToStart {
				if b.Status.QueuePosition != 0 {
					t.Errorf("watch event of the dequeued backup2: position %d", b.Status.QueuePosition)
				}
				seen = true
			}
		case <-deadline:
			t.Fatalf("no watch event for backup2 moving to ReadyToStart")
		}
	}
	// A label change on backup4 is a MODIFIED event sent now: position 2.
	if _, err := s.Clientset.VeleroV1().Backups(ns).Patch(ctx, "backup4", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for seen := false; !seen; {
		select {
		case ev := <-w.ResultChan():
			if b, ok := ev.Object.(*velero1Backup); ok && b.Name == "backup4" && b.Labels["x"] == "y" {
				if b.Status.QueuePosition != 2 {
					t.Errorf("watch event of backup4: position %d, want 2", b.Status.QueuePosition)
				}
				seen = true
			}
		case <-deadline:
			t.Fatalf("no watch event for the label change of backup4")
		}
	}
	// A client cannot move a backup in the queue.
	if b, err := s.Clientset.VeleroV1().Backups(ns).Patch(ctx, "backup4", "application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"backstop.io/queue-sequence":"0"}}}`), metav1.PatchOptions{}); err != nil || b.Status.QueuePosition != 2 {
		t.Errorf("changing the queue sequence: position %d, %v", b.Status.QueuePosition, err)
	}

	// Kill the server with backups Queued and ReadyToStart: the queue is the same after.
	s.Restart(true)
	waitQueue(t, s, map[string]string{
		"backup2": "ReadyToStart/0", "backup3": "Queued/1", "backup4": "Queued/2", "backup5": "ReadyToStart/0",
	})
}

type velero1Backup = velerov1.Backup

func queueStateOf(name string) string {
	if name == "backup5" {
		return "ReadyToStart/0"
	}
	return "Queued/" + map[string]string{"backup2": "1", "backup3": "2", "backup4": "3"}[name]
}

// TestCancelQueuedBackup: cancelling a backup that waits in the queue takes
// it out (FinalizingCancelled → Failed, with the reason), and the backups
// behind it move up.
func TestCancelQueuedBackup(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{Args: withoutBackupEngine})
	ctx := context.Background()
	createBackup(t, s, "first", "a")
	waitQueue(t, s, map[string]string{"first": "ReadyToStart/0"})
	setBackupPhase(t, s, "first", velerov1.BackupPhaseInProgress)
	createBackup(t, s, "second", "a")
	waitQueue(t, s, map[string]string{"second": "Queued/1"})
	createBackup(t, s, "third", "a")
	waitQueue(t, s, map[string]string{"third": "Queued/2"})

	if err := s.Clientset.VeleroV1().RESTClient().Post().Namespace(ns).Resource("backups").Name("second").SubResource("cancel").Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	waitQueue(t, s, map[string]string{"second": "Failed/0", "third": "Queued/1", "first": "InProgress/0"})
	b, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, "second", metav1.GetOptions{})
	if err != nil || b.Status.FailureReason != "Backup cancelled by user" || b.Status.CompletionTimestamp == nil {
		t.Errorf("cancelled backup: %+v, %v", b.Status, err)
	}
	// Cancelling it again is idempotent: nothing changes.
	if err := s.Clientset.VeleroV1().RESTClient().Post().Namespace(ns).Resource("backups").Name("second").SubResource("cancel").Do(ctx).Error(); err != nil {
		t.Errorf("cancelling the cancelled backup again: %v", err)
	}
	if again, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, "second", metav1.GetOptions{}); err != nil || again.ResourceVersion != b.ResourceVersion {
		t.Errorf("the second cancel changed the backup: rv %s → %s, %v", b.ResourceVersion, again.ResourceVersion, err)
	}
}
