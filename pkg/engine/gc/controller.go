// Package gc deletes expired backups: when a backup's status.expiration
// (its start plus spec.ttl) has passed, it creates a DeleteBackupRequest
// for it, as Velero's garbage collector does, and the deletion engine does
// the rest. A backup whose storage location is missing or unavailable is
// labelled with the reason (velero.io/gc-failure) and retried later.
// Unlike Velero, which looks once an hour, a backup is looked at when it
// expires.
//
// Retention of a schedule's backups (retention.go): a schedule annotated
// backstop.io/keep-last: N keeps its newest N Completed backups, the older
// ones deleted through DeleteBackupRequests as soon as a newer one
// completes; and a schedule's newest Completed backup is never deleted by
// its TTL while the runs after it failed (labelled backstop.io/kept:
// LastCompleted until a later run completes).
package gc

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	kvinformers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/kubevirtbackup/v1alpha1"
	informers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v1"
	kvlisters "github.com/backstop-io/backstop/pkg/generated/listers/kubevirtbackup/v1alpha1"
	listers "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
)

// Name is the engine's name (--disable-controllers).
const Name = "gc"

// FailureLabel says why an expired backup could not be collected.
const FailureLabel = "velero.io/gc-failure"

// RetryInterval: how soon an expired backup that could not be collected is
// looked at again.
const RetryInterval = time.Minute

// Controller collects expired backups.
type Controller struct {
	*reconcile.Loop
	client    versioned.Interface
	backups   listers.BackupLister
	requests  listers.DeleteBackupRequestLister
	locations listers.BackupStorageLocationLister
	schedules listers.ScheduleLister
	clock     clock.Clock
	// series is the loop over schedules whose series' VM backup trackers
	// may go (series.go); trackers is nil without them.
	series         *reconcile.Loop
	trackers       kvlisters.VirtualMachineBackupTrackerLister
	adminNamespace string
}

// Informers are what the controller reads.
type Informers struct {
	Backups   informers.BackupInformer
	Requests  informers.DeleteBackupRequestInformer
	Locations informers.BackupStorageLocationInformer
	Schedules informers.ScheduleInformer
	// Trackers, if set, are the VM backup trackers of every namespace: a
	// deleted schedule's series trackers go once its last backup is gone.
	Trackers kvinformers.VirtualMachineBackupTrackerInformer
	// AdminNamespace is where the schedules are.
	AdminNamespace string
}

