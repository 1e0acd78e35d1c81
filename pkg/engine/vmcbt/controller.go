// Package vmcbt is the changed block tracking engine (KubeVirt VEP 22,
// "Enable/Disable QEMU backup"): it selects VMs for changed block tracking
// and reports their state on their VirtualMachineBackupTrackers.
//
// Selection: a VirtualMachine is selected while one of its
// VirtualMachineBackupTrackers selects it; a tracker selects its VM unless
// its annotation backstop.io/changed-block-tracking is "false". (KubeVirt
// selects by label selectors in its CR; Backstop serves no VirtualMachine
// objects, and a tracker is what says a VM's backups are to be
// incremental.)
//
// A selected VM's libvirt domain ("<ns>_<name>") gets an overlay per raw
// disk (pkg/virt EnableCBT, in --cbt-state-dir/<domain>/); a VM no longer
// selected, or whose last tracker was deleted, has them removed
// (DisableCBT). Each tracker of the VM shows the state in
// status.changedBlockTracking: Initializing while overlays are made,
// PendingRestart while the running domain has the disks of the previous
// definition, then Enabled or Disabled; reason and message say why when
// it cannot be done (libvirt unavailable, overlay failed, the domain gone).
// Trackers of a VM without a domain on this host are left as they are.
// With replicas on several libvirt hosts (pkg/engine/vmhost) each host's
// engine tracks the VMs its libvirt has; trackers whose VM no live host
// has show the domain gone.
//
// The engine looks at a VM again on every change of its trackers, on every
// libvirt lifecycle event of its domain (a restart moves PendingRestart on)
// and every resync period.
package vmcbt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/engine/vmhost"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	informers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/kubevirtbackup/v1alpha1"
	listers "github.com/backstop-io/backstop/pkg/generated/listers/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/virt"
)

// Config is what the engine needs.
type Config struct {
	Client   versioned.Interface
	Trackers informers.VirtualMachineBackupTrackerInformer
	// Virt returns the libvirt connection (an error wrapping
	// virt.ErrUnavailable when there is no libvirt).
	Virt func() (virt.Hypervisor, error)
	// StateDir holds the overlays, one directory per domain; QEMU's user
	// must be able to reach it.
	StateDir string
	// Resync is how often every VM with a tracker or overlays is looked at
	// again (0: one minute).
	Resync time.Duration
	// Observers are told about the state transitions the engine writes.
	Observers []status.Observer
	// Hosts, when the replicas run on several libvirt hosts, is this
	// one's: trackers of a VM another host runs are left to it (nil: this
	// is the only host).
	Hosts *vmhost.Hosts
}

// Controller is the changed block tracking engine. Its keys are VMs:
// namespace and VirtualMachine name.
type Controller struct {
	*reconcile.Loop
	cfg      Config
	trackers listers.VirtualMachineBackupTrackerLister

	mu         sync.Mutex
	subscribed virt.Hypervisor
	// unsubscribe ends the subscription to subscribed's events.
	unsubscribe []func()

	releasedMu sync.Mutex
	// released are the checkpoints deleted trackers were at, by VM.
	released map[cache.ObjectName][]string
}

// New returns the engine.
func New(cfg Config) (*Controller, error) {
	if cfg.Resync <= 0 {
		cfg.Resync = time.Minute
	}
	c := &Controller{cfg: cfg, trackers: cfg.Trackers.Lister()}
	c.Loop = reconcile.NewLoop("vmcbt", c.sync)
	enqueue := func(obj any) {
		if t, ok := trackerOf(obj); ok {
			c.Add(cache.ObjectName{Namespace: t.Namespace, Name: t.Spec.Source.Name})
		}
	}
	if _, err := cfg.Trackers.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		// Only a change of what selects the VM: status writes (this
		// engine's own, the backups' checkpoints) are not one.
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*kv.VirtualMachineBackupTracker)
			n, ok2 := obj.(*kv.VirtualMachineBackupTracker)
			if !ok1 || !ok2 || selects(o) != selects(n) || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) {
				enqueue(obj)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := trackerOf(obj); ok && t.Status != nil && t.Status.LatestCheckpoint != nil && t.Status.LatestCheckpoint.Name != "" {
				c.release(cache.ObjectName{Namespace: t.Namespace, Name: t.Spec.Source.Name}, t.Status.LatestCheckpoint.Name)
			}
			enqueue(obj)
		},
	}); err != nil {
		return nil, fmt.Errorf("vmcbt engine: watching trackers: %w", err)
	}
	c.WaitFor(cfg.Trackers.Informer())
	return c, nil
}

