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
package vmbackup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	"github.com/backstop-io/backstop/pkg/failpoint"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	informers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/kubevirtbackup/v1alpha1"
	listers "github.com/backstop-io/backstop/pkg/generated/listers/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/virt"
	"github.com/backstop-io/backstop/pkg/vmmanifest"
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
	busy    map[string]types.UID // "<ns>/<vm>" → the backup running for it
	wg      sync.WaitGroup
}

type run struct {
	cancel context.CancelFunc
}

// New returns the engine.
func New(cfg Config) (*Controller, error) {
	c := &Controller{cfg: cfg, backups: cfg.Backups.Lister(), trackers: cfg.Trackers.Lister(),
		running: map[types.UID]*run{}, busy: map[string]types.UID{}}
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
	if all, err := c.backups.List(labels.Everything()); err == nil {
		for _, b := range all {
			if cond := meta.FindStatusCondition(conditions(b), string(kv.ConditionProgressing)); cond != nil &&
				cond.Status == metav1.ConditionTrue && !b.State().Terminal() {
				c.recoverInterrupted(ctx, b)
			}
		}
	}
	c.Loop.Run(ctx, workers)
	c.wg.Wait()
}

// recoverInterrupted settles a backup a previous process was running: its
// libvirt job (which the daemon may still run) is aborted, its new
// checkpoint and partial output removed, and it is Failed with the reason.
func (c *Controller) recoverInterrupted(ctx context.Context, b *kv.VirtualMachineBackup) {
	msg := "the server stopped while the backup ran"
	if src, err := c.resolve(b); err == nil {
		if conn, err := c.cfg.Virt(); err == nil {
			domain := b.Namespace + "_" + src.vm
			if err := conn.AbortJob(ctx, domain); err != nil {
				msg += "; aborting its libvirt job: " + err.Error()
			}
			if err := conn.DeleteCheckpoint(domain, checkpointName(b)); err != nil {
				msg += "; deleting its checkpoint: " + err.Error()
			}
			if b.Spec.PvcName != nil {
				// QEMU closes the targets a little after the job ends.
				out := filepath.Join(c.cfg.VolumeRoot, b.Namespace, *b.Spec.PvcName, b.Name)
				entries, _ := os.ReadDir(out)
				for _, e := range entries {
					_ = virt.WaitReleased(ctx, filepath.Join(out, e.Name()))
				}
			}
		}
	}
	if b.Spec.PvcName != nil {
		_ = os.RemoveAll(filepath.Join(c.cfg.VolumeRoot, b.Namespace, *b.Spec.PvcName, b.Name))
	}
	c.fail(ctx, b, kv.ReasonServerRestarted, msg+"; its partial output was removed: run it again")
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

func (c *Controller) resolve(b *kv.VirtualMachineBackup) (source, error) {
	if b.Spec.Source.Kind == "VirtualMachineBackupTracker" {
		t, err := c.trackers.VirtualMachineBackupTrackers(b.Namespace).Get(b.Spec.Source.Name)
		if err != nil {
			return source{}, fmt.Errorf("tracker %s: %w", b.Spec.Source.Name, err)
		}
		return source{vm: t.Spec.Source.Name, tracker: t}, nil
	}
	return source{vm: b.Spec.Source.Name}, nil
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
		// Nothing runs: whatever a run wrote is gone (a run cleans up
		// before it ends, a restart's recovery before the loop starts).
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
	src, err := c.resolve(b)
	if err != nil {
		c.fail(ctx, b, kv.ReasonSourceNotFound, err.Error())
		return nil
	}
	volume := filepath.Join(c.cfg.VolumeRoot, b.Namespace, *b.Spec.PvcName)
	if fi, err := os.Stat(volume); err != nil || !fi.IsDir() {
		c.wait(ctx, key, b, kv.ReasonWaitingForVolume, fmt.Sprintf("the volume directory %s does not exist yet", volume))
		return nil
	}
	vmKey := b.Namespace + "/" + src.vm
	c.mu.Lock()
	if other, ok := c.busy[vmKey]; ok && other != b.UID {
		c.mu.Unlock()
		c.wait(ctx, key, b, kv.ReasonWaitingForOtherBackup, fmt.Sprintf("another backup of VirtualMachine %s is running", src.vm))
		return nil
	}
	conn, err := c.cfg.Virt()
	if err != nil {
		c.mu.Unlock()
		c.fail(ctx, b, kv.ReasonLibvirtUnavailable, err.Error())
		return nil
	}
	runCtx, cancel := context.WithCancel(ctx)
	c.running[b.UID] = &run{cancel: cancel}
	c.busy[vmKey] = b.UID
	c.mu.Unlock()

	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			cancel()
			c.mu.Lock()
			delete(c.running, b.UID)
			if c.busy[vmKey] == b.UID {
				delete(c.busy, vmKey)
			}
			c.mu.Unlock()
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

// wait records why a backup waits and looks again later.
func (c *Controller) wait(ctx context.Context, key cache.ObjectName, b *kv.VirtualMachineBackup, reason, msg string) {
	c.setConditions(ctx, b, metav1.Condition{Type: string(kv.ConditionProgressing), Status: metav1.ConditionFalse, Reason: reason, Message: msg})
	c.AddAfter(key, waitPoll)
}

// execute runs one backup to its end.
func (c *Controller) execute(ctx, runCtx context.Context, b *kv.VirtualMachineBackup, conn virt.Hypervisor, src source, volume string) {
	logger := klog.FromContext(ctx).WithValues("virtualMachineBackup", klog.KObj(b), "virtualMachine", src.vm)
	domain := b.Namespace + "_" + src.vm
	now := c.cfg.Clock.Now()
	c.setConditions(ctx, b, metav1.Condition{Type: string(kv.ConditionProgressing), Status: metav1.ConditionTrue, Reason: kv.ReasonInitiated,
		Message: fmt.Sprintf("backing up domain %s", domain)})

	disks, err := conn.Disks(domain)
	if err != nil {
		c.fail(ctx, b, kv.ReasonSourceNotFound, fmt.Sprintf("VirtualMachine %s (libvirt domain %s): %v", src.vm, domain, err))
		return
	}

	// Full or incremental. Disks without dirty bitmaps (raw, without
	// changed block tracking) get a full backup and no checkpoint.
	backupType, since, fallback := kv.Full, "", ""
	backing := map[string]string{}
	untracked := untrackedDisks(disks)
	if src.tracker != nil && len(untracked) > 0 {
		fallback = fmt.Sprintf("disk(s) %s of VirtualMachine %s keep no dirty bitmaps (raw, changed block tracking %s): a full backup without a checkpoint was taken",
			strings.Join(untracked, ", "), src.vm, cbtState(src.tracker))
		logger.Info("Full backup without a checkpoint", "reason", fallback)
	} else if src.tracker != nil && src.tracker.Status != nil && src.tracker.Status.LatestCheckpoint != nil && !b.Spec.ForceFullBackup {
		cp := src.tracker.Status.LatestCheckpoint
		if fallback = c.prepareIncremental(conn, domain, cp, disks, backing); fallback == "" {
			backupType, since = kv.Incremental, cp.Name
		} else {
			logger.Info("Incremental backup not possible: taking a full one", "reason", fallback)
			backing = map[string]string{}
		}
	}

	// Space.
	var need uint64
	if backupType == kv.Incremental {
		if need, err = conn.CheckpointSize(domain, since); err != nil {
			c.fail(ctx, b, kv.ReasonFailed, err.Error())
			return
		}
	} else {
		for _, d := range disks {
			need += d.Allocation
		}
	}
	if free, err := vmmanifest.FreeBytes(volume); err == nil && need > free {
		c.fail(ctx, b, kv.ReasonInsufficientSpace, fmt.Sprintf("the backup needs %d bytes but %s has %d bytes free", need, volume, free))
		return
	}

	out := filepath.Join(volume, b.Name)
	if err := os.RemoveAll(out); err != nil {
		c.fail(ctx, b, kv.ReasonFailed, err.Error())
		return
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		c.fail(ctx, b, kv.ReasonFailed, err.Error())
		return
	}
	checkpoint := ""
	if src.tracker != nil && len(untracked) == 0 {
		checkpoint = checkpointName(b)
	}
	var lastProgress time.Time
	backup := conn.PushBackup
	if backupType == kv.Full && c.cfg.FullBackupPull {
		backup = func(ctx context.Context, req virt.BackupRequest, progress func(virt.Progress)) (virt.BackupResult, error) {
			return conn.FullBackupPull(ctx, req, 0, progress)
		}
	}
	res, err := backup(runCtx, virt.BackupRequest{
		Domain: domain, TargetDir: out, Incremental: since, Backing: backing, Checkpoint: checkpoint, Quiesce: !b.Spec.SkipQuiesce,
		Begun: func() { c.cfg.Crash.Hit(failpoint.VMBackupAfterBegin) },
	}, func(p virt.Progress) {
		if time.Since(lastProgress) < time.Second {
			return
		}
		lastProgress = time.Now()
		c.updateStatus(ctx, b, func(st *kv.VirtualMachineBackupStatus) {
			st.Progress = &kv.BackupProgress{TotalBytes: int64(p.Total), BytesDone: int64(p.Done)}
		})
	})
	if err != nil {
		_ = os.RemoveAll(out)
		if errors.Is(err, virt.ErrAborted) {
			if ctx.Err() != nil {
				return // the server is stopping: failed at the next start
			}
			logger.Info("Backup aborted (cancelled or deleted)")
			c.fail(ctx, b, kv.ReasonAborted, "the backup was aborted; its partial output and checkpoint were removed")
			return
		}
		if errors.Is(err, virt.ErrDomainStopped) {
			c.fail(ctx, b, kv.ReasonSourceLost, fmt.Sprintf("VirtualMachine %s (domain %s) stopped during the backup; its partial output and checkpoint were removed", src.vm, domain))
			return
		}
		c.fail(ctx, b, kv.ReasonFailed, err.Error())
		return
	}

	// Manifest.
	lv, qv, _ := conn.Versions()
	m := vmmanifest.Manifest{Backup: b.Name, VirtualMachine: src.vm, Domain: domain, Type: backupType, Checkpoint: checkpoint, Parent: since,
		Created: now.UTC(), LibvirtVersion: lv, QEMUVersion: qv}
	var volumes []kv.BackupVolumeInfo
	for _, d := range disks {
		file := res.Targets[d.Name]
		sum, err := vmmanifest.FileSHA256(file)
		if err != nil {
			c.failCleanup(ctx, b, conn, domain, checkpoint, out, err.Error())
			return
		}
		m.Disks = append(m.Disks, vmmanifest.Disk{Name: d.Name, File: filepath.Base(file), VirtualSize: d.VirtualSize, Backing: backing[d.Name], SHA256: sum})
		volumes = append(volumes, kv.BackupVolumeInfo{VolumeName: d.Name, DiskTarget: d.Name, DataEndpoint: file})
	}
	if err := vmmanifest.Write(out, m); err != nil {
		c.failCleanup(ctx, b, conn, domain, checkpoint, out, err.Error())
		return
	}

	c.cfg.Crash.Hit(failpoint.VMBackupBeforeTrackerMoves)
	// The tracker moves to the new checkpoint (none: its VM cannot track
	// changes, there is nothing to be incremental to).
	if src.tracker != nil && checkpoint == "" {
		if err := c.moveTracker(ctx, src.tracker, nil); err != nil {
			c.failCleanup(ctx, b, conn, domain, "", out, fmt.Sprintf("clearing the checkpoint of tracker %s: %v", src.tracker.Name, err))
			return
		}
		// Its previous checkpoint, if libvirt still has it (bitmaps of
		// the VM's qcow2 disks), is of no use now.
		if st := src.tracker.Status; st != nil && st.LatestCheckpoint != nil {
			if err := conn.DeleteCheckpoint(domain, st.LatestCheckpoint.Name); err != nil {
				logger.Error(err, "Deleting the tracker's previous checkpoint", "checkpoint", st.LatestCheckpoint.Name)
			}
		}
	} else if src.tracker != nil {
		xmlDesc, err := conn.CheckpointXML(domain, checkpoint)
		if err == nil {
			err = c.moveTracker(ctx, src.tracker, &kv.BackupCheckpoint{Name: checkpoint, CreationTime: &metav1.Time{Time: now},
				Volumes: volumes, Disks: diskNames(disks), CheckpointXML: xmlDesc})
		}
		if err != nil {
			c.failCleanup(ctx, b, conn, domain, checkpoint, out, fmt.Sprintf("moving tracker %s to checkpoint %s: %v", src.tracker.Name, checkpoint, err))
			return
		}
		if since != "" {
			if err := conn.DeleteCheckpoint(domain, since); err != nil {
				logger.Error(err, "Deleting the previous checkpoint", "checkpoint", since)
			}
		}
	}

	conds := []metav1.Condition{
		{Type: string(kv.ConditionProgressing), Status: metav1.ConditionFalse, Reason: kv.ReasonCompleted, Message: "the backup has completed"},
		quiesceCondition(b, res),
	}
	complete := metav1.Condition{Type: string(kv.ConditionComplete), Status: metav1.ConditionTrue, Reason: kv.ReasonCompleted,
		Message: fmt.Sprintf("%s backup of %d disk(s), %d bytes copied", backupType, len(disks), res.Bytes)}
	switch {
	case len(untracked) > 0 && src.tracker != nil:
		complete.Reason, complete.Message = kv.ReasonCompletedWithWarning, fallback
	case fallback != "":
		complete.Reason = kv.ReasonCompletedWithWarning
		complete.Message = fmt.Sprintf("a full backup was taken instead of an incremental one: %s", fallback)
	}
	conds = append(conds, complete)
	c.updateStatus(ctx, b, func(st *kv.VirtualMachineBackupStatus) {
		st.Type, st.BackupType = backupType, backupType
		if checkpoint != "" {
			st.CheckpointName = &checkpoint
		}
		st.IncludedVolumes = volumes
		st.Progress = &kv.BackupProgress{TotalBytes: int64(res.Bytes), BytesDone: int64(res.Bytes)}
		for _, cond := range conds {
			meta.SetStatusCondition(&st.Conditions, cond)
		}
	})
	logger.Info("VM backup completed", "type", backupType, "bytes", res.Bytes, "checkpoint", checkpoint)
}

// prepareIncremental makes sure libvirt knows the tracker's checkpoint and
// that the previous files exist; it returns why an incremental is not
// possible ("" when it is) and fills backing.
func (c *Controller) prepareIncremental(conn virt.Hypervisor, domain string, cp *kv.BackupCheckpoint, disks []virt.Disk, backing map[string]string) string {
	for _, v := range cp.Volumes {
		backing[v.DiskTarget] = v.DataEndpoint
	}
	for _, d := range disks {
		f := backing[d.Name]
		if f == "" {
			return fmt.Sprintf("disk %s has no previous backup in checkpoint %s", d.Name, cp.Name)
		}
		if _, err := os.Stat(f); err != nil {
			return fmt.Sprintf("the previous backup file of disk %s is gone: %v", d.Name, err)
		}
	}
	// Known to libvirt or not, the checkpoint is (re)defined with
	// validation: its bitmaps must be consistent.
	if err := conn.VerifyCheckpoint(domain, cp.Name, cp.CheckpointXML); err != nil {
		if errors.Is(err, virt.ErrCheckpointInconsistent) {
			msg := fmt.Sprintf("checkpoint %s is inconsistent (the VM's QEMU stopped abnormally?): %v", cp.Name, err)
			if rerr := conn.RemoveStaleCheckpoint(domain, cp.Name, cp.CheckpointXML); rerr != nil {
				return msg + "; removing its stale bitmaps: " + rerr.Error()
			}
			return msg + "; its stale bitmaps, if any, were removed"
		}
		return fmt.Sprintf("checkpoint %s: %v", cp.Name, err)
	}
	return ""
}

func quiesceCondition(b *kv.VirtualMachineBackup, res virt.BackupResult) metav1.Condition {
	cond := metav1.Condition{Type: string(kv.ConditionQuiesced)}
	switch {
	case b.Spec.SkipQuiesce:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, kv.ReasonQuiesceSkipped, "skipQuiesce is set"
	case res.Quiesced:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, kv.ReasonQuiesceSucceeded, "the guest's file systems were frozen when the backup started"
	default:
		msg := "the guest's file systems were not frozen"
		if res.QuiesceError != nil {
			msg += ": " + res.QuiesceError.Error()
		}
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, kv.ReasonQuiesceFailed, msg
	}
	return cond
}

func diskNames(disks []virt.Disk) []string {
	out := make([]string, 0, len(disks))
	for _, d := range disks {
		out = append(out, d.Name)
	}
	return out
}

// untrackedDisks names the disks that cannot hold dirty bitmaps (not
// qcow2).
func untrackedDisks(disks []virt.Disk) []string {
	var out []string
	for _, d := range disks {
		if d.Format != "qcow2" {
			out = append(out, d.Name)
		}
	}
	return out
}

// cbtState is the tracker's changed block tracking state, for messages.
func cbtState(t *kv.VirtualMachineBackupTracker) string {
	if t.Status == nil || t.Status.ChangedBlockTracking == nil || t.Status.ChangedBlockTracking.State == "" {
		return "not set up"
	}
	return string(t.Status.ChangedBlockTracking.State)
}

// moveTracker points the tracker at cp (nil: no checkpoint).
func (c *Controller) moveTracker(ctx context.Context, t *kv.VirtualMachineBackupTracker, cp *kv.BackupCheckpoint) error {
	_, err := c.writer().VirtualMachineBackupTrackers(c.cfg.Client, t.Namespace).Update(ctx, t, func(cur *kv.VirtualMachineBackupTracker) {
		if cur.Status == nil {
			cur.Status = &kv.VirtualMachineBackupTrackerStatus{}
		}
		cur.Status.LatestCheckpoint = cp
		no := false
		cur.Status.CheckpointRedefinitionRequired = &no
	})
	return err
}

func (c *Controller) failCleanup(ctx context.Context, b *kv.VirtualMachineBackup, conn virt.Hypervisor, domain, checkpoint, out, msg string) {
	if checkpoint != "" {
		_ = conn.DeleteCheckpoint(domain, checkpoint)
	}
	_ = os.RemoveAll(out)
	c.fail(ctx, b, kv.ReasonFailed, msg)
}

// fail ends a backup: Failed true with the reason, Progressing false.
func (c *Controller) fail(ctx context.Context, b *kv.VirtualMachineBackup, reason, msg string) {
	klog.FromContext(ctx).Info("VM backup failed", "virtualMachineBackup", klog.KObj(b), "reason", reason, "message", msg)
	c.setConditions(ctx, b,
		metav1.Condition{Type: string(kv.ConditionProgressing), Status: metav1.ConditionFalse, Reason: reason, Message: msg},
		metav1.Condition{Type: string(kv.ConditionFailed), Status: metav1.ConditionTrue, Reason: reason, Message: msg})
}

func (c *Controller) setConditions(ctx context.Context, b *kv.VirtualMachineBackup, conds ...metav1.Condition) {
	c.updateStatus(ctx, b, func(st *kv.VirtualMachineBackupStatus) {
		for _, cond := range conds {
			meta.SetStatusCondition(&st.Conditions, cond)
		}
	})
}

// writer is the engine's status writer.
func (c *Controller) writer() status.Writer {
	return status.Writer{Engine: kv.EngineVMBackup, Observers: c.cfg.Observers}
}

// updateStatus applies mutate to the backup's current status. A backup
// that has ended is not written again.
func (c *Controller) updateStatus(ctx context.Context, b *kv.VirtualMachineBackup, mutate func(*kv.VirtualMachineBackupStatus)) {
	_, err := c.writer().VirtualMachineBackups(c.cfg.Client, b.Namespace).Update(ctx, b, func(cur *kv.VirtualMachineBackup) {
		if cur.State().Terminal() {
			return
		}
		if cur.Status == nil {
			cur.Status = &kv.VirtualMachineBackupStatus{}
		}
		mutate(cur.Status)
	})
	if err != nil && !status.Gone(err) {
		klog.FromContext(ctx).Error(err, "Updating the status of a VM backup", "virtualMachineBackup", klog.KObj(b))
	}
}
