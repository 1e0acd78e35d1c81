// Package verify is the backup-verification engine: it verifies a backup
// without restoring it, on request (the backstop.io/verify annotation) and
// on its storage location's schedule (verifyEvery): every object of the
// backup read back and checked against its manifest, the tarball's items
// decoded, the VM disk chains checked (objects.go, chains.go); the outcome
// goes into the backup's status (status.verification, the Verified
// condition) in one write, and into metrics. The decision of what a
// backup needs (decide) is apart from the work, and tested alone.
package verify

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	veleroinformers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v1"
	velerolisters "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// Recorder counts verifications (backstop_backup_verification_*).
type Recorder interface {
	Verification(schedule, result string, took time.Duration, bytes int64, problems int)
}

// Config is what the engine needs.
type Config struct {
	Client    versioned.Interface
	Backups   veleroinformers.BackupInformer
	Locations veleroinformers.BackupStorageLocationInformer
	Opener    objectstore.Opener
	Clock     clock.Clock
	// VolumeRoot is where VM backups' files are ("" for none).
	VolumeRoot string
	Metrics    Recorder
	Observers  []status.Observer
}

// Controller is the engine.
type Controller struct {
	cfg       Config
	loop      *reconcile.Loop
	backups   velerolisters.BackupLister
	locations velerolisters.BackupStorageLocationLister
	status    status.Writer
}

// New returns the engine.
func New(cfg Config) (*Controller, error) {
	c := &Controller{cfg: cfg, backups: cfg.Backups.Lister(), locations: cfg.Locations.Lister(),
		status: status.Writer{Engine: velerov1.EngineVerification, Observers: cfg.Observers}}
	c.loop = reconcile.NewLoop(velerov1.EngineVerification, c.sync)
	if err := c.loop.Watch(cfg.Backups.Informer()); err != nil {
		return nil, err
	}
	// A location's verifyEvery changing changes what its backups need.
	if err := c.loop.WatchMapped(cfg.Locations.Informer(), c.backupsOf); err != nil {
		return nil, err
	}
	return c, nil
}

// Run runs the engine until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) { c.loop.Run(ctx, workers) }

func (c *Controller) backupsOf(obj any) []cache.ObjectName {
	l, ok := obj.(*velerov1.BackupStorageLocation)
	if !ok {
		return nil
	}
	list, err := c.backups.Backups(l.Namespace).List(labels.SelectorFromSet(labels.Set{velerov1.StorageLocationLabel: l.Name}))
	if err != nil {
		return nil
	}
	keys := make([]cache.ObjectName, 0, len(list))
	for _, b := range list {
		keys = append(keys, cache.ObjectName{Namespace: b.Namespace, Name: b.Name})
	}
	return keys
}

// action is what a backup needs now.
type action int

const (
	// wait: nothing now (after, if set, is when to look again).
	wait action = iota
	// verify the backup.
	verify
	// noData: answer the request: the backup has no data to verify.
	noData
)

// decision is decide's answer.
type decision struct {
	action action
	// request is the request answered (the annotation's value; the last
	// one answered, for a scheduled verification).
	request string
	// after is when to look again (wait only; 0: when the backup
	// changes).
	after time.Duration
}

// decide says what backup b needs at now, given its location's
// verification period (0: none). A request (an annotation value not yet
// answered) is answered once the backup has ended: verified when it holds
// data, "nothing to verify" when it failed. A location's period verifies
// each backup holding data once it ends, and again that long after its
// last verification ended.
func decide(b *velerov1.Backup, period time.Duration, now time.Time) decision {
	phase := velerov1.BackupPhase(b.Status.Phase)
	if b.DeletionTimestamp != nil || phase == velerov1.BackupPhaseDeleting || !phase.Terminal() {
		return decision{action: wait}
	}
	last := b.Status.Verification
	answered := ""
	if last != nil {
		answered = last.Request
	}
	request, requested := b.Annotations[velerov1.VerifyAnnotation]
	requested = requested && request != "" && request != answered
	if !phase.Restorable() {
		if requested {
			return decision{action: noData, request: request}
		}
		return decision{action: wait}
	}
	if requested {
		return decision{action: verify, request: request}
	}
	if period <= 0 {
		return decision{action: wait}
	}
	if last == nil || last.CompletionTimestamp == nil {
		return decision{action: verify, request: answered}
	}
	due := last.CompletionTimestamp.Add(period)
	if !now.Before(due) {
		return decision{action: verify, request: answered}
	}
	return decision{action: wait, after: due.Sub(now)}
}