// Run runs the engine until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("controller", "vmcbt"))
	go wait.UntilWithContext(ctx, func(context.Context) { c.resync() }, c.cfg.Resync)
	c.Loop.Run(ctx, workers)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, stop := range c.unsubscribe {
		stop()
	}
	c.subscribed, c.unsubscribe = nil, nil
}

// resync queues every VM with a tracker, and every domain with overlays
// (a VM whose last tracker was deleted).
func (c *Controller) resync() {
	all, err := c.trackers.List(labels.Everything())
	if err != nil {
		return
	}
	for _, t := range all {
		c.Add(cache.ObjectName{Namespace: t.Namespace, Name: t.Spec.Source.Name})
	}
	entries, _ := os.ReadDir(c.cfg.StateDir)
	for _, e := range entries {
		if key, ok := vmOf(e.Name()); ok && e.IsDir() {
			c.Add(key)
		}
	}
}

// trackerOf is the tracker of an informer event (a deleted one's last
// known state included).
func trackerOf(obj any) (*kv.VirtualMachineBackupTracker, bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	t, ok := obj.(*kv.VirtualMachineBackupTracker)
	return t, ok
}

// vmOf is the VM of a domain name "<ns>_<name>" (a namespace has no "_").
func vmOf(domain string) (cache.ObjectName, bool) {
	ns, name, ok := strings.Cut(domain, "_")
	return cache.ObjectName{Namespace: ns, Name: name}, ok && ns != "" && name != ""
}

// conn returns the libvirt connection, subscribed to its lifecycle events.
func (c *Controller) conn() (virt.Hypervisor, error) {
	conn, err := c.cfg.Virt()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.subscribed != conn {
		for _, stop := range c.unsubscribe {
			stop()
		}
		c.unsubscribe = []func(){
			conn.OnLifecycle(func(domain string) {
				if key, ok := vmOf(domain); ok {
					c.Add(key)
				}
			}),
			// Events were missed while libvirt was away: look at every VM.
			conn.OnReconnect(c.resync),
		}
		c.subscribed = conn
	}
	return conn, nil
}

// trackersOf returns the trackers of a VM, and whether one selects it.
func (c *Controller) trackersOf(key cache.ObjectName) ([]*kv.VirtualMachineBackupTracker, bool, error) {
	all, err := c.trackers.VirtualMachineBackupTrackers(key.Namespace).List(labels.Everything())
	if err != nil {
		return nil, false, err
	}
	var out []*kv.VirtualMachineBackupTracker
	selected := false
	for _, t := range all {
		if t.Spec.Source.Name != key.Name || t.DeletionTimestamp != nil {
			continue
		}
		out = append(out, t)
		if selects(t) {
			selected = true
		}
	}
	return out, selected, nil
}