// New returns the collector.
func New(client versioned.Interface, inf Informers, clk clock.Clock) (*Controller, error) {
	c := &Controller{client: client, backups: inf.Backups.Lister(), requests: inf.Requests.Lister(),
		locations: inf.Locations.Lister(), schedules: inf.Schedules.Lister(), clock: clk}
	c.Loop = reconcile.NewLoop("backup-gc", c.sync)
	if err := c.Watch(inf.Backups.Informer()); err != nil {
		return nil, err
	}
	c.WaitFor(inf.Requests.Informer(), inf.Locations.Informer(), inf.Schedules.Informer())
	c.adminNamespace = inf.AdminNamespace
	c.series = reconcile.NewLoop("vm-backup-series-gc", c.syncSeries)
	if inf.Trackers != nil {
		c.trackers = inf.Trackers.Lister()
		for _, informer := range []cache.SharedIndexInformer{inf.Schedules.Informer(), inf.Backups.Informer(), inf.Trackers.Informer()} {
			if err := c.series.WatchMapped(informer, c.seriesKeys); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// Run runs the collector and the series loop until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	go c.series.Run(ctx, 1)
	c.Loop.Run(ctx, workers)
}

func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	b, err := c.backups.Backups(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if b.Status.Phase == velerov1.BackupPhaseDeleting || b.DeletionTimestamp != nil {
		return nil
	}
	if until, _, locked := velerov1.LockedUntil(b); locked {
		// Under object lock nobody deletes it before then, whatever
		// its schedule keeps: looked at again at that time.
		if left := until.Sub(c.clock.Now()); left > 0 {
			c.AddAfter(key, left)
			return nil
		}
	}
	siblings := c.siblings(b) // of its schedule, read once
	c.resyncSiblings(b, siblings)
	if beyond, n := c.beyondKeepLast(b, siblings); beyond {
		return c.requestDeletion(ctx, b, fmt.Sprintf("older than the newest %d Completed backups its schedule keeps (%s)", n, velerov1.KeepLastAnnotation))
	}
	if b.Status.Expiration == nil {
		return nil
	}
	if left := b.Status.Expiration.Sub(c.clock.Now()); left > 0 {
		c.AddAfter(key, left)
		return nil
	}
	if reason := keptPastTTL(b, siblings); reason != "" {
		// Looked at again when a later run of its schedule completes.
		return c.setLabel(ctx, b, velerov1.KeptLabel, reason)
	}
	if err := c.setLabel(ctx, b, velerov1.KeptLabel, ""); err != nil {
		return err
	}
	return c.requestDeletion(ctx, b, "expired")
}

// requestDeletion creates a DeleteBackupRequest for the backup (unless one
// is pending): the deletion engine deletes it, its data and what it made.
func (c *Controller) requestDeletion(ctx context.Context, b *velerov1.Backup, why string) error {
	key := cache.ObjectName{Namespace: b.Namespace, Name: b.Name}
	if reason := c.locationProblem(b); reason != "" {
		c.AddAfter(key, RetryInterval)
		return c.setLabel(ctx, b, FailureLabel, reason)
	}
	if err := c.setLabel(ctx, b, FailureLabel, ""); err != nil {
		return err
	}
	for _, r := range c.pendingRequests(b) {
		klog.FromContext(ctx).V(2).Info("Backup already has a pending deletion request", "backup", b.Name, "request", r)
		return nil
	}
	_, err := c.client.VeleroV1().DeleteBackupRequests(b.Namespace).Create(ctx, &velerov1.DeleteBackupRequest{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: velerov1.LabelValue(b.Name) + "-",
			Namespace:    b.Namespace,
			Labels: map[string]string{
				velerov1.BackupNameLabel: velerov1.LabelValue(b.Name),
				velerov1.BackupUIDLabel:  string(b.UID),
			},
		},
		Spec: velerov1.DeleteBackupRequestSpec{BackupName: b.Name},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("requesting the deletion of backup %s (%s): %w", b.Name, why, err)
	}
	klog.FromContext(ctx).Info("Backup deletion requested", "backup", b.Name, "why", why)
	return nil
}

// locationProblem is why the backup's data cannot be deleted now, or "".
func (c *Controller) locationProblem(b *velerov1.Backup) string {
	if b.Spec.StorageLocation == "" {
		return ""
	}
	l, err := c.locations.BackupStorageLocations(b.Namespace).Get(b.Spec.StorageLocation)
	switch {
	case apierrors.IsNotFound(err):
		return "BSLNotFound"
	case err != nil:
		return "BSLCannotGet"
	case l.Spec.AccessMode == velerov1.BackupStorageLocationAccessModeReadOnly:
		return "BSLReadOnly"
	case l.Status.Phase == velerov1.BackupStorageLocationPhaseUnavailable:
		return "BSLUnavailable"
	}
	return ""
}

// pendingRequests names deletion requests of this backup not yet processed.
func (c *Controller) pendingRequests(b *velerov1.Backup) []string {
	sel := labels.SelectorFromSet(labels.Set{velerov1.BackupNameLabel: velerov1.LabelValue(b.Name), velerov1.BackupUIDLabel: string(b.UID)})
	all, err := c.requests.DeleteBackupRequests(b.Namespace).List(sel)
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range all {
		if r.Status.Phase != velerov1.DeleteBackupRequestPhaseProcessed {
			out = append(out, r.Name)
		}
	}
	return out
}

// setLabel sets (or with "" removes) a label of the backup.
func (c *Controller) setLabel(ctx context.Context, b *velerov1.Backup, label, reason string) error {
	if b.Labels[label] == reason {
		return nil
	}
	value := "null"
	if reason != "" {
		value = `"` + reason + `"`
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, label, value))
	_, err := c.client.VeleroV1().Backups(b.Namespace).Patch(ctx, b.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("labelling backup %s: %w", b.Name, err)
	}
	return nil
}
