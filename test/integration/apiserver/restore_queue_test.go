package apiserver

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestConcurrentRestores: restores run several at once where what they
// write does not overlap: a small restore of another namespace runs and
// ends while a big one runs; a restore into the big one's namespace
// (namespaceMapping) waits, its status.queuePosition 1, while one created
// after it into a free namespace runs; a restart fails the restore that
// ran and the waiting one runs after it.
func TestConcurrentRestores(t *testing.T) {
	t.Parallel()
	const bigItems = 40
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	for i := range bigItems {
		createTracker(t, s, "big", fmt.Sprintf("t%02d", i), nil)
	}
	for i := range 2 {
		createTracker(t, s, "small", fmt.Sprintf("t%02d", i), nil)
	}
	for _, b := range []struct{ name, namespace string }{{"big", "big"}, {"small", "small"}} {
		createBackup(t, s, b.name, b.namespace)
		if got := waitBackup(t, s, b.name, "finished", finished); got.Status.Phase != velerov1.BackupPhaseCompleted {
			t.Fatalf("backup %s: %s %q", b.name, got.Status.Phase, got.Status.FailureReason)
		}
	}
	for _, namespace := range []string{"big", "small"} {
		if err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Restores now write one item a second, all of them together: the
	// big one runs for about 40 s.
	s.RestartWith([]string{"--client-qps=1", "--client-burst=1", "--restore-item-workers=1"})
	restores := s.Clientset.VeleroV1().Restores(ns)
	create := func(name string, spec velerov1.RestoreSpec) {
		t.Helper()
		if _, err := restores.Create(ctx, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating restore %s: %v", name, err)
		}
	}
	get := func(name string) *velerov1.Restore {
		t.Helper()
		r, err := restores.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	create("big", velerov1.RestoreSpec{BackupName: "big"})
	waitFor(t, "restore big to write items", func() bool {
		r := get("big")
		return r.Status.Phase == velerov1.RestorePhaseInProgress && r.Status.Progress != nil && r.Status.Progress.ItemsRestored > 0
	})

	t.Run("another namespace's restore runs beside it and ends first", func(t *testing.T) {
		create("small", velerov1.RestoreSpec{BackupName: "small"})
		if r := waitRestore(t, s, "small"); r.Status.Phase != velerov1.RestorePhaseCompleted || r.Status.Progress.ItemsRestored != 2 {
			t.Fatalf("small: %s, %+v, %q", r.Status.Phase, r.Status.Progress, r.Status.FailureReason)
		}
		if big := get("big"); big.Status.Phase != velerov1.RestorePhaseInProgress {
			t.Errorf("big is %s when small ended, want still InProgress (small ran beside it, not after it)", big.Status.Phase)
		}
	})

	t.Run("a restore into the same namespace waits; one behind it into another runs", func(t *testing.T) {
		create("into-big", velerov1.RestoreSpec{BackupName: "small", NamespaceMapping: map[string]string{"small": "big"}})
		create("elsewhere", velerov1.RestoreSpec{BackupName: "small", NamespaceMapping: map[string]string{"small": "elsewhere"}})
		if r := waitRestore(t, s, "elsewhere"); r.Status.Phase != velerov1.RestorePhaseCompleted {
			t.Fatalf("elsewhere: %s %q", r.Status.Phase, r.Status.FailureReason)
		}
		waiting, big := get("into-big"), get("big")
		if !waiting.Status.Phase.Pending() || waiting.Status.QueuePosition != 1 {
			t.Errorf("into-big: phase %q, queuePosition %d; want it waiting (New) at position 1 while big runs", waiting.Status.Phase, waiting.Status.QueuePosition)
		}
		if big.Status.Phase != velerov1.RestorePhaseInProgress || big.Status.QueuePosition != 0 {
			t.Errorf("big: phase %q, queuePosition %d; want InProgress, no position", big.Status.Phase, big.Status.QueuePosition)
		}
		list, err := restores.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list.Items {
			if want := map[bool]int{true: 1}[r.Name == "into-big"]; r.Status.QueuePosition != want {
				t.Errorf("listed %s at queuePosition %d, want %d", r.Name, r.Status.QueuePosition, want)
			}
		}
	})

	t.Run("after a restart the waiting restore runs", func(t *testing.T) {
		s.RestartWith(nil)
		if r := waitRestore(t, s, "big"); r.Status.Phase != velerov1.RestorePhaseFailed || r.Status.FailureReason != velerov1.RestoreRestartedReason {
			t.Errorf("big after the restart: %s %q, want Failed %q", r.Status.Phase, r.Status.FailureReason, velerov1.RestoreRestartedReason)
		}
		r := waitRestore(t, s, "into-big")
		if r.Status.Phase != velerov1.RestorePhaseCompleted || r.Status.QueuePosition != 0 {
			t.Errorf("into-big: %s at queuePosition %d (%q), want Completed, no position", r.Status.Phase, r.Status.QueuePosition, r.Status.FailureReason)
		}
		if big := get("big"); r.Status.StartTimestamp.Before(big.Status.CompletionTimestamp) {
			t.Errorf("into-big started at %s, before big ended at %s", r.Status.StartTimestamp, big.Status.CompletionTimestamp)
		}
	})
}

// waitFor polls cond for up to two minutes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