// dropCheckpoints deletes, with their bitmaps, the checkpoints deleted
// trackers of the VM were at that no remaining tracker is at: nothing
// will be incremental to them (a tracker's checkpoint is its newest
// backup's, which stays on the domain when that backup is deleted). Other
// checkpoints of the domain are not Backstop's to delete. A domain this
// host lacks is another host's: its engine does it.
func (c *Controller) dropCheckpoints(ctx context.Context, key cache.ObjectName, domain string, trackers []*kv.VirtualMachineBackupTracker) error {
	c.releasedMu.Lock()
	names := c.released[key]
	delete(c.released, key)
	c.releasedMu.Unlock()
	var drop []string
	for _, name := range names {
		kept := false
		for _, t := range trackers {
			if t.Status != nil && t.Status.LatestCheckpoint != nil && t.Status.LatestCheckpoint.Name == name {
				kept = true
			}
		}
		if !kept {
			drop = append(drop, name)
		}
	}
	if len(drop) == 0 {
		return nil
	}
	conn, err := c.conn()
	if err == nil {
		err = conn.DeleteCheckpoints(ctx, domain, drop)
	}
	switch {
	case errors.Is(err, virt.ErrDomainNotFound):
		return nil
	case err != nil:
		c.release(key, drop...) // again at the next look
		return fmt.Errorf("deleting the checkpoints %v of domain %s, which no tracker is at: %w", drop, domain, err)
	}
	klog.FromContext(ctx).Info("Deleted the checkpoints of deleted trackers", "domain", domain, "checkpoints", drop)
	return nil
}

// release records checkpoints that deleted trackers of a VM were at.
func (c *Controller) release(key cache.ObjectName, names ...string) {
	c.releasedMu.Lock()
	defer c.releasedMu.Unlock()
	if c.released == nil {
		c.released = map[cache.ObjectName][]string{}
	}
	c.released[key] = append(c.released[key], names...)
}

// selects reports whether a tracker selects its VM.
func selects(t *kv.VirtualMachineBackupTracker) bool {
	return t.Annotations[kv.ChangedBlockTrackingAnnotation] != "false"
}

// failing reports whether a tracker shows that enabling failed: the next
// attempt is not announced as Initializing again.
func failing(trackers []*kv.VirtualMachineBackupTracker) bool {
	for _, t := range trackers {
		if t.Status != nil && t.Status.ChangedBlockTracking != nil && t.Status.ChangedBlockTracking.Reason == kv.ReasonEnableFailed {
			return true
		}
	}
	return false
}

func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	trackers, selected, err := c.trackersOf(key)
	if err != nil {
		return err
	}
	domain := key.Namespace + "_" + key.Name
	if err := c.dropCheckpoints(ctx, key, domain, trackers); err != nil {
		return err
	}
	if len(trackers) == 0 {
		// No tracker left: the VM's overlays, if any, go.
		dir, err := virt.OverlayDir(c.cfg.StateDir, domain)
		if err != nil {
			return nil // a name no overlay directory can have
		}
		if _, err := os.Stat(dir); err != nil {
			return nil
		}
		selected = false
	}
	conn, err := c.conn()
	if err != nil {
		if c.cfg.Hosts.Alone(ctx) {
			// With other hosts, the VM may be theirs: nothing is said.
			c.report(ctx, trackers, nil, kv.ReasonLibvirtUnavailable, err.Error())
		}
		c.AddAfter(key, c.cfg.Resync)
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("virtualMachine", key.String(), "domain", domain)
	var state virt.CBTState
	failed := kv.ReasonDisableFailed
	if selected {
		failed = kv.ReasonEnableFailed
		state, err = conn.CBTStatus(domain, c.cfg.StateDir)
		if err == nil && state == virt.CBTDisabled {
			if !failing(trackers) {
				initializing := kv.ChangedBlockTrackingInitializing
				c.report(ctx, trackers, &initializing, "", "")
			}
			logger.Info("Enabling changed block tracking")
			state, err = conn.EnableCBT(domain, c.cfg.StateDir)
			if err == nil && state == virt.CBTDisabled {
				err = errors.New("a disk is neither raw nor qcow2: it cannot keep dirty bitmaps")
			}
		}
	} else {
		state, err = conn.DisableCBT(domain, c.cfg.StateDir)
	}
	switch {
	case errors.Is(err, virt.ErrDomainNotFound) && len(trackers) == 0:
		// Overlays of a domain that is gone, and no tracker: nothing can
		// use them.
		if err := virt.RemoveOverlayDir(c.cfg.StateDir, domain); err != nil {
			return fmt.Errorf("removing the overlays of domain %s, which is gone: %w", domain, err)
		}
		logger.Info("Removed the overlays of a domain that is gone")
		return nil
	case errors.Is(err, virt.ErrDomainNotFound):
		// A VM this host does not run: trackers that showed a state
		// say it is gone once no host runs it; others are left alone
		// (the domain's definition, a lifecycle event, brings the VM
		// back here).
		var shown []*kv.VirtualMachineBackupTracker
		for _, t := range trackers {
			absence, err := c.cfg.Hosts.Absent(ctx, t.Annotations)
			if err != nil {
				return err
			}
			if absence.Changed {
				if err := c.annotate(ctx, t, absence.Value); err != nil {
					return err
				}
			}
			if absence.Nowhere && t.Status != nil && t.Status.ChangedBlockTracking != nil {
				shown = append(shown, t)
			}
		}
		msg := fmt.Sprintf("VirtualMachine %s has no libvirt domain %s", key.Name, domain)
		if c.cfg.Hosts != nil {
			msg += " on any host"
		}
		c.report(ctx, shown, nil, kv.ReasonDomainNotFound, msg)
		return nil
	case errors.Is(err, virt.ErrUnavailable):
		// libvirt is away (the connection comes back by itself and the
		// engine then looks at every VM again).
		c.report(ctx, trackers, nil, kv.ReasonLibvirtUnavailable, err.Error())
		c.AddAfter(key, c.cfg.Resync)
		return nil
	case err != nil:
		logger.Error(err, "Changed block tracking", "reason", failed)
		current, _ := conn.CBTStatus(domain, c.cfg.StateDir)
		c.report(ctx, trackers, stateOf(current), failed, err.Error())
		return err // retried with backoff
	}
	for _, t := range trackers {
		// This host runs the VM: no other may say it is on none.
		if value, changed := c.cfg.Hosts.Present(t.Annotations); changed {
			if err := c.annotate(ctx, t, value); err != nil {
				return err
			}
		}
	}
	c.report(ctx, trackers, stateOf(state), "", "")
	return nil
}

