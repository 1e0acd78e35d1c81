package queue

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
)

// The reference: Velero v1.18's backupQueueReconciler decision for one
// queued backup (pkg/controller/backup_queue_controller.go,
// detectNSConflictsInternal and checkForEarlierRunnableBackups), ported to
// plain data so both run on the same input in the same process. Velero
// reconciles queued backups one at a time, each reconcile comparing the
// backup with every earlier one and every earlier queued one with every
// earlier one again.
type refBackup struct {
	name       string
	queued     bool
	position   int
	namespaces []string
}

func refConflict(b refBackup, earlier []refBackup) bool {
	ns := sets.NewString(b.namespaces...)
	for _, e := range earlier {
		if e.queued && e.position >= b.position {
			continue
		}
		if ns.HasAny(e.namespaces...) {
			return true
		}
	}
	return false
}

func refEarlierRunnable(b refBackup, earlier []refBackup) bool {
	for _, e := range earlier {
		if !e.queued || e.position >= b.position {
			continue
		}
		if !refConflict(e, earlier) {
			return true
		}
	}
	return false
}

// refRunnable is Velero's answer to "may this queued backup start now".
func refRunnable(b refBackup, earlier []refBackup) bool {
	return !refConflict(b, earlier) && !refEarlierRunnable(b, earlier)
}

// TestReferenceAgrees: on the design document's scenario the reference and
// Runnable pick the same backup.
func TestReferenceAgrees(t *testing.T) {
	backups := []refBackup{
		{name: "backup1", namespaces: []string{"ns1", "ns2"}},
		{name: "backup2", queued: true, position: 1, namespaces: []string{"ns2", "ns3", "ns5"}},
		{name: "backup3", queued: true, position: 2, namespaces: []string{"ns4", "ns3"}},
		{name: "backup4", queued: true, position: 3, namespaces: []string{"ns5", "ns6"}},
		{name: "backup5", queued: true, position: 4, namespaces: []string{"ns8", "ns9"}},
	}
	var refPicks []string
	for _, b := range backups[1:] {
		if refRunnable(b, backups[:1+b.position-1]) {
			refPicks = append(refPicks, b.name)
		}
	}
	in := NewInterner()
	var queued []Entry
	for _, b := range backups[1:] {
		queued = append(queued, in.Entry(b.name, b.namespaces))
	}
	got := Runnable(in, []Entry{in.Entry("backup1", backups[0].namespaces)}, queued, 2)
	if fmt.Sprint(got) != fmt.Sprint(refPicks) || fmt.Sprint(got) != "[backup5]" {
		t.Errorf("Runnable %v, reference %v, want [backup5]", got, refPicks)
	}
}

// BenchmarkReferenceRunnable: the reference deciding on the last of 10k
// queued backups, the input of BenchmarkRunnable.
func BenchmarkReferenceRunnable(b *testing.B) {
	backups := []refBackup{{name: "running", namespaces: []string{"shared"}}}
	for i := 0; i < 10000; i++ {
		backups = append(backups, refBackup{name: fmt.Sprintf("q%05d", i), queued: true, position: i + 1,
			namespaces: []string{"shared", fmt.Sprintf("ns%05d", i)}})
	}
	backups[len(backups)-1].namespaces = []string{"free"}
	last := backups[len(backups)-1]
	for b.Loop() {
		if !refRunnable(last, backups[:len(backups)-1]) {
			b.Fatal("reference: the last backup is not runnable")
		}
	}
}
