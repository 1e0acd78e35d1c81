// Package vmbackup is the VirtualMachineBackup engine (KubeVirt's
// incremental backup proposal, docs/design.md "VM disk backups"), on
// libvirt through pkg/virt.
//
// Mapping: the VirtualMachine <name> of namespace <ns> is the libvirt
// domain "<ns>_<name>"; spec.pvcName is the directory
// <volume-root>/<ns>/<pvcName>, and a backup writes into its own
// subdirectory <vmb name>/: one qcow2 per disk and manifest.json.
//
// A backup waits (Progressing false, with the reason) while its volume
// directory does not exist or another backup of the same VM runs. A
// backup of a tracker whose status has a checkpoint is incremental since
// it (its files get the previous backup's files as backing files); without
// one, or with forceFullBackup, it is full. A checkpoint libvirt lost (the
// domain was defined anew) is redefined from the tracker; one whose bitmap
// is inconsistent (QEMU was killed) makes the backup full, and the status
// says why. A backup of a tracker whose VM has a disk that keeps no dirty
// bitmaps (raw, changed block tracking not enabled: pkg/engine/vmcbt) is
// full without a checkpoint, says so (CompletedWithWarning) and leaves the
// tracker without a checkpoint. The space needed (the disks' allocation for a full backup, the
// checkpoint's size for an incremental) is checked against the free space
// first. The guest is quiesced through its agent unless skipQuiesce; without
// an agent the backup goes on and the Quiesced condition says so. On
// success the tracker moves to the new checkpoint (with its XML, for
// redefinition, and the files written, for the next incremental's chain)
// and its previous checkpoint is deleted; on failure the new checkpoint and
// the partial output are removed and the tracker is unchanged. A cancel
// (virtualmachinebackups/<name>/cancel) or the deletion of a running
// VirtualMachineBackup aborts its libvirt job: Failed, reason Aborted.
//
// A backup running when the server stopped is Failed at the next start
// (its libvirt job was aborted with the connection's end or is aborted).
//
// Replicas on several libvirt hosts (pkg/engine/vmhost): each host's
// engine backs up the VMs whose domains its libvirt has, leaves the
// others to their hosts and fails a backup whose VM no live host has; at
// its start it fails only the interrupted backups of its own VMs.
package vmbackup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/engine/vmhost"
	"github.com/backstop-io/backstop/pkg/failpoint"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	informers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/kubevirtbackup/v1alpha1"
	listers "github.com/backstop-io/backstop/pkg/generated/listers/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/virt"
)

// waitPoll is how often a waiting backup looks again.
const waitPoll = 2 * time.Second

// Config is what the engine needs.
type Config struct {
	Client   versioned.Interface
	Backups  informers.VirtualMachineBackupInformer
	Trackers informers.VirtualMachineBackupTrackerInformer
	// Virt returns the libvirt connection (an error wrapping
	// virt.ErrUnavailable when there is no libvirt).
	Virt       func() (virt.Hypervisor, error)
	VolumeRoot string
	Clock      clock.Clock
	// FullBackupPull makes full backups copy in pull mode
	// (virt.FullBackupPull) instead of running libvirt's push job.
	FullBackupPull bool
	// Observers are told about the state transitions the engine writes.
	Observers []status.Observer
	// Crash kills the server at a named point (crash-point tests).
	Crash failpoint.Set
	// Locks are shared with the restore engine, which restores VMs'
	// disks (nil: the engine's own).
	Locks *vmhost.Locks
	// Hosts, when the replicas run on several libvirt hosts, is this
	// one's: a backup of a VM another host runs is left to it (nil: this
	// is the only host).
	Hosts *vmhost.Hosts
}

// Controller is the VirtualMachineBackup engine.
type Controller struct {
	*reconcile.Loop
	cfg      Config
	backups  listers.VirtualMachineBackupLister
	trackers listers.VirtualMachineBackupTrackerLister
	synced   []cache.InformerSynced

	mu      sync.Mutex
	running map[types.UID]*run
	// locks: one backup, chain edit or restore of a VM at a time.
	locks *vmhost.Locks
	wg    sync.WaitGroup
}

