package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	kvbackupv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// createRestore creates a restore and waits until it has finished.
func createRestore(t *testing.T, s *framework.Server, name string, spec velerov1.RestoreSpec) *velerov1.Restore {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Clientset.VeleroV1().Restores(ns).Create(ctx, &velerov1.Restore{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating restore %s: %v", name, err)
	}
	return waitRestore(t, s, name)
}

// waitRestore waits until a restore has finished.
func waitRestore(t *testing.T, s *framework.Server, name string) *velerov1.Restore {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var last *velerov1.Restore
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		r, err := s.Clientset.VeleroV1().Restores(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = r
		switch r.Status.Phase {
		case velerov1.RestorePhaseCompleted, velerov1.RestorePhasePartiallyFailed, velerov1.RestorePhaseFailed, velerov1.RestorePhaseFailedValidation:
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		var st any
		if last != nil {
			st = last.Status
		}
		t.Fatalf("restore %s never finished; last status %+v", name, st)
	}
	return last
}

func getTracker(t *testing.T, s *framework.Server, namespace, name string) *kvbackupv1alpha1.VirtualMachineBackupTracker {
	t.Helper()
	tr, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("tracker %s/%s: %v", namespace, name, err)
	}
	return tr
}

// trackerNames lists the trackers of a namespace.
func trackerNames(t *testing.T, s *framework.Server, namespace string) string {
	t.Helper()
	list, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tr := range list.Items {
		names = append(names, tr.Name)
	}
	return strings.Join(names, ",")
}

func restoreLogs(t *testing.T, s *framework.Server, name string) string {
	t.Helper()
	b, err := s.Clientset.VeleroV1().RESTClient().Get().Namespace(ns).Resource("restores").Name(name).SubResource("logs").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("logs of restore %s: %v", name, err)
	}
	return string(b)
}

// wantRestored checks that a restored tracker has the original's spec and
// labels plus Velero's restore labels.
func wantRestored(t *testing.T, got, orig *kvbackupv1alpha1.VirtualMachineBackupTracker, backup, restore string) {
	t.Helper()
	if got.Spec.Source.Name != orig.Spec.Source.Name || got.Spec.Source.Kind != orig.Spec.Source.Kind {
		t.Errorf("%s/%s spec %+v, want %+v", got.Namespace, got.Name, got.Spec, orig.Spec)
	}
	for k, v := range orig.Labels {
		if got.Labels[k] != v {
			t.Errorf("%s/%s label %s=%q, want %q", got.Namespace, got.Name, k, got.Labels[k], v)
		}
	}
	if got.Labels["velero.io/backup-name"] != backup || got.Labels["velero.io/restore-name"] != restore {
		t.Errorf("%s/%s restore labels %v", got.Namespace, got.Name, got.Labels)
	}
	if got.UID == orig.UID {
		t.Errorf("%s/%s has the original's UID: not recreated", got.Namespace, got.Name)
	}
}

