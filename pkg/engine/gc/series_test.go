package gc

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	kvbackupv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/enginetest"
	"github.com/backstop-io/backstop/pkg/engine/vmoperation"
)

// TestSyncSeries: a deleted schedule's series trackers stay while a
// backup of it remains and go after its last, for a schedule whose name is
// longer than a label value too (its labels hold velerov1.LabelValue).
func TestSyncSeries(t *testing.T) {
	const ns = "backstop-system"
	for _, schedule := range []string{"daily", "daily-" + strings.Repeat("long-", 14) + "name"} {
		for _, backupLeft := range []bool{true, false} {
			name := schedule[:5]
			if len(schedule) > 63 {
				name += " (long name)"
			}
			if backupLeft {
				name += ", a backup left"
			}
			t.Run(name, func(t *testing.T) {
				label := velerov1.LabelValue(schedule)
				tracker := &kvbackupv1alpha1.VirtualMachineBackupTracker{ObjectMeta: metav1.ObjectMeta{Name: "t1", Namespace: "vms",
					Labels: map[string]string{velerov1.ScheduleNameLabel: label, vmoperation.SeriesLabel: label}}}
				objs := []runtime.Object{tracker}
				if backupLeft {
					objs = append(objs, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "b1", Namespace: ns,
						Labels: map[string]string{velerov1.ScheduleNameLabel: label}}})
				}
				w := enginetest.New(t, objs...)
				client, factory := w.Client, w.Factory
				v := factory.Velero().V1()
				gc, err := New(client, Informers{Backups: v.Backups(), Requests: v.DeleteBackupRequests(), Locations: v.BackupStorageLocations(),
					Schedules: v.Schedules(), Trackers: factory.Backup().V1alpha1().VirtualMachineBackupTrackers(), AdminNamespace: ns},
					clocktesting.NewFakeClock(time.Now()))
				if err != nil {
					t.Fatal(err)
				}
				if err := gc.syncSeries(context.Background(), cache.ObjectName{Namespace: ns, Name: schedule}); err != nil {
					t.Fatal(err)
				}
				_, err = client.BackupV1alpha1().VirtualMachineBackupTrackers("vms").Get(context.Background(), "t1", metav1.GetOptions{})
				if gone := err != nil; gone == backupLeft {
					t.Errorf("the series' tracker gone: %v (%v), want %v", gone, err, !backupLeft)
				}
			})
		}
	}
}
