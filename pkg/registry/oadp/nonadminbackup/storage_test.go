package nonadminbackup

import (
	"context"
	"testing"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	"github.com/backstop-io/backstop/pkg/apis/velero"
)

// TestBackupQueueFillLeavesTheCacheAlone: a list from the watch cache is a
// shallow copy of the cached objects; filling in the queue positions of
// its items must not change the cached objects they point into.
func TestBackupQueueFillLeavesTheCacheAlone(t *testing.T) {
	cached := oadp.NonAdminBackup{Status: oadp.NonAdminBackupStatus{
		VeleroBackup: &oadp.VeleroBackup{Name: "b", Status: &velero.BackupStatus{}},
		QueueInfo:    &oadp.QueueInfo{},
	}}
	list := &oadp.NonAdminBackupList{Items: []oadp.NonAdminBackup{cached}}
	queueFill(func(string) int { return 4 })(list)
	item := list.Items[0].Status
	if item.QueueInfo.EstimatedQueuePosition != 4 || item.VeleroBackup.Status.QueuePosition != 4 {
		t.Errorf("the list's item has positions %d and %d, want 4", item.QueueInfo.EstimatedQueuePosition, item.VeleroBackup.Status.QueuePosition)
	}
	if cached.Status.QueueInfo.EstimatedQueuePosition != 0 || cached.Status.VeleroBackup.Status.QueuePosition != 0 {
		t.Errorf("the cached object was given positions %d and %d: the fill changed what the list shares with the cache",
			cached.Status.QueueInfo.EstimatedQueuePosition, cached.Status.VeleroBackup.Status.QueuePosition)
	}
}

// TestBackupStatusStoresNoQueuePosition: a status written with its positions
// filled in (a copy as read) is stored without them.
func TestBackupStatusStoresNoQueuePosition(t *testing.T) {
	st := NewStatusStrategy(NewStrategy(nil, nil, nil).Strategy)
	old := &oadp.NonAdminBackup{Status: oadp.NonAdminBackupStatus{QueueInfo: &oadp.QueueInfo{}}}
	obj := &oadp.NonAdminBackup{Status: oadp.NonAdminBackupStatus{QueueInfo: &oadp.QueueInfo{EstimatedQueuePosition: 3},
		VeleroBackup: &oadp.VeleroBackup{Name: "b", Status: &velero.BackupStatus{QueuePosition: 3}}}}
	st.PrepareForUpdate(context.Background(), obj, old)
	if obj.Status.QueueInfo.EstimatedQueuePosition != 0 || obj.Status.VeleroBackup.Status.QueuePosition != 0 {
		t.Errorf("stored positions %d and %d, want none", obj.Status.QueueInfo.EstimatedQueuePosition, obj.Status.VeleroBackup.Status.QueuePosition)
	}
}

// TestBackupQueueFilled: queueFilled tells exactly the served objects
// queueFill gave a position (lists encode them instead of writing their
// stored bytes).
func TestBackupQueueFilled(t *testing.T) {
	for _, position := range []int{0, 1, 7} {
		nab := &oadp.NonAdminBackup{Status: oadp.NonAdminBackupStatus{
			VeleroBackup: &oadp.VeleroBackup{Name: "b", Status: &velero.BackupStatus{}},
			QueueInfo:    &oadp.QueueInfo{},
		}}
		queueFill(func(string) int { return position })(nab)
		served := &oadpv1alpha1.NonAdminBackup{}
		if err := oadpv1alpha1.Convert_oadp_NonAdminBackup_To_v1alpha1_NonAdminBackup(nab, served, nil); err != nil {
			t.Fatal(err)
		}
		if got := queueFilled(served); got != (position != 0) {
			t.Errorf("position %d: filled %v", position, got)
		}
	}
	if queueFilled(&oadpv1alpha1.NonAdminBackup{}) {
		t.Error("a NonAdminBackup without queueInfo is filled")
	}
}
