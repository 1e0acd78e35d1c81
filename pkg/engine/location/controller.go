// Package location owns the lifecycle of BackupStorageLocations: the
// default filesystem location created at first start, and the periodic
// availability check that sets status.phase Available/Unavailable with a
// message, as Velero's backup storage location controller does; with it,
// every UsageInterval, the measure of what the location's objects take
// (status.usage, a Backstop addition: the console draws it over time).
package location

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
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
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	informers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v1"
	listers "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// Name is the engine's name (--disable-controllers, field manager).
const Name = "backup-storage-location"

// DefaultValidationFrequency is how often a location is checked when its
// spec.validationFrequency is unset (Velero: one minute).
const DefaultValidationFrequency = time.Minute

// DefaultName is the name of the location created at first start.
const DefaultName = "default"

// markerFile records, in the data directory, that the default location was
// created once: deleting it later is the user's choice and is respected.
const markerFile = "default-location-created"

// EnsureDefault creates, at the first start of a data directory, the
// default location: the filesystem directory <dataDir>/backups.
func EnsureDefault(ctx context.Context, client versioned.Interface, namespace, dataDir string) error {
	marker := filepath.Join(dataDir, markerFile)
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	dir, err := filepath.Abs(filepath.Join(dataDir, "backups"))
	if err != nil {
		return err
	}
	_, err = client.VeleroV1().BackupStorageLocations(namespace).Create(ctx, &velerov1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Name: DefaultName, Namespace: namespace},
		Spec: velerov1.BackupStorageLocationSpec{
			Provider: objectstore.ProviderFilesystem,
			Default:  true,
			StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{
				Bucket: dir,
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the default storage location: %w", err)
	}
	if err := os.WriteFile(marker, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o600); err != nil {
		return fmt.Errorf("recording the default storage location: %w", err)
	}
	return nil
}

// Controller checks the availability of storage locations.
type Controller struct {
	*reconcile.Loop
	client versioned.Interface
	lister listers.BackupStorageLocationLister
	opener objectstore.Opener
	clock  clock.Clock
	// gate shares the workers between tenants' locations and keeps one
	// for the admin's.
	gate *reconcile.OwnerGate

	mu sync.Mutex
	// probed is the generation of each location at its last probe by this
	// process: a spec change is probed at once, and every location once
	// after a restart.
	probed map[cache.ObjectName]int64
	// Observers are told about the phase transitions the engine writes
	// (Events, metrics).
	Observers []status.Observer
	// UsageInterval is how often an available location's objects are
	// measured, at its first check once the interval has passed since the
	// last sample (0: never).
	UsageInterval time.Duration
	// CheckTimeout bounds a check: opening the location and probing its
	// endpoint (0: DefaultCheckTimeout).
	CheckTimeout time.Duration
}

// DefaultCheckTimeout bounds a location's check by default.
const DefaultCheckTimeout = 30 * time.Second

// Workers is how many locations are checked at once: a location's
// endpoint is its owner's (a tenant's) to choose, and one that answers
// slowly holds a worker until its check's deadline, never all of them
// (a location is checked by one worker at a time; one tenant's locations
// by one worker at a time, and tenants' by all but one: the admin's
// locations always find one).
const Workers = 4

// DefaultUsageInterval is how often locations are measured by default.
const DefaultUsageInterval = time.Hour

// UsageTimeout bounds one measure of a location: one that lists for
// longer is not recorded (logged), and tried again at the next check.
const UsageTimeout = 30 * time.Second

// New returns the availability controller.
func New(client versioned.Interface, informer informers.BackupStorageLocationInformer, opener objectstore.Opener, clk clock.Clock) (*Controller, error) {
	c := &Controller{client: client, lister: informer.Lister(), opener: opener, clock: clk, probed: map[cache.ObjectName]int64{},
		gate: reconcile.NewOwnerGate(Workers)}
	c.Loop = reconcile.NewLoop("backupstoragelocations", c.sync)
	if err := c.Watch(informer.Informer()); err != nil {
		return nil, err
	}
	return c, nil
}

// UsageDue reports whether a location whose samples are usage is to be
// measured at now: every interval (never when it is 0), and at once when
// its last sample is later than now (a clock set back: the new sample
// then stands for now).
func UsageDue(usage []velerov1.LocationUsageSample, now time.Time, interval time.Duration) bool {
	if interval <= 0 {
		return false
	}
	if len(usage) == 0 {
		return true
	}
	last := usage[len(usage)-1].Time.Time
	return now.Before(last) || !now.Before(last.Add(interval))
}

// AddUsageSample appends a sample, keeping the last
// LocationUsageSamples.
func AddUsageSample(usage []velerov1.LocationUsageSample, sample velerov1.LocationUsageSample) []velerov1.LocationUsageSample {
	out := append(append(make([]velerov1.LocationUsageSample, 0, len(usage)+1), usage...), sample)
	if len(out) > velerov1.LocationUsageSamples {
		out = out[len(out)-velerov1.LocationUsageSamples:]
	}
	return out
}

func frequency(l *velerov1.BackupStorageLocation) time.Duration {
	if l.Spec.ValidationFrequency != nil && l.Spec.ValidationFrequency.Duration > 0 {
		return l.Spec.ValidationFrequency.Duration
	}
	return DefaultValidationFrequency
}

// sync probes a location when it is due (never checked, spec changed, or
// its validation frequency elapsed) and records the outcome.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	l, err := c.lister.BackupStorageLocations(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if l.Spec.Default {
		if err := c.demoteOlderDefaults(ctx, l); err != nil {
			return err
		}
	}
	now := c.clock.Now()
	freq := frequency(l)
	c.mu.Lock()
	gen, seen := c.probed[key]
	c.mu.Unlock()
	if last := l.Status.LastValidationTime; last != nil && seen && gen == l.Generation {
		if left := last.Add(freq).Sub(now); left > 0 {
			c.AddAfter(key, left)
			return nil
		}
	}
	release, err := c.gate.Enter(l.Annotations[velerov1.TenantLocationNamespaceAnnotation])
	if err != nil {
		c.AddAfter(key, reconcile.OwnerRetry)
		return nil
	}
	defer release()
	phase, message := velerov1.BackupStorageLocationPhaseAvailable, ""
	store, layout, err := c.check(ctx, l)
	if err != nil {
		phase, message = velerov1.BackupStorageLocationPhaseUnavailable, err.Error()
	}
	var sample *velerov1.LocationUsageSample
	if err == nil && UsageDue(l.Status.Usage, now, c.UsageInterval) {
		// Bounded: a tenant's location is at an endpoint of the tenant's
		// choosing.
		mctx, cancel := context.WithTimeout(ctx, UsageTimeout)
		u, err := objectstore.MeasureUsage(mctx, store, layout.Root())
		cancel()
		if err != nil {
			klog.FromContext(ctx).Error(err, "Measuring a storage location", "location", klog.KObj(l))
		} else {
			sample = &velerov1.LocationUsageSample{Time: metav1.Time{Time: now}, Bytes: u.Bytes, Objects: u.Objects}
		}
	}
	_, err = status.Writer{Engine: Name, Observers: c.Observers}.BackupStorageLocations(c.client, key.Namespace).Update(ctx, l, func(cur *velerov1.BackupStorageLocation) {
		cur.Status.Phase = phase
		cur.Status.Message = message
		cur.Status.LastValidationTime = &metav1.Time{Time: now}
		if sample != nil {
			cur.Status.Usage = AddUsageSample(cur.Status.Usage, *sample)
		}
	})
	if status.Gone(err) {
		return nil
	}
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.probed[key] = l.Generation
	c.mu.Unlock()
	c.AddAfter(key, freq)
	return nil
}