// TestRestore: a backup's items come back into the cluster it was taken
// from (the standalone server is its own source and target), with
// Velero's rules for deleted and existing objects, namespace mapping,
// label selectors, status and bad input.
func TestRestore(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	createTracker(t, s, "shop", "t1", map[string]string{"app": "web"})
	createTracker(t, s, "shop", "t2", nil)
	createTracker(t, s, "other", "t3", nil)
	// t1 has a status, which is restored only when restoreStatus asks.
	t1 := getTracker(t, s, "shop", "t1")
	t1.Status = &kvbackupv1alpha1.VirtualMachineBackupTrackerStatus{LatestCheckpoint: &kvbackupv1alpha1.BackupCheckpoint{Name: "cp-1", Disks: []string{"vda"}}}
	t1, err := s.EngineClientset().BackupV1alpha1().VirtualMachineBackupTrackers("shop").UpdateStatus(ctx, t1, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t2, t3 := getTracker(t, s, "shop", "t2"), getTracker(t, s, "other", "t3")

	createBackup(t, s, "b1", "shop", "other")
	if b := waitBackup(t, s, "b1", "finished", finished); b.Status.Phase != velerov1.BackupPhaseCompleted {
		t.Fatalf("backup b1: %s %q", b.Status.Phase, b.Status.FailureReason)
	}

	// Disaster: t1 is deleted, t2 is relabelled after the backup (its spec
	// is immutable).
	if err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers("shop").Delete(ctx, "t1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	changed := t2.DeepCopy()
	changed.Labels = map[string]string{"tier": "changed"}
	if _, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers("shop").Update(ctx, changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("deleted-objects-come-back", func(t *testing.T) {
		r := createRestore(t, s, "r1", velerov1.RestoreSpec{BackupName: "b1"})
		// t2 exists and differs: a warning, left as it is (policy none).
		if r.Status.Phase != velerov1.RestorePhaseCompleted || r.Status.Errors != 0 || r.Status.Warnings != 1 {
			t.Fatalf("restore r1: phase %s errors %d warnings %d reason %q", r.Status.Phase, r.Status.Errors, r.Status.Warnings, r.Status.FailureReason)
		}
		if p := r.Status.Progress; p == nil || p.TotalItems != 3 || p.ItemsRestored != 2 {
			t.Errorf("progress %+v, want 2 restored of 3 (t2 differs and is left alone)", p)
		}
		if r.Status.StartTimestamp == nil || r.Status.CompletionTimestamp == nil {
			t.Errorf("timestamps %+v", r.Status)
		}
		got := getTracker(t, s, "shop", "t1")
		wantRestored(t, got, t1, "b1", "r1")
		if got.Status != nil && got.Status.LatestCheckpoint != nil {
			t.Errorf("status restored without restoreStatus: %+v", got.Status)
		}
		if got := getTracker(t, s, "shop", "t2"); got.Labels["tier"] != "changed" {
			t.Errorf("t2 changed by a restore with existingResourcePolicy none: %v", got.Labels)
		}
		if got := getTracker(t, s, "other", "t3"); got.ResourceVersion != t3.ResourceVersion {
			t.Errorf("t3, which equals the backup, was written: %s → %s", t3.ResourceVersion, got.ResourceVersion)
		}
		logs := restoreLogs(t, s, "r1")
		for _, want := range []string{"Restore completed", "Restored", "already exists", "restore=" + ns + "/r1"} {
			if !strings.Contains(logs, want) {
				t.Errorf("restore log has no %q:\n%s", want, logs)
			}
		}
		var results map[string]map[string]any
		path := filepath.Join(s.DataDir, "backups", "restores", "r1", "restore-r1-results.gz")
		if err := json.Unmarshal([]byte(readGzipFile(t, path)), &results); err != nil || len(results["warnings"]) == 0 || len(results["errors"]) != 0 {
			t.Errorf("results %v: %v", results, err)
		}
	})

	t.Run("existing-resource-policy-update", func(t *testing.T) {
		r := createRestore(t, s, "r2", velerov1.RestoreSpec{BackupName: "b1", IncludedNamespaces: []string{"shop"},
			ExistingResourcePolicy: velerov1.PolicyTypeUpdate})
		if r.Status.Phase != velerov1.RestorePhaseCompleted || r.Status.Warnings != 0 {
			t.Fatalf("restore r2: phase %s warnings %d", r.Status.Phase, r.Status.Warnings)
		}
		if got := getTracker(t, s, "shop", "t2"); got.Labels["tier"] != "" || got.Labels["velero.io/restore-name"] != "r2" {
			t.Errorf("t2 not updated to the backed-up version: %v", got.Labels)
		}
		if got := getTracker(t, s, "other", "t3"); got.ResourceVersion != t3.ResourceVersion {
			t.Errorf("t3, outside the restore's namespaces, was written")
		}
	})

	t.Run("namespace-mapping", func(t *testing.T) {
		r := createRestore(t, s, "r3", velerov1.RestoreSpec{BackupName: "b1", IncludedNamespaces: []string{"shop"},
			NamespaceMapping: map[string]string{"shop": "shop-copy"}})
		if r.Status.Phase != velerov1.RestorePhaseCompleted || r.Status.Progress == nil || r.Status.Progress.ItemsRestored != 2 {
			t.Fatalf("restore r3: phase %s progress %+v", r.Status.Phase, r.Status.Progress)
		}
		if got := trackerNames(t, s, "shop-copy"); got != "t1,t2" {
			t.Errorf("shop-copy has %q, want t1,t2", got)
		}
		wantRestored(t, getTracker(t, s, "shop-copy", "t1"), t1, "b1", "r3")
		wantRestored(t, getTracker(t, s, "shop-copy", "t2"), t2, "b1", "r3")
	})

	t.Run("label-selector-and-status", func(t *testing.T) {
		r := createRestore(t, s, "r4", velerov1.RestoreSpec{BackupName: "b1",
			LabelSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			NamespaceMapping: map[string]string{"shop": "web-only"},
			RestoreStatus:    &velerov1.RestoreStatusSpec{IncludedResources: []string{"virtualmachinebackuptrackers"}}})
		if r.Status.Phase != velerov1.RestorePhaseCompleted {
			t.Fatalf("restore r4: phase %s", r.Status.Phase)
		}
		if got := trackerNames(t, s, "web-only"); got != "t1" {
			t.Errorf("web-only has %q, want t1", got)
		}
		got := getTracker(t, s, "web-only", "t1")
		if got.Status == nil || got.Status.LatestCheckpoint == nil || got.Status.LatestCheckpoint.Name != "cp-1" || len(got.Status.LatestCheckpoint.Disks) != 1 {
			t.Errorf("status not restored with restoreStatus: %+v", got.Status)
		}
	})

	t.Run("bad-input", func(t *testing.T) {
		r := createRestore(t, s, "from-missing", velerov1.RestoreSpec{BackupName: "no-such-backup"})
		if r.Status.Phase != velerov1.RestorePhaseFailedValidation || len(r.Status.ValidationErrors) != 1 ||
			!strings.Contains(r.Status.ValidationErrors[0], `backup "no-such-backup": not found`) {
			t.Errorf("restore of a missing backup: %s %v", r.Status.Phase, r.Status.ValidationErrors)
		}
		if _, err := s.Clientset.VeleroV1().Backups(ns).Create(ctx, &velerov1.Backup{
			ObjectMeta: metav1.ObjectMeta{Name: "failed", Namespace: ns}, Spec: velerov1.BackupSpec{StorageLocation: "missing"},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitBackup(t, s, "failed", "finished", finished)
		r = createRestore(t, s, "from-failed", velerov1.RestoreSpec{BackupName: "failed"})
		if r.Status.Phase != velerov1.RestorePhaseFailedValidation || len(r.Status.ValidationErrors) != 1 ||
			!strings.Contains(r.Status.ValidationErrors[0], "only Completed or PartiallyFailed backups can be restored") {
			t.Errorf("restore of a failed backup: %s %v", r.Status.Phase, r.Status.ValidationErrors)
		}
		r = createRestore(t, s, "from-schedule", velerov1.RestoreSpec{ScheduleName: "no-such-schedule"})
		if r.Status.Phase != velerov1.RestorePhaseFailedValidation || len(r.Status.ValidationErrors) != 1 ||
			!strings.Contains(r.Status.ValidationErrors[0], "has no completed backup") {
			t.Errorf("restore from a schedule without backups: %s %v", r.Status.Phase, r.Status.ValidationErrors)
		}
		// Nothing was written by the failed restores.
		for _, name := range []string{"from-missing", "from-failed"} {
			list, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers("").List(ctx, metav1.ListOptions{LabelSelector: "velero.io/restore-name=" + name})
			if err != nil || len(list.Items) != 0 {
				t.Errorf("restore %s wrote %d items (%v)", name, len(list.Items), err)
			}
		}
	})
}

// trackersOf lists a namespace's trackers by name with their spec and
// labels (without the restore labels), as a comparable string.
func trackersOf(t *testing.T, s *framework.Server, namespace string) string {
	t.Helper()
	list, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tr := range list.Items {
		l := map[string]string{}
		for k, v := range tr.Labels {
			if k != "velero.io/backup-name" && k != "velero.io/restore-name" {
				l[k] = v
			}
		}
		spec, _ := json.Marshal(tr.Spec)
		labels, _ := json.Marshal(l)
		out = append(out, tr.Name+" "+string(spec)+" "+string(labels))
	}
	return strings.Join(out, "\n")
}

// TestRestoreIntoSecondServer: a second server given the first one's
// storage location (read-only) finds its backups there (backup sync),
// restores them, into the same namespaces and into a mapped one, with
// every object equal to the original; when the first server deletes the
// backup, the second one's Backup goes too.
func TestRestoreIntoSecondServer(t *testing.T) {
	t.Parallel()
	first := framework.Start(t, framework.Options{})
	ctx := context.Background()
	namespaces := []string{"app-a", "app-b", "app-c"}
	const perNamespace = 40
	for _, n := range namespaces {
		for i := 0; i < perNamespace; i++ {
			createTracker(t, first, n, fmt.Sprintf("t%02d", i), map[string]string{"app": n, "index": fmt.Sprint(i)})
		}
	}
	createBackup(t, first, "full", namespaces...)
	orig := waitBackup(t, first, "full", "finished", finished)
	if orig.Status.Phase != velerov1.BackupPhaseCompleted || orig.Status.Progress.ItemsBackedUp != len(namespaces)*perNamespace {
		t.Fatalf("backup full: %s %+v", orig.Status.Phase, orig.Status.Progress)
	}

	second := framework.Start(t, framework.Options{Args: []string{"--backup-sync-period=1s"}})
	// A location labelled as a tenant's is synced on the tenant's terms
	// only (names the server gives tenants' backups, into the namespace the
	// server recorded on it, here none): this one reads the same directory
	// and is Available before "first" exists, yet "full" comes from
	// "first".
	if _, err := second.Clientset.VeleroV1().BackupStorageLocations(ns).Create(ctx, &velerov1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-loc", Namespace: ns, Labels: map[string]string{oadpv1alpha1.NabslOriginNACUUIDLabel: "tenant-a-loc"}},
		Spec: velerov1.BackupStorageLocationSpec{Provider: "filesystem", AccessMode: velerov1.BackupStorageLocationAccessModeReadOnly,
			StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: filepath.Join(first.DataDir, "backups")}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitLocation(t, second, "tenant-loc", func(l *velerov1.BackupStorageLocation) bool {
		return l.Status.Phase == velerov1.BackupStorageLocationPhaseAvailable
	})
	if _, err := second.Clientset.VeleroV1().BackupStorageLocations(ns).Create(ctx, &velerov1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Name: "first", Namespace: ns},
		Spec: velerov1.BackupStorageLocationSpec{Provider: "filesystem", AccessMode: velerov1.BackupStorageLocationAccessModeReadOnly,
			StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: filepath.Join(first.DataDir, "backups")}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	synced := waitBackup(t, second, "full", "synced", func(b *velerov1.Backup) bool { return b.Status.Phase != "" })
	if synced.Status.Phase != velerov1.BackupPhaseCompleted || synced.Spec.StorageLocation != "first" ||
		synced.Labels[velerov1.StorageLocationLabel] != "first" || synced.Annotations["backstop.io/synced-from-location"] != "first" ||
		synced.Status.Progress == nil || *synced.Status.Progress != *orig.Status.Progress ||
		!synced.Status.CompletionTimestamp.Equal(orig.Status.CompletionTimestamp) {
		t.Errorf("synced backup: spec %+v labels %v annotations %v status %+v", synced.Spec, synced.Labels, synced.Annotations, synced.Status)
	}
	if logs := backupLogs(t, second, "full"); !strings.Contains(logs, "Backup completed") {
		t.Errorf("logs of the synced backup:\n%s", logs)
	}

	r := createRestore(t, second, "everything", velerov1.RestoreSpec{BackupName: "full"})
	if r.Status.Phase != velerov1.RestorePhaseCompleted || r.Status.Progress.ItemsRestored != len(namespaces)*perNamespace || r.Status.Warnings != 0 {
		t.Fatalf("restore into the second server: %s %+v warnings %d", r.Status.Phase, r.Status.Progress, r.Status.Warnings)
	}
	for _, n := range namespaces {
		want := trackersOf(t, first, n)
		if got := trackersOf(t, second, n); got != want {
			t.Errorf("namespace %s in the second server:\n%s\nwant\n%s", n, got, want)
		}
	}
	r = createRestore(t, second, "mapped", velerov1.RestoreSpec{BackupName: "full", IncludedNamespaces: []string{"app-b"},
		NamespaceMapping: map[string]string{"app-b": "app-b-copy"}})
	if r.Status.Phase != velerov1.RestorePhaseCompleted || r.Status.Progress.ItemsRestored != perNamespace {
		t.Fatalf("mapped restore: %s %+v", r.Status.Phase, r.Status.Progress)
	}
	if got, want := trackersOf(t, second, "app-b-copy"), trackersOf(t, first, "app-b"); got != want {
		t.Errorf("app-b-copy:\n%s\nwant\n%s", got, want)
	}

	// Only the server may create a Backup with a status: from a client,
	// the annotation is dropped and the backup starts as any new one.
	forged, err := second.Clientset.VeleroV1().Backups(ns).Create(ctx, &velerov1.Backup{
		ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: ns, Annotations: map[string]string{"backstop.io/synced-from-location": "first"}},
		Spec:       velerov1.BackupSpec{IncludedNamespaces: []string{"app-a"}},
		Status:     velerov1.BackupStatus{Phase: velerov1.BackupPhaseCompleted},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if forged.Status.Phase == velerov1.BackupPhaseCompleted || forged.Annotations["backstop.io/synced-from-location"] != "" {
		t.Errorf("a client created a backup with status %s and annotations %v", forged.Status.Phase, forged.Annotations)
	}

	// The first server deletes the backup: the second one's Backup goes.
	if _, err := first.Clientset.VeleroV1().DeleteBackupRequests(ns).Create(ctx, &velerov1.DeleteBackupRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "delete-full", Namespace: ns},
		Spec:       velerov1.DeleteBackupRequestSpec{BackupName: "full"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := wait.PollUntilContextCancel(pollCtx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := second.Clientset.VeleroV1().Backups(ns).Get(ctx, "full", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Errorf("the second server kept backup full after the first deleted it")
	}
}

// TestDeleteRunningRestore: deleting a running restore stops it, without
// waiting for the items it has not written yet: it ends Failed with
// velerov1.RestoreDeletedReason, its finalizer goes, and the next restore
// runs.
func TestDeleteRunningRestore(t *testing.T) {
	t.Parallel()
	const namespace, trackers = "many", 20
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	picked := map[string]string{"pick": "yes"} // the first three: what the second restore takes
	for i := range trackers {
		labels := map[string]string(nil)
		if i < 3 {
			labels = picked
		}
		createTracker(t, s, namespace, fmt.Sprintf("t%02d", i), labels)
	}
	createBackup(t, s, "b1", namespace)
	if b := waitBackup(t, s, "b1", "finished", finished); b.Status.Phase != velerov1.BackupPhaseCompleted {
		t.Fatalf("backup b1: %s %q", b.Status.Phase, b.Status.FailureReason)
	}
	trackerClient := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(namespace)
	if err := trackerClient.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	restored := func() int {
		list, err := trackerClient.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	if n := restored(); n != 0 {
		t.Fatalf("%d trackers left after deleting them all", n)
	}
	// Restores now write one item a second: a run takes tens of seconds.
	s.RestartWith([]string{"--client-qps=1", "--client-burst=1", "--restore-item-workers=1"})
	restores := s.Clientset.VeleroV1().Restores(ns)
	w, err := restores.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=r1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := restores.Create(ctx, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "r1", Namespace: ns},
		Spec: velerov1.RestoreSpec{BackupName: "b1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("deleted while it runs", func(t *testing.T) {
		deadline := time.After(2 * time.Minute)
		var failedBy string
		deleted := false
		for !deleted {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("the watch of r1 ended")
				}
				r, _ := ev.Object.(*velerov1.Restore)
				switch {
				case r == nil:
					t.Fatalf("watch event %s: %v", ev.Type, ev.Object)
				case ev.Type == "DELETED":
					deleted = true
				case r.Status.Phase == velerov1.RestorePhaseFailed:
					failedBy = r.Status.FailureReason
				case r.Status.Phase == velerov1.RestorePhaseInProgress && r.DeletionTimestamp == nil &&
					r.Status.Progress != nil && r.Status.Progress.ItemsRestored > 0:
					if err := restores.Delete(ctx, "r1", metav1.DeleteOptions{}); err != nil {
						t.Fatalf("deleting r1: %v", err)
					}
				case r.Status.Phase.Terminal():
					t.Fatalf("r1 ended %s (%q) before it could be deleted while running", r.Status.Phase, r.Status.FailureReason)
				}
			case <-deadline:
				t.Fatal("r1 was not deleted within 2 minutes")
			}
		}
		if failedBy != velerov1.RestoreDeletedReason {
			t.Errorf("r1 ended with failure reason %q, want %q", failedBy, velerov1.RestoreDeletedReason)
		}
		// Gone before its run could have written every item.
		if n := restored(); n == 0 || n >= trackers {
			t.Errorf("%d of %d trackers restored when r1 was gone: want some, not all", n, trackers)
		}
	})

	t.Run("the next restore runs", func(t *testing.T) {
		r := createRestore(t, s, "r2", velerov1.RestoreSpec{BackupName: "b1", LabelSelector: &metav1.LabelSelector{MatchLabels: picked}})
		if r.Status.Phase != velerov1.RestorePhaseCompleted {
			t.Fatalf("r2: %s %q", r.Status.Phase, r.Status.FailureReason)
		}
		list, err := trackerClient.List(ctx, metav1.ListOptions{LabelSelector: "pick=yes"})
		if err != nil || len(list.Items) != 3 {
			t.Errorf("trackers labelled pick=yes after r2: %d, %v; want 3", len(list.Items), err)
		}
	})
}
