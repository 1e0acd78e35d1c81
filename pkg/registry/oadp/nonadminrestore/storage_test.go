package nonadminrestore

import (
	"context"
	"testing"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
)

// TestRestoreQueueFillLeavesTheCacheAlone: a list from the watch cache is a
// shallow copy of the cached objects; filling in the queue positions of
// its items must not change the cached objects they point into.
func TestRestoreQueueFillLeavesTheCacheAlone(t *testing.T) {
	cached := oadp.NonAdminRestore{Status: oadp.NonAdminRestoreStatus{
		VeleroRestore: &oadp.VeleroRestore{Name: "r"},
		QueueInfo:     &oadp.QueueInfo{},
	}}
	list := &oadp.NonAdminRestoreList{Items: []oadp.NonAdminRestore{cached}}
	queueFill(func(string) int { return 4 })(list)
	if got := list.Items[0].Status.QueueInfo.EstimatedQueuePosition; got != 4 {
		t.Errorf("the list's item has position %d, want 4", got)
	}
	if got := cached.Status.QueueInfo.EstimatedQueuePosition; got != 0 {
		t.Errorf("the cached object was given position %d: the fill changed what the list shares with the cache", got)
	}
}

// TestRestoreStatusStoresNoQueuePosition: a status written with its position
// filled in (a copy as read) is stored without it.
func TestRestoreStatusStoresNoQueuePosition(t *testing.T) {
	st := NewStatusStrategy(NewStrategy(nil, nil, nil).Strategy)
	old := &oadp.NonAdminRestore{Status: oadp.NonAdminRestoreStatus{QueueInfo: &oadp.QueueInfo{}}}
	obj := &oadp.NonAdminRestore{Status: oadp.NonAdminRestoreStatus{QueueInfo: &oadp.QueueInfo{EstimatedQueuePosition: 3}}}
	st.PrepareForUpdate(context.Background(), obj, old)
	if got := obj.Status.QueueInfo.EstimatedQueuePosition; got != 0 {
		t.Errorf("stored position %d, want none", got)
	}
}

// TestRestoreQueueFilled: queueFilled tells exactly the served objects
// queueFill gave a position (lists encode them instead of writing their
// stored bytes).
func TestRestoreQueueFilled(t *testing.T) {
	for _, position := range []int{0, 1, 7} {
		nar := &oadp.NonAdminRestore{Status: oadp.NonAdminRestoreStatus{VeleroRestore: &oadp.VeleroRestore{Name: "r"}, QueueInfo: &oadp.QueueInfo{}}}
		queueFill(func(string) int { return position })(nar)
		served := &oadpv1alpha1.NonAdminRestore{}
		if err := oadpv1alpha1.Convert_oadp_NonAdminRestore_To_v1alpha1_NonAdminRestore(nar, served, nil); err != nil {
			t.Fatal(err)
		}
		if got := queueFilled(served); got != (position != 0) {
			t.Errorf("position %d: filled %v", position, got)
		}
	}
	if queueFilled(&oadpv1alpha1.NonAdminRestore{}) {
		t.Error("a NonAdminRestore without queueInfo is filled")
	}
}
