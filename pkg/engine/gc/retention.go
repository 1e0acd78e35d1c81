package gc

import (
	"sort"
	"strconv"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

// KeptLastCompleted is the reason a schedule's newest Completed backup is
// kept past its TTL: the runs after it failed.
const KeptLastCompleted = "LastCompleted"

// siblings are the backups of b's schedule, oldest first (by creation,
// then name); nil when b belongs to no schedule.
func (c *Controller) siblings(b *velerov1.Backup) []*velerov1.Backup {
	schedule := b.Labels[velerov1.ScheduleNameLabel]
	if schedule == "" {
		return nil
	}
	all, err := c.backups.Backups(b.Namespace).List(labels.SelectorFromSet(labels.Set{velerov1.ScheduleNameLabel: schedule}))
	if err != nil {
		return nil
	}
	sort.Slice(all, func(i, j int) bool {
		ti, tj := all[i].CreationTimestamp, all[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return all[i].Name < all[j].Name
	})
	return all
}

// completed are the Completed backups among backups, not being deleted.
func completed(backups []*velerov1.Backup) []*velerov1.Backup {
	var out []*velerov1.Backup
	for _, b := range backups {
		if b.Status.Phase == velerov1.BackupPhaseCompleted && b.DeletionTimestamp == nil {
			out = append(out, b)
		}
	}
	return out
}

// beyondKeepLast reports whether b is a Completed backup of a schedule
// that keeps its newest n Completed ones, and older than those; all are
// the schedule's backups (siblings).
func (c *Controller) beyondKeepLast(b *velerov1.Backup, all []*velerov1.Backup) (bool, int) {
	if b.Status.Phase != velerov1.BackupPhaseCompleted {
		return false, 0
	}
	schedule := b.Labels[velerov1.ScheduleNameLabel]
	if schedule == "" {
		return false, 0
	}
	s, err := c.schedules.Schedules(b.Namespace).Get(schedule)
	if err != nil {
		return false, 0
	}
	n, err := strconv.Atoi(s.Annotations[velerov1.KeepLastAnnotation])
	if err != nil || n <= 0 {
		return false, 0
	}
	done := completed(all)
	for i, o := range done {
		if o.UID == b.UID {
			return len(done)-i > n, n
		}
	}
	return false, n
}

// keptPastTTL says why an expired backup is not deleted ("" to delete
// it): a schedule's newest Completed backup is kept while the runs after
// it failed; all are the schedule's backups (siblings).
func keptPastTTL(b *velerov1.Backup, all []*velerov1.Backup) string {
	if b.Status.Phase != velerov1.BackupPhaseCompleted {
		return ""
	}
	done := completed(all)
	if len(done) == 0 || done[len(done)-1].UID != b.UID {
		return "" // not the newest Completed one
	}
	failedAfter := false
	for _, o := range all {
		if o.CreationTimestamp.Before(&b.CreationTimestamp) || o.UID == b.UID {
			continue
		}
		if o.Status.Phase.Terminal() && o.Status.Phase != velerov1.BackupPhaseCompleted {
			failedAfter = true
		}
	}
	if !failedAfter {
		return ""
	}
	return KeptLastCompleted
}

// resyncSiblings looks at the older Completed backups of b's schedule
// (all, its siblings) again when b is its newest Completed one: keep-last
// may now delete them, and one kept past its TTL may now go.
func (c *Controller) resyncSiblings(b *velerov1.Backup, all []*velerov1.Backup) {
	if b.Status.Phase != velerov1.BackupPhaseCompleted {
		return
	}
	done := completed(all)
	if len(done) == 0 || done[len(done)-1].UID != b.UID {
		return
	}
	for _, o := range done[:len(done)-1] {
		c.Add(cache.ObjectName{Namespace: o.Namespace, Name: o.Name})
	}
}
