package vmbackup

// One run of a VM backup: the libvirt job, the manifest, the tracker
// move, and how a run ends.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/failpoint"
	"github.com/backstop-io/backstop/pkg/virt"
	"github.com/backstop-io/backstop/pkg/vmchain"
	"github.com/backstop-io/backstop/pkg/vmmanifest"
)

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
	// changed block tracking) get a full backup and no checkpoint; so does
	// a VM that is not running (libvirt makes no checkpoint of a stopped
	// domain): its tracker keeps its checkpoint, and the next backup of
	// the running VM is incremental since it.
	backupType, since, fallback, bounded := kv.Full, "", "", ""
	backing := map[string]string{}
	untracked := untrackedDisks(disks)
	active, activeErr := conn.Active(domain)
	stopped := activeErr == nil && !active
	if stopped && src.tracker != nil {
		fallback = fmt.Sprintf("VirtualMachine %s is not running: a full copy of its disks was taken, without a checkpoint (libvirt makes none of a stopped VM); the tracker keeps its checkpoint for the next backup of the running VM", src.vm)
		logger.Info("Full backup of a stopped VM", "reason", fallback)
	} else if src.tracker != nil && len(untracked) > 0 {
		fallback = fmt.Sprintf("disk(s) %s of VirtualMachine %s keep no dirty bitmaps (raw, changed block tracking %s): a full backup without a checkpoint was taken",
			strings.Join(untracked, ", "), src.vm, cbtState(src.tracker))
		logger.Info("Full backup without a checkpoint", "reason", fallback)
	} else if src.tracker != nil && src.tracker.Status != nil && src.tracker.Status.LatestCheckpoint != nil && !b.Spec.ForceFullBackup {
		cp := src.tracker.Status.LatestCheckpoint
		if bounded = c.chainFull(b, domain, cp.Name); bounded != "" {
			logger.Info("Full backup: the chain is as long as it may be", "reason", bounded)
		} else if fallback = c.prepareIncremental(conn, domain, cp, disks, backing); fallback == "" {
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

	if err := c.removeOutputDir(b); err != nil {
		c.fail(ctx, b, kv.ReasonFailed, err.Error())
		return
	}
	out, err := c.volumes().MkdirAll(0o755, b.Namespace, *b.Spec.PvcName, b.Name)
	if err != nil {
		c.fail(ctx, b, kv.ReasonFailed, err.Error())
		return
	}
	checkpoint := ""
	if src.tracker != nil && len(untracked) == 0 && !stopped {
		checkpoint = checkpointName(b)
	}
	var lastProgress time.Time
	backup := conn.PushBackup
	switch {
	case stopped:
		backup = conn.CopyStopped
	case backupType == kv.Full && c.cfg.FullBackupPull:
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
		_ = c.removeOutputDir(b)
		if errors.Is(err, virt.ErrAborted) {
			if ctx.Err() != nil {
				return // the server is stopping: failed at the next start
			}
			logger.Info("Backup aborted (cancelled or deleted)")
			c.fail(ctx, b, kv.ReasonAborted, "the backup was aborted; its partial output and checkpoint were removed")
			return
		}
		if errors.Is(err, virt.ErrDomainStarted) {
			c.fail(ctx, b, kv.ReasonSourceLost, fmt.Sprintf("VirtualMachine %s (domain %s) started during the copy of its stopped disks; its partial output was removed: back it up again", src.vm, domain))
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
	if def, err := conn.DomainDefinition(domain); err == nil {
		m.Definition = def
	}
	var volumes []kv.BackupVolumeInfo
	for _, d := range disks {
		file := res.Targets[d.Name]
		sum, err := vmmanifest.FileSHA256(file)
		if err != nil {
			c.failCleanup(ctx, b, conn, domain, checkpoint, err.Error())
			return
		}
		m.Disks = append(m.Disks, vmmanifest.Disk{Name: d.Name, File: filepath.Base(file), VirtualSize: d.VirtualSize, Backing: backing[d.Name], SHA256: sum})
		volumes = append(volumes, kv.BackupVolumeInfo{VolumeName: d.Name, DiskTarget: d.Name, DataEndpoint: file})
	}
	if err := vmmanifest.Write(out, m); err != nil {
		c.failCleanup(ctx, b, conn, domain, checkpoint, err.Error())
		return
	}

	c.cfg.Crash.Hit(failpoint.VMBackupBeforeTrackerMoves)
	// The tracker moves to the new checkpoint (none: its VM cannot track
	// changes, there is nothing to be incremental to); a stopped VM's
	// backup leaves it where it is.
	if src.tracker != nil && checkpoint == "" && !stopped {
		if err := c.moveTracker(ctx, src.tracker, nil); err != nil {
			c.failCleanup(ctx, b, conn, domain, "", fmt.Sprintf("clearing the checkpoint of tracker %s: %v", src.tracker.Name, err))
			return
		}
		// Its previous checkpoint, if libvirt still has it (bitmaps of
		// the VM's qcow2 disks), is of no use now.
		if st := src.tracker.Status; st != nil && st.LatestCheckpoint != nil {
			if err := conn.DeleteCheckpoint(domain, st.LatestCheckpoint.Name); err != nil {
				logger.Error(err, "Deleting the tracker's previous checkpoint", "checkpoint", st.LatestCheckpoint.Name)
			}
		}
	} else if src.tracker != nil && !stopped {
		xmlDesc, err := conn.CheckpointXML(domain, checkpoint)
		if err == nil {
			err = c.moveTracker(ctx, src.tracker, &kv.BackupCheckpoint{Name: checkpoint, CreationTime: &metav1.Time{Time: now},
				Volumes: volumes, Disks: diskNames(disks), CheckpointXML: xmlDesc})
		}
		if err != nil {
			c.failCleanup(ctx, b, conn, domain, checkpoint, fmt.Sprintf("moving tracker %s to checkpoint %s: %v", src.tracker.Name, checkpoint, err))
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
	case bounded != "":
		complete.Message += ": " + bounded
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

// chainFull says why the backup is full by its chain's bound
// (kv.FullEveryAnnotation), or "": the chain ending at checkpoint already
// holds as many incrementals as the bound allows.
func (c *Controller) chainFull(b *kv.VirtualMachineBackup, domain, checkpoint string) string {
	every, err := strconv.Atoi(b.Annotations[kv.FullEveryAnnotation])
	if err != nil || every <= 0 {
		return ""
	}
	nsDir, err := c.volumes().Join(b.Namespace)
	if err != nil {
		return ""
	}
	links, err := vmchain.Links(nsDir, domain)
	if err != nil {
		return ""
	}
	n, found := vmchain.Incrementals(links, checkpoint)
	if !found || n < every {
		return ""
	}
	return fmt.Sprintf("the chain since the last full backup holds %d incremental(s), the most %s allows (%d)", n, kv.FullEveryAnnotation, every)
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

func (c *Controller) failCleanup(ctx context.Context, b *kv.VirtualMachineBackup, conn virt.Hypervisor, domain, checkpoint, msg string) {
	if checkpoint != "" {
		_ = conn.DeleteCheckpoint(domain, checkpoint)
	}
	_ = c.removeOutputDir(b)
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
