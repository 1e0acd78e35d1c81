package metrics

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	oadplisters "github.com/backstop-io/backstop/pkg/generated/listers/oadp/v1alpha1"
	velerolisters "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
)

// InitSchedule makes the series of a schedule ("" for backups of none)
// exist, as Velero's InitSchedule does: the counters and item gauges at
// 0 (a first failure then shows as an increase), the CSI snapshot
// counters with an empty backup name, and the last status at 1; and
// Backstop's verification counters, each result's at 0 (a first Corrupt
// is an increase: BackstopBackupCorrupt).
func (r *Recorder) InitSchedule(schedule string) {
	for _, c := range r.scheduleCounters() {
		c.WithLabelValues(schedule).Add(0)
	}
	for _, result := range verificationResults {
		r.verification.WithLabelValues(schedule, result).Add(0)
	}
	for _, c := range []*metrics.CounterVec{r.csiAttempt, r.csiSuccess, r.csiFailure} {
		c.WithLabelValues(schedule, "").Add(0)
	}
	r.backupItems.WithLabelValues(schedule).Add(0)
	r.backupItemErrors.WithLabelValues(schedule).Add(0)
	r.backupLastStatus.WithLabelValues(schedule).Set(1)
}

// verificationResults are the outcomes a verification counts under
// (backstop_backup_verification_total's result: its Verified condition's
// reason).
var verificationResults = []string{velerov1.VerificationPassedReason, velerov1.VerificationCorruptReason,
	velerov1.VerificationNoDataReason, velerov1.VerificationNoManifestReason, velerov1.VerificationUnreadableReason}

// scheduleCounters are the counters of a schedule alone (label
// schedule), which InitSchedule makes and RemoveSchedule deletes.
func (r *Recorder) scheduleCounters() []*metrics.CounterVec {
	return []*metrics.CounterVec{r.backupAttempt, r.backupSuccess, r.backupPartialFailure, r.backupFailure,
		r.backupValidationFailure, r.backupWarnings, r.deletionAttempt, r.deletionSuccess, r.deletionFailure,
		r.restoreAttempt, r.restorePartialFailure, r.restoreFailed, r.restoreSuccess, r.restoreValidationFailed,
		r.volumeSnapshotAttempt, r.volumeSnapshotSuccess, r.volumeSnapshotFailure, r.verificationBytes, r.verificationProblems}
}

// RemoveSchedule deletes the series of a schedule that is gone, as
// Velero's RemoveSchedule does.
func (r *Recorder) RemoveSchedule(schedule string) {
	for _, c := range r.scheduleCounters() {
		c.DeleteLabelValues(schedule)
	}
	for _, c := range []*metrics.CounterVec{r.csiAttempt, r.csiSuccess, r.csiFailure} {
		c.DeleteLabelValues(schedule, "")
	}
	for _, result := range verificationResults {
		r.verification.DeleteLabelValues(schedule, result)
	}
	r.verificationDuration.DeleteLabelValues(schedule)
	for _, g := range []*metrics.GaugeVec{r.backupItems, r.backupItemErrors, r.backupLastStatus, r.backupLastSuccess, r.backupTarballSize} {
		g.DeleteLabelValues(schedule)
	}
	r.backupDuration.DeleteLabelValues(schedule)
}

// Name is the Resyncer's name among the engines (--disable-controllers).
const Name = "metrics"

// Objects are the listers a Resyncer reads.
type Objects struct {
	// Namespace is the admin namespace.
	Namespace string
	Backups   velerolisters.BackupLister
	Restores  velerolisters.RestoreLister
	Schedules velerolisters.ScheduleLister
	Locations velerolisters.BackupStorageLocationLister
	// The tenants' objects, of every namespace.
	NonAdminBackups  oadplisters.NonAdminBackupLister
	NonAdminRestores oadplisters.NonAdminRestoreLister
	// Synced are the listers' informers' HasSynced.
	Synced []cache.InformerSynced
}

// ResyncInterval is how often a Resyncer reads the objects (Velero: a
// minute for its totals).
const ResyncInterval = 30 * time.Second

// Resyncer sets, from the objects, the series that are not counted: the
// schedules' series (made at 0 for each schedule, removed with it), the
// numbers of backups and restores, each location's status, each
// schedule's last successful backup (also after a restart or a takeover,
// as Velero recomputes it), the queues and the tenants' objects by phase.
// It runs with the engines of a term: the leader's.
type Resyncer struct {
	recorder *Recorder
	objects  Objects
	clock    clock.PassiveClock
	// schedules and locations are those with series, to remove the
	// series of those gone.
	schedules, locations sets.Set[string]
	// poked asks for a resync before the next interval.
	poked chan struct{}
}