func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	b, err := c.backups.Backups(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	period := time.Duration(0)
	if l, err := c.locations.BackupStorageLocations(b.Namespace).Get(b.Spec.StorageLocation); err == nil {
		// A bad value is refused at admission; one stored before reads
		// as none.
		period, _ = velerov1.VerifyEvery(l.Spec.Config)
	}
	d := decide(b, period, c.cfg.Clock.Now())
	if d.action != wait {
		// The informer may not have this engine's last write yet (a
		// verification that just answered the request): decide again on
		// the backup as stored before reading a whole backup back.
		if b, err = c.cfg.Client.VeleroV1().Backups(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		d = decide(b, period, c.cfg.Clock.Now())
	}
	switch d.action {
	case noData:
		return c.write(ctx, b, d.request, c.cfg.Clock.Now(), velerov1.VerificationNoDataReason,
			fmt.Sprintf("the backup %s: it wrote no data to verify", b.Status.Phase), &Report{})
	case verify:
		return c.verify(ctx, b, d.request)
	}
	if d.after > 0 {
		c.loop.AddAfter(key, d.after)
	}
	return nil
}

// verify runs one verification of b: the Verifying condition, the work,
// then the outcome in one write.
func (c *Controller) verify(ctx context.Context, b *velerov1.Backup, request string) error {
	start := c.cfg.Clock.Now()
	log := klog.FromContext(ctx).WithValues("backup", klog.KObj(b))
	b, err := c.backupStatus(b.Namespace).Update(ctx, b, func(cur *velerov1.Backup) {
		v := &velerov1.BackupVerification{StartTimestamp: &metav1.Time{Time: start}}
		if cur.Status.Verification != nil {
			v.Request = cur.Status.Verification.Request
		}
		cur.Status.Verification = v
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: velerov1.BackupConditionVerified,
			Status: metav1.ConditionUnknown, Reason: velerov1.VerificationRunningReason,
			Message: "reading the backup's objects back", ObservedGeneration: cur.Generation})
	})
	if status.Gone(err) {
		return nil
	}
	if err != nil {
		return err
	}
	log.Info("Verifying backup")
	r := &Report{}
	reason, message := c.check(ctx, b, r)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	took := c.cfg.Clock.Since(start)
	log.Info("Backup verified", "result", reason, "objects", r.Objects, "bytes", r.Bytes, "items", r.Items,
		"vmDiskChains", r.VMDiskChains, "problems", r.ProblemCount, "took", took)
	if err := c.write(ctx, b, request, start, reason, message, r); err != nil {
		return err
	}
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.Verification(b.Labels[velerov1.ScheduleNameLabel], reason, took, r.Bytes, r.ProblemCount)
	}
	return nil
}

// check does the work and says its outcome.
func (c *Controller) check(ctx context.Context, b *velerov1.Backup, r *Report) (reason, message string) {
	l, err := c.locations.BackupStorageLocations(b.Namespace).Get(b.Spec.StorageLocation)
	if err != nil {
		return velerov1.VerificationUnreadableReason, fmt.Sprintf("storage location %q: %v", b.Spec.StorageLocation, err)
	}
	store, layout, err := c.cfg.Opener.Open(ctx, l)
	if err != nil {
		return velerov1.VerificationUnreadableReason, fmt.Sprintf("storage location %q: %v", l.Name, err)
	}
	if err := Objects(ctx, store, layout, b.Name, r); err != nil {
		return velerov1.VerificationUnreadableReason, err.Error()
	}
	if err := VMChains(ctx, c.cfg.Client, c.cfg.VolumeRoot, b, r); err != nil {
		return velerov1.VerificationUnreadableReason, err.Error()
	}
	counts := fmt.Sprintf("%d objects (%d bytes), %d items, %d VM disk chains", r.Objects, r.Bytes, r.Items, r.VMDiskChains)
	switch {
	case r.ProblemCount == 0 && r.NoManifest:
		return velerov1.VerificationNoManifestReason, counts + " read and decoded; the backup has no manifest (made before Backstop wrote them, or by Velero): no byte could be checked against what was written"
	case r.ProblemCount == 0:
		return velerov1.VerificationPassedReason, counts + " read back as written"
	}
	return velerov1.VerificationCorruptReason, fmt.Sprintf("%s read back; %d problems: %s", counts, r.ProblemCount, strings.Join(r.Problems, "; "))
}

// write records a verification's outcome, unless the backup is being
// deleted (its objects went away under the verification).
func (c *Controller) write(ctx context.Context, b *velerov1.Backup, request string, start time.Time, reason, message string, r *Report) error {
	now := metav1.NewTime(c.cfg.Clock.Now())
	cond := metav1.ConditionFalse
	if reason == velerov1.VerificationPassedReason {
		cond = metav1.ConditionTrue
	}
	const maxMessage = 32 << 10
	if len(message) > maxMessage {
		message = message[:maxMessage]
	}
	_, err := c.backupStatus(b.Namespace).Update(ctx, b, func(cur *velerov1.Backup) {
		if cur.DeletionTimestamp != nil || cur.Status.Phase == velerov1.BackupPhaseDeleting {
			return
		}
		cur.Status.Verification = &velerov1.BackupVerification{Request: request, StartTimestamp: &metav1.Time{Time: start},
			CompletionTimestamp: &now, Objects: r.Objects, Bytes: r.Bytes, Items: r.Items, VMDiskChains: r.VMDiskChains,
			ProblemCount: r.ProblemCount, Problems: r.Problems}
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: velerov1.BackupConditionVerified,
			Status: cond, Reason: reason, Message: message, ObservedGeneration: cur.Generation})
	})
	if status.Gone(err) {
		return nil
	}
	return err
}

func (c *Controller) backupStatus(namespace string) *status.ResourceWriter[velerov1.Backup, *velerov1.Backup] {
	return c.status.Backups(c.cfg.Client, namespace)
}
