package gc

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned/fake"
	"github.com/backstop-io/backstop/pkg/generated/informers/externalversions"
)

// TestRetention: which of a schedule's backups keep-last deletes, and
// which expired one is kept while the runs after it failed.
func TestRetention(t *testing.T) {
	const ns = "backstop-system"
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		keepLast string
		phases   []velerov1.BackupPhase // oldest first
		beyond   []bool                 // keep-last deletes it
		kept     []bool                 // kept past its TTL
	}{
		{"no policy", "", []velerov1.BackupPhase{"Completed", "Completed", "Completed"},
			[]bool{false, false, false}, []bool{false, false, false}},
		{"keep the last 2", "2", []velerov1.BackupPhase{"Completed", "Completed", "Completed", "Completed"},
			[]bool{true, true, false, false}, []bool{false, false, false, false}},
		{"keep the last 2, failed runs do not count", "2", []velerov1.BackupPhase{"Completed", "Failed", "Completed", "PartiallyFailed", "Completed"},
			[]bool{true, false, false, false, false}, []bool{false, false, false, false, false}},
		{"the last good one while later runs fail", "", []velerov1.BackupPhase{"Completed", "Completed", "Failed", "PartiallyFailed"},
			[]bool{false, false, false, false}, []bool{false, true, false, false}},
		{"a later run still going", "", []velerov1.BackupPhase{"Completed", "InProgress"},
			[]bool{false, false}, []bool{false, false}},
		{"keep the last 1 while later runs fail", "1", []velerov1.BackupPhase{"Completed", "Completed", "Failed"},
			[]bool{true, false, false}, []bool{false, true, false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := fake.NewSimpleClientset()
			factory := externalversions.NewSharedInformerFactory(client, 0).Velero().V1()
			sched := &velerov1.Schedule{ObjectMeta: metav1.ObjectMeta{Name: "daily", Namespace: ns}}
			if c.keepLast != "" {
				sched.Annotations = map[string]string{velerov1.KeepLastAnnotation: c.keepLast}
			}
			if err := factory.Schedules().Informer().GetIndexer().Add(sched); err != nil {
				t.Fatal(err)
			}
			var backups []*velerov1.Backup
			for i, phase := range c.phases {
				b := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("daily-%d", i), Namespace: ns, UID: types.UID(fmt.Sprint(i)),
					CreationTimestamp: metav1.NewTime(start.Add(time.Duration(i) * time.Hour)), Labels: map[string]string{velerov1.ScheduleNameLabel: "daily"}},
					Status: velerov1.BackupStatus{Phase: phase}}
				if err := factory.Backups().Informer().GetIndexer().Add(b); err != nil {
					t.Fatal(err)
				}
				backups = append(backups, b)
			}
			gc, err := New(client, Informers{Backups: factory.Backups(), Requests: factory.DeleteBackupRequests(),
				Locations: factory.BackupStorageLocations(), Schedules: factory.Schedules()}, clocktesting.NewFakeClock(start))
			if err != nil {
				t.Fatal(err)
			}
			for i, b := range backups {
				siblings := gc.siblings(b)
				if beyond, _ := gc.beyondKeepLast(b, siblings); beyond != c.beyond[i] {
					t.Errorf("%s (%s): keep-last deletes it: %v, want %v", b.Name, b.Status.Phase, beyond, c.beyond[i])
				}
				if kept := keptPastTTL(b, siblings) != ""; kept != c.kept[i] {
					t.Errorf("%s (%s): kept past its TTL: %v, want %v", b.Name, b.Status.Phase, kept, c.kept[i])
				}
			}
		})
	}
}

// TestLockedBackupsWait: a backup locked in its storage location (S3
// object lock) is not asked to be deleted before its lock's date, beyond
// its schedule's keep-last or expired; after it, it is.
func TestLockedBackupsWait(t *testing.T) {
	const ns = "backstop-system"
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	expiration := metav1.NewTime(now.Add(-time.Second)) // expired, within the store's clock skew
	newer := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "daily-1", Namespace: ns, UID: "1", CreationTimestamp: metav1.NewTime(now),
		Labels: map[string]string{velerov1.ScheduleNameLabel: "daily"}}, Status: velerov1.BackupStatus{Phase: velerov1.BackupPhaseCompleted}}
	locked := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "daily-0", Namespace: ns, UID: "0", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
		Labels: map[string]string{velerov1.ScheduleNameLabel: "daily"}},
		Status: velerov1.BackupStatus{Phase: velerov1.BackupPhaseCompleted, Expiration: &expiration,
			Conditions: []metav1.Condition{{Type: velerov1.BackupConditionLocked, Status: metav1.ConditionTrue, Reason: velerov1.ObjectLockGovernance}}}}
	sched := &velerov1.Schedule{ObjectMeta: metav1.ObjectMeta{Name: "daily", Namespace: ns, Annotations: map[string]string{velerov1.KeepLastAnnotation: "1"}}}
	client := fake.NewSimpleClientset(locked, newer, sched)
	factory := externalversions.NewSharedInformerFactory(client, 0).Velero().V1()
	for _, obj := range []any{locked, newer} {
		if err := factory.Backups().Informer().GetIndexer().Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	if err := factory.Schedules().Informer().GetIndexer().Add(sched); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(now)
	gc, err := New(client, Informers{Backups: factory.Backups(), Requests: factory.DeleteBackupRequests(),
		Locations: factory.BackupStorageLocations(), Schedules: factory.Schedules()}, clk)
	if err != nil {
		t.Fatal(err)
	}
	requests := func() int {
		list, err := client.VeleroV1().DeleteBackupRequests(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	key := cache.ObjectName{Namespace: ns, Name: locked.Name}
	if err := gc.sync(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if n := requests(); n != 0 {
		t.Errorf("before its lock's date (and the skew): %d deletion requests, want none", n)
	}
	clk.Step(velerov1.ObjectLockSkew)
	if err := gc.sync(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if n := requests(); n != 1 {
		t.Errorf("after its lock's date: %d deletion requests, want 1", n)
	}
}