// NewResyncer returns a Resyncer of r over objects.
func NewResyncer(r *Recorder, objects Objects, clock clock.PassiveClock) *Resyncer {
	return &Resyncer{recorder: r, objects: objects, clock: clock, schedules: sets.New[string](), locations: sets.New[string](),
		poked: make(chan struct{}, 1)}
}

// Poke asks for a resync at once (a schedule or a location came or
// went: its series follow without waiting for the interval).
func (s *Resyncer) Poke() {
	select {
	case s.poked <- struct{}{}:
	default:
	}
}

// OnChange is an event handler that pokes the Resyncer on every add and
// delete, for the informers of the listers it reads.
func (s *Resyncer) OnChange() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{AddFunc: func(any) { s.Poke() }, DeleteFunc: func(any) { s.Poke() }}
}

// Run resyncs every ResyncInterval and when poked until ctx is done, the
// first time once the listers have synced.
func (s *Resyncer) Run(ctx context.Context, _ int) {
	if !cache.WaitForCacheSync(ctx.Done(), s.objects.Synced...) {
		return
	}
	tick := time.NewTicker(ResyncInterval)
	defer tick.Stop()
	for {
		if err := s.Resync(); err != nil {
			klog.ErrorS(err, "Reading the objects for the metrics")
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-s.poked:
		}
	}
}

// Resync sets the series once.
func (s *Resyncer) Resync() error {
	r, o := s.recorder, s.objects
	now := s.clock.Now()

	schedules, err := o.Schedules.Schedules(o.Namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	current := sets.New("")
	for _, sch := range schedules {
		current.Insert(sch.Name)
	}
	for name := range current {
		r.InitSchedule(name)
	}
	for name := range s.schedules.Difference(current) {
		r.RemoveSchedule(name)
	}
	s.schedules = current

	backups, err := o.Backups.Backups(o.Namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	r.backupTotal.Set(float64(len(backups)))
	lastSuccess := map[string]time.Time{}
	waiting, oldest := 0, time.Duration(0)
	for _, b := range backups {
		schedule := b.Labels[velerov1.ScheduleNameLabel]
		if b.Status.Phase == velerov1.BackupPhaseCompleted && b.Status.CompletionTimestamp != nil &&
			b.Status.CompletionTimestamp.After(lastSuccess[schedule]) {
			lastSuccess[schedule] = b.Status.CompletionTimestamp.Time
		}
		if b.Status.Phase.Pending() && b.DeletionTimestamp == nil {
			waiting++
			oldest = max(oldest, now.Sub(b.CreationTimestamp.Time))
		}
	}
	for schedule, at := range lastSuccess {
		r.backupLastSuccess.WithLabelValues(schedule).Set(float64(at.Unix()))
	}
	r.backupQueueLength.Set(float64(waiting))
	r.backupQueueOldest.Set(oldest.Seconds())

	restores, err := o.Restores.Restores(o.Namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	r.restoreTotal.Set(float64(len(restores)))
	waiting, oldest = 0, 0
	for _, rs := range restores {
		if (rs.Status.Phase == "" || rs.Status.Phase == velerov1.RestorePhaseNew) && rs.DeletionTimestamp == nil {
			waiting++
			oldest = max(oldest, now.Sub(rs.CreationTimestamp.Time))
		}
	}
	r.restoreQueueLength.Set(float64(waiting))
	r.restoreQueueOldest.Set(oldest.Seconds())

	locations, err := o.Locations.BackupStorageLocations(o.Namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	seen := sets.New[string]()
	for _, l := range locations {
		seen.Insert(l.Name)
		available := 0.0
		if l.Status.Phase == velerov1.BackupStorageLocationPhaseAvailable {
			available = 1
		}
		r.locationStatus.WithLabelValues(l.Name).Set(available)
	}
	for name := range s.locations.Difference(seen) {
		r.locationStatus.DeleteLabelValues(name)
	}
	s.locations = seen

	nabs, err := o.NonAdminBackups.List(labels.Everything())
	if err != nil {
		return err
	}
	r.nonAdminBackups.Reset()
	for _, b := range nabs {
		r.nonAdminBackups.WithLabelValues(b.Namespace, string(b.Status.Phase)).Inc()
	}
	nars, err := o.NonAdminRestores.List(labels.Everything())
	if err != nil {
		return err
	}
	r.nonAdminRestores.Reset()
	for _, rs := range nars {
		r.nonAdminRestores.WithLabelValues(rs.Namespace, string(rs.Status.Phase)).Inc()
	}
	return nil
}