type run struct {
	cancel context.CancelFunc
}

// New returns the engine.
func New(cfg Config) (*Controller, error) {
	c := &Controller{cfg: cfg, backups: cfg.Backups.Lister(), trackers: cfg.Trackers.Lister(),
		running: map[types.UID]*run{}, locks: cfg.Locks}
	if c.locks == nil {
		c.locks = vmhost.NewLocks()
	}
	c.Loop = reconcile.NewLoop("vmbackup", c.sync)
	if err := c.Watch(cfg.Backups.Informer()); err != nil {
		return nil, err
	}
	c.WaitFor(cfg.Trackers.Informer())
	c.synced = []cache.InformerSynced{cfg.Backups.Informer().HasSynced, cfg.Trackers.Informer().HasSynced}
	return c, nil
}

// Run fails the backups a previous process left running, then runs
// backups until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("controller", "vmbackup"))
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return
	}
	c.recoverMerges(ctx)
	if all, err := c.backups.List(labels.Everything()); err == nil {
		for _, b := range all {
			if cond := meta.FindStatusCondition(conditions(b), string(kv.ConditionProgressing)); cond != nil &&
				cond.Status == metav1.ConditionTrue && !b.State().Terminal() && c.ranHere(ctx, b) {
				c.recoverInterrupted(ctx, b)
			}
		}
	}
	c.Loop.Run(ctx, workers)
	c.wg.Wait()
}

// holder is a backup as the holder of its VM's lock.
func (c *Controller) holder(b *kv.VirtualMachineBackup) vmhost.Holder {
	return vmhost.Holder{ID: string(b.UID), What: "backup " + b.Name, WaitReason: kv.ReasonWaitingForOtherBackup}
}

// checkpointName is the checkpoint a backup of a tracker creates: unique
// per domain even when a backup is deleted and created again.
func checkpointName(b *kv.VirtualMachineBackup) string {
	return fmt.Sprintf("%s-%s", b.Name, string(b.UID)[:8])
}

func conditions(b *kv.VirtualMachineBackup) []metav1.Condition {
	if b.Status == nil {
		return nil
	}
	return b.Status.Conditions
}

// source is what a backup backs up.
type source struct {
	vm      string
	tracker *kv.VirtualMachineBackupTracker
}

// resolve finds what a backup backs up; notFound is set when its tracker
// does not exist (an error without it is the API's, to try again).
func (c *Controller) resolve(ctx context.Context, b *kv.VirtualMachineBackup) (src source, notFound bool, err error) {
	if b.Spec.Source.Kind == "VirtualMachineBackupTracker" {
		t, err := c.trackers.VirtualMachineBackupTrackers(b.Namespace).Get(b.Spec.Source.Name)
		if apierrors.IsNotFound(err) {
			// The informer may not have seen yet a tracker made just
			// before its backup (the Velero backup's VM action makes
			// both): the API decides.
			t, err = c.cfg.Client.BackupV1alpha1().VirtualMachineBackupTrackers(b.Namespace).Get(ctx, b.Spec.Source.Name, metav1.GetOptions{})
		}
		if err != nil {
			return source{}, apierrors.IsNotFound(err), fmt.Errorf("tracker %s: %w", b.Spec.Source.Name, err)
		}
		return source{vm: t.Spec.Source.Name, tracker: t}, false, nil
	}
	return source{vm: b.Spec.Source.Name}, false, nil
}

