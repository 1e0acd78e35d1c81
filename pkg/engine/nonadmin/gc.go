package nonadmin

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	oadpinformers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/oadp/v1alpha1"
	oadplisters "github.com/backstop-io/backstop/pkg/generated/listers/oadp/v1alpha1"
)

// orphans is the loop of one engine that finds the admin-side objects
// made for tenant objects that are gone: an admin object is synced on its
// own events, on those of the tenant object whose status names it, and
// whenever the garbage collection asks (Resync).
type orphans struct {
	*reconcile.Loop
	admin []cache.SharedIndexInformer
	// more lists the keys of admin-side objects no informer holds (nil:
	// none).
	more func(ctx context.Context) ([]cache.ObjectName, error)
}

// orphanLoop returns the orphans loop of engine for the admin-side objects
// of m: admin are the informers of the admin namespace's objects it made
// (their names are the keys), tenants the tenant objects whose status
// records one.
func orphanLoop[T, A object](engine string, m *mirror[T, A], tenants cache.SharedIndexInformer, admin ...cache.SharedIndexInformer) (*orphans, error) {
	return orphanLoopOf(engine, m.adminNamespace, tenants, m.recordedName, m.syncOrphan, admin...)
}

// orphanLoopOf is orphanLoop for an engine whose orphans are not one kind
// (made: the name a tenant object's status records, "" for none).
func orphanLoopOf[T any](engine, adminNamespace string, tenants cache.SharedIndexInformer, made func(T) string, sync reconcile.SyncFunc, admin ...cache.SharedIndexInformer) (*orphans, error) {
	o := &orphans{Loop: reconcile.NewLoop(engine+"-orphans", sync), admin: admin}
	for _, a := range admin {
		if err := o.Watch(a); err != nil {
			return nil, err
		}
	}
	if err := o.WatchMapped(tenants, func(obj any) []cache.ObjectName {
		if t, ok := obj.(T); ok {
			if name := made(t); name != "" {
				return []cache.ObjectName{{Namespace: adminNamespace, Name: name}}
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return o, nil
}

// Resync sends every admin-side object through the loop again and returns
// how many.
func (o *orphans) Resync(ctx context.Context) int {
	n := 0
	if o.more != nil {
		keys, err := o.more(ctx)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Garbage collection: listing admin-side objects")
		}
		for _, k := range keys {
			o.Add(k)
			n++
		}
	}
	for _, a := range o.admin {
		for _, key := range a.GetStore().ListKeys() {
			name, err := cache.ParseObjectName(key)
			if err != nil {
				continue
			}
			o.Add(name)
			n++
		}
	}
	return n
}

// Resyncer is what the garbage collection runs again: an engine's orphans.
type Resyncer interface {
	Resync(ctx context.Context) int
}

// EngineNonAdminGC is the garbage collection of what was made for tenants.
const EngineNonAdminGC = "nonadmin-gc"

// GCConfig is what the garbage collection needs.
type GCConfig struct {
	AdminNamespace string
	// DPAs of the admin namespace hold the admin's policy.
	DPAs oadpinformers.DataProtectionApplicationInformer
	// Orphans are the engines' orphan loops, read at each pass (the
	// engines that have one are built beside this one, in any order).
	Orphans func() []Resyncer
	Clock   clock.Clock
}

// GCController is the garbage collection of the admin side: every
// garbageCollectionPeriod of the policy (0: never) each admin-side object
// made for a tenant goes through its engine's orphan loop again, which
// deletes it (a Backup with its data) when its tenant object is gone.
// Those loops act on every event as it comes; this pass is the backstop
// for what an event could not settle (an error given up on, an object
// whose tenant object went while the server was down and that no event
// names again).
type GCController struct {
	cfg  GCConfig
	dpas oadplisters.DataProtectionApplicationLister
	// wake: the policy changed.
	wake chan struct{}
}

// NewGCController returns the engine.
func NewGCController(cfg GCConfig) (*GCController, error) {
	c := &GCController{cfg: cfg, dpas: cfg.DPAs.Lister(), wake: make(chan struct{}, 1)}
	poke := func() {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	if _, err := cfg.DPAs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { poke() }, UpdateFunc: func(any, any) { poke() }, DeleteFunc: func(any) { poke() },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run collects until ctx is done. The first pass comes a period after the
// start: at the start every orphan loop sees every object anyway.
func (c *GCController) Run(ctx context.Context, _ int) {
	defer runtime.HandleCrash()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.cfg.DPAs.Informer().HasSynced) {
		return
	}
	logger := klog.FromContext(ctx).WithValues("controller", EngineNonAdminGC)
	last := c.cfg.Clock.Now()
	for {
		period := time.Duration(0)
		if policy, err := policyOf(c.dpas, c.cfg.AdminNamespace); err == nil {
			period = policy.GarbageCollectionPeriod()
		}
		wait := time.Hour // off: until the policy changes
		if period > 0 {
			wait = last.Add(period).Sub(c.cfg.Clock.Now())
			if wait <= 0 {
				n := 0
				for _, o := range c.cfg.Orphans() {
					n += o.Resync(ctx)
				}
				last = c.cfg.Clock.Now()
				logger.V(2).Info("Garbage collection: every admin-side object made for tenants checked again", "objects", n, "next", last.Add(period))
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		case <-c.cfg.Clock.After(wait):
		}
	}
}
