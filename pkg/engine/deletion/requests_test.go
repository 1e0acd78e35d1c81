package deletion

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

// TestRequestsWaitingFor: a backup that stops running wakes the requests
// not yet processed that ask for its deletion, and only those; a running
// backup wakes none.
func TestRequestsWaitingFor(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{byBackup: requestBackup})
	for _, r := range []*velerov1.DeleteBackupRequest{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "waiting"}, Spec: velerov1.DeleteBackupRequestSpec{BackupName: "b"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "in-progress"}, Spec: velerov1.DeleteBackupRequestSpec{BackupName: "b"},
			Status: velerov1.DeleteBackupRequestStatus{Phase: velerov1.DeleteBackupRequestPhaseInProgress}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "processed"}, Spec: velerov1.DeleteBackupRequestSpec{BackupName: "b"},
			Status: velerov1.DeleteBackupRequestStatus{Phase: velerov1.DeleteBackupRequestPhaseProcessed}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other-backup"}, Spec: velerov1.DeleteBackupRequestSpec{BackupName: "c"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "other-namespace"}, Spec: velerov1.DeleteBackupRequestSpec{BackupName: "b"}},
	} {
		if err := indexer.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	c := &Controller{byBackup: indexer}
	backup := func(phase velerov1.BackupPhase) *velerov1.Backup {
		return &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}, Status: velerov1.BackupStatus{Phase: phase}}
	}
	if keys := c.requestsWaitingFor(backup(velerov1.BackupPhaseInProgress)); len(keys) != 0 {
		t.Errorf("a running backup woke %v", keys)
	}
	var names []string
	for _, k := range c.requestsWaitingFor(backup(velerov1.BackupPhaseFailed)) {
		names = append(names, k.String())
	}
	slices.Sort(names)
	if want := []string{"ns/in-progress", "ns/waiting"}; !slices.Equal(names, want) {
		t.Errorf("a stopped backup woke %v, want %v", names, want)
	}
}