// annotate writes a tracker's list of the hosts that lack its VM.
func (c *Controller) annotate(ctx context.Context, t *kv.VirtualMachineBackupTracker, value string) error {
	t = t.DeepCopy()
	t.Annotations = vmhost.Set(t.Annotations, value)
	if _, err := c.cfg.Client.BackupV1alpha1().VirtualMachineBackupTrackers(t.Namespace).Update(ctx, t, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("recording the hosts that lack the VM of tracker %s/%s: %w", t.Namespace, t.Name, err)
	}
	return nil
}

func stateOf(s virt.CBTState) *kv.ChangedBlockTrackingState {
	if s == "" {
		return nil
	}
	st := kv.ChangedBlockTrackingState(s)
	return &st
}

// report writes the state (nil: keep the one shown), reason and message on
// every tracker of a VM whose status shows something else.
func (c *Controller) report(ctx context.Context, trackers []*kv.VirtualMachineBackupTracker, state *kv.ChangedBlockTrackingState, reason, msg string) {
	for _, t := range trackers {
		w := status.Writer{Engine: kv.EngineVMCBT, Observers: c.cfg.Observers}.VirtualMachineBackupTrackers(c.cfg.Client, t.Namespace)
		_, err := w.Update(ctx, t, func(cur *kv.VirtualMachineBackupTracker) {
			want := kv.ChangedBlockTrackingStatus{Reason: reason, Message: msg}
			if cur.Status != nil && cur.Status.ChangedBlockTracking != nil {
				want.State = cur.Status.ChangedBlockTracking.State
			}
			if state != nil {
				want.State = *state
			}
			if cur.Status == nil {
				cur.Status = &kv.VirtualMachineBackupTrackerStatus{}
			}
			cur.Status.ChangedBlockTracking = &want
		})
		if err != nil && !status.Gone(err) {
			klog.FromContext(ctx).Error(err, "Updating the changed block tracking state of a tracker", "tracker", klog.KObj(t))
		}
	}
}