func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	b, err := c.backups.VirtualMachineBackups(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	c.mu.Lock()
	r, isRunning := c.running[b.UID]
	c.mu.Unlock()
	if b.DeletionTimestamp != nil {
		if isRunning {
			r.cancel() // the run aborts the job, removes what it wrote, fails the backup: then here again
			return nil
		}
		// Nothing runs (a run cleans up before it ends, a restart's
		// recovery before the loop starts): a finished backup's output
		// leaves its chain, then the finalizer goes.
		if done, err := c.removeOutput(ctx, key, b); !done || err != nil {
			return err
		}
		return reconcile.RemoveFinalizer(ctx, c.cfg.Client.BackupV1alpha1().VirtualMachineBackups(b.Namespace), b, kv.CleanupFinalizer, kv.EngineVMBackup)
	}
	if b.State().Terminal() {
		return nil
	}
	if _, cancel := b.Annotations[kv.CancelAnnotation]; cancel {
		if isRunning {
			r.cancel() // the run ends Aborted
			return nil
		}
		c.fail(ctx, b, kv.ReasonAborted, "the backup was cancelled before it started")
		return nil
	}
	if isRunning {
		return nil
	}
	// The informer's copy may not show that the backup ended (failed at
	// this start, say): decide on the backup as stored.
	if b, err = c.cfg.Client.BackupV1alpha1().VirtualMachineBackups(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if b.State().Terminal() || b.DeletionTimestamp != nil {
		return nil
	}
	src, notFound, err := c.resolve(ctx, b)
	if notFound {
		c.fail(ctx, b, kv.ReasonSourceNotFound, err.Error())
		return nil
	}
	if err != nil {
		return err
	}
	conn, err := c.cfg.Virt()
	if err != nil {
		c.fail(ctx, b, kv.ReasonLibvirtUnavailable, err.Error())
		return nil
	}
	if here, err := c.onThisHost(ctx, key, b, conn, src); !here || err != nil {
		return err
	}
	volume, err := c.volumes().Join(b.Namespace, *b.Spec.PvcName)
	if err != nil {
		c.fail(ctx, b, kv.ReasonFailed, fmt.Sprintf("spec.pvcName: %v", err))
		return nil
	}
	if fi, err := os.Stat(volume); err != nil || !fi.IsDir() {
		c.wait(ctx, key, b, kv.ReasonWaitingForVolume, fmt.Sprintf("the volume directory %s does not exist yet", volume))
		return nil
	}
	vmKey, holder := b.Namespace+"/"+src.vm, c.holder(b)
	if other, ok := c.locks.TryLock(vmKey, holder); !ok {
		c.wait(ctx, key, b, other.WaitReason, fmt.Sprintf("%s of VirtualMachine %s is running", other.What, src.vm))
		return nil
	}
	runCtx, cancel := context.WithCancel(ctx)
	c.mu.Lock()
	c.running[b.UID] = &run{cancel: cancel}
	c.mu.Unlock()

	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			cancel()
			c.mu.Lock()
			delete(c.running, b.UID)
			c.mu.Unlock()
			c.locks.Unlock(vmKey, holder)
			// This one again (deleted meanwhile: its finalizer goes now).
			c.Add(key)
			// Backups of the same VM waiting for this one.
			if others, err := c.backups.VirtualMachineBackups(b.Namespace).List(labels.Everything()); err == nil {
				for _, o := range others {
					if o.UID != b.UID && !o.State().Terminal() {
						c.Add(cache.ObjectName{Namespace: o.Namespace, Name: o.Name})
					}
				}
			}
		}()
		c.execute(ctx, runCtx, b, conn, src, volume)
	}()
	return nil
}

// placement is where a VM is among the live hosts.
type placement int

const (
	// placedHere: this host's libvirt has the VM's domain.
	placedHere placement = iota
	// placedElsewhere: another live host may have it.
	placedElsewhere
	// placedNowhere: no live host has it.
	placedNowhere
	// placedRecorded: this host's entry in the backup's list of hosts
	// lacking the VM was just written: the update brings it back.
	placedRecorded
)