// check opens l and probes its endpoint, within the check's deadline.
func (c *Controller) check(ctx context.Context, l *velerov1.BackupStorageLocation) (objectstore.Store, objectstore.Layout, error) {
	timeout := c.CheckTimeout
	if timeout <= 0 {
		timeout = DefaultCheckTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	store, layout, err := c.opener.Open(cctx, l)
	if err == nil {
		err = store.Probe(cctx)
	}
	if err != nil && cctx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("the location's check took longer than %s: %w", timeout, err)
	}
	return store, layout, err
}

// demoteOlderDefaults keeps one default location per namespace, as Velero
// does: the newest location marked default wins, older ones are unmarked.
func (c *Controller) demoteOlderDefaults(ctx context.Context, l *velerov1.BackupStorageLocation) error {
	all, err := c.lister.BackupStorageLocations(l.Namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	for _, other := range all {
		if other.Name == l.Name || !other.Spec.Default || NewerDefault(other, l) {
			continue
		}
		patch := []byte(`{"spec":{"default":false}}`)
		if _, err := c.client.VeleroV1().BackupStorageLocations(l.Namespace).Patch(ctx, other.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("unmarking the older default location %s: %w", other.Name, err)
		}
	}
	return nil
}

// NewerDefault reports whether a takes precedence over b as the default
// location: created later, or at the same time with a greater name.
func NewerDefault(a, b *velerov1.BackupStorageLocation) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	return a.Name > b.Name
}