// locate says where the backup's VM is (always here for a single host),
// recording on the backup that this host lacks it, or taking this host off
// that list before it acts on the VM. live are the live hosts.
func (c *Controller) locate(ctx context.Context, b *kv.VirtualMachineBackup, conn virt.Hypervisor, vm string) (where placement, live []string, err error) {
	if c.cfg.Hosts == nil {
		return placedHere, nil, nil
	}
	domain := b.Namespace + "_" + vm
	backups := c.cfg.Client.BackupV1alpha1().VirtualMachineBackups(b.Namespace)
	if _, err := conn.Disks(domain); !errors.Is(err, virt.ErrDomainNotFound) {
		if value, changed := c.cfg.Hosts.Present(b.Annotations); changed {
			// Taken off the list first: no other host may conclude the
			// VM is on none while this one acts on it.
			b = b.DeepCopy()
			b.Annotations = vmhost.Set(b.Annotations, value)
			if _, err := backups.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
				return 0, nil, fmt.Errorf("taking host %s off the hosts lacking VirtualMachine %s: %w", c.cfg.Hosts.Self, vm, err)
			}
			return placedRecorded, nil, nil
		}
		return placedHere, nil, nil
	}
	absence, err := c.cfg.Hosts.Absent(ctx, b.Annotations)
	if err != nil {
		return 0, nil, err
	}
	if absence.Nowhere {
		return placedNowhere, absence.Live, nil
	}
	if absence.Changed {
		b = b.DeepCopy()
		b.Annotations = vmhost.Set(b.Annotations, absence.Value)
		if _, err := backups.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
			return 0, nil, fmt.Errorf("recording that host %s lacks VirtualMachine %s: %w", c.cfg.Hosts.Self, vm, err)
		}
	}
	return placedElsewhere, absence.Live, nil
}

// onThisHost reports whether the backup's VM runs on this host, so that
// this host's engine backs it up. One that does not is left to the host
// that runs it; one that no live host runs fails.
func (c *Controller) onThisHost(ctx context.Context, key cache.ObjectName, b *kv.VirtualMachineBackup, conn virt.Hypervisor, src source) (bool, error) {
	if c.cfg.Hosts == nil {
		return true, nil // the run says when the domain is missing
	}
	where, live, err := c.locate(ctx, b, conn, src.vm)
	switch {
	case err != nil:
		return false, err
	case where == placedNowhere && len(live) <= 1:
		return true, nil // the only host: as without others (the run says the domain is missing)
	case where == placedNowhere:
		c.fail(ctx, b, kv.ReasonSourceNotFound, fmt.Sprintf("VirtualMachine %s: no host has its libvirt domain %s (hosts %s)",
			src.vm, b.Namespace+"_"+src.vm, strings.Join(live, ", ")))
		return false, nil
	case where == placedElsewhere:
		// Another host runs it, or will say it is on none; a domain
		// defined here later is seen at the next look.
		c.AddAfter(key, waitPoll)
		return false, nil
	}
	return where == placedHere, nil
}

// ranHere reports whether a backup a previous process was running ran on
// this host: its VM's domain is here (or no host has it).
func (c *Controller) ranHere(ctx context.Context, b *kv.VirtualMachineBackup) bool {
	if c.cfg.Hosts == nil {
		return true
	}
	src, _, err := c.resolve(ctx, b)
	if err != nil {
		return true
	}
	conn, err := c.cfg.Virt()
	if err != nil {
		return true
	}
	_, err = conn.Disks(b.Namespace + "_" + src.vm)
	return !errors.Is(err, virt.ErrDomainNotFound)
}

// wait records why a backup waits and looks again later.
func (c *Controller) wait(ctx context.Context, key cache.ObjectName, b *kv.VirtualMachineBackup, reason, msg string) {
	c.setConditions(ctx, b, metav1.Condition{Type: string(kv.ConditionProgressing), Status: metav1.ConditionFalse, Reason: reason, Message: msg})
	c.AddAfter(key, waitPoll)
}
