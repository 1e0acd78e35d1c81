package vmbackup

// One run of a VM backup, as steps on backupRun: the plan (plan.go), the
// space, the libvirt job, the manifest, the tracker move, and how a run
// ends.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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

// backupRun is one run of a VM backup, from its plan to its status: each
// step reads what the ones before it found, and a step that fails says
// how the run ends (failure).
type backupRun struct {
	c      *Controller
	b      *kv.VirtualMachineBackup
	conn   virt.Hypervisor
	src    source
	volume string
	domain string
	logger klog.Logger
	now    time.Time

	disks []virt.Disk
	plan  plan
	// backing are the previous files of an incremental's disks.
	backing map[string]string
	// out is the directory the files go to.
	out string
	res virt.BackupResult
	// volumes are the files written, for the status and the tracker.
	volumes []kv.BackupVolumeInfo
}

// failure is how a step ends a run: Failed with reason and message, after
// removing the output directory and the checkpoint when cleanup is set;
// or nothing at all when the server is stopping (quiet: the backup is
// failed at the next start).
type failure struct {
	reason, message string
	cleanup         bool
	quiet           bool
}

func failed(reason, message string) *failure { return &failure{reason: reason, message: message} }

// execute runs one backup to its end: plan, check, copy, record, move the
// tracker, then one status write.
func (c *Controller) execute(ctx, runCtx context.Context, b *kv.VirtualMachineBackup, conn virt.Hypervisor, src source, volume string) {
	run := &backupRun{c: c, b: b, conn: conn, src: src, volume: volume, domain: b.Namespace + "_" + src.vm, now: c.cfg.Clock.Now(),
		backing: map[string]string{}}
	run.logger = klog.FromContext(ctx).WithValues("virtualMachineBackup", klog.KObj(b), "virtualMachine", src.vm)
	c.setConditions(ctx, b, metav1.Condition{Type: string(kv.ConditionProgressing), Status: metav1.ConditionTrue, Reason: kv.ReasonInitiated,
		Message: fmt.Sprintf("backing up domain %s", run.domain)})
	for _, step := range []func(context.Context) *failure{
		run.decide, run.checkSpace, func(context.Context) *failure { return run.copyDisks(ctx, runCtx) }, run.record, run.advanceTracker,
	} {
		if f := step(ctx); f != nil {
			run.end(ctx, f)
			return
		}
	}
	run.complete(ctx)
}

// decide reads the facts and plans the backup; an incremental whose
// checkpoint or previous files do not hold becomes a full one.
func (run *backupRun) decide(context.Context) *failure {
	c, b, src := run.c, run.b, run.src
	disks, err := run.conn.Disks(run.domain)
	if err != nil {
		return failed(kv.ReasonSourceNotFound, fmt.Sprintf("VirtualMachine %s (libvirt domain %s): %v", src.vm, run.domain, err))
	}
	run.disks = disks
	active, activeErr := run.conn.Active(run.domain)
	f := facts{vm: src.vm, tracker: src.tracker, untracked: untrackedDisks(disks), stopped: activeErr == nil && !active,
		forceFull: b.Spec.ForceFullBackup, fullPull: c.cfg.FullBackupPull, checkpoint: checkpointName(b)}
	run.plan = decide(f)
	if run.plan.backupType == kv.Incremental {
		if why := c.chainFull(b, run.domain, run.plan.since); why != "" {
			run.plan = run.plan.fullBounded(why, c.cfg.FullBackupPull)
		} else if why := c.prepareIncremental(run.conn, run.domain, src.tracker.Status.LatestCheckpoint, disks, run.backing); why != "" {
			run.logger.Info("Incremental backup not possible: taking a full one", "reason", why)
			run.plan, run.backing = run.plan.fullInstead(why, c.cfg.FullBackupPull), map[string]string{}
		}
	}
	switch p := run.plan; {
	case p.bounded != "":
		run.logger.Info("Full backup: the chain is as long as it may be", "reason", p.bounded)
	case p.copy == copyStopped && p.fallback != "":
		run.logger.Info("Full backup of a stopped VM", "reason", p.fallback)
	case p.untrackedWithTracker:
		run.logger.Info("Full backup without a checkpoint", "reason", p.fallback)
	}
	return nil
}

// checkSpace: the volume has room for what the backup writes.
func (run *backupRun) checkSpace(context.Context) *failure {
	var need uint64
	if run.plan.backupType == kv.Incremental {
		var err error
		if need, err = run.conn.CheckpointSize(run.domain, run.plan.since); err != nil {
			return failed(kv.ReasonFailed, err.Error())
		}
	} else {
		for _, d := range run.disks {
			need += d.Allocation
		}
	}
	if free, err := vmmanifest.FreeBytes(run.volume); err == nil && need > free {
		return failed(kv.ReasonInsufficientSpace, fmt.Sprintf("the backup needs %d bytes but %s has %d bytes free", need, run.volume, free))
	}
	return nil
}

// copyDisks writes the disks' files into a new output directory, with
// runCtx (done when the backup is cancelled or deleted).
func (run *backupRun) copyDisks(ctx, runCtx context.Context) *failure {
	c, b, conn := run.c, run.b, run.conn
	if err := c.removeOutputDir(b); err != nil {
		return failed(kv.ReasonFailed, err.Error())
	}
	out, err := c.volumes().MkdirAll(0o755, b.Namespace, *b.Spec.PvcName, b.Name)
	if err != nil {
		return failed(kv.ReasonFailed, err.Error())
	}
	run.out = out
	backup := conn.PushBackup
	switch run.plan.copy {
	case copyStopped:
		backup = conn.CopyStopped
	case copyPull:
		backup = func(ctx context.Context, req virt.BackupRequest, progress func(virt.Progress)) (virt.BackupResult, error) {
			return conn.FullBackupPull(ctx, req, 0, progress)
		}
	}
	var lastProgress time.Time
	res, err := backup(runCtx, virt.BackupRequest{
		Domain: run.domain, TargetDir: out, Incremental: run.plan.since, Backing: run.backing, Checkpoint: run.plan.checkpoint, Quiesce: !b.Spec.SkipQuiesce,
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
	if err == nil {
		run.res = res
		return nil
	}
	_ = c.removeOutputDir(b) // the partial output
	switch {
	case errors.Is(err, virt.ErrAborted) && ctx.Err() != nil:
		return &failure{quiet: true}
	case errors.Is(err, virt.ErrAborted):
		run.logger.Info("Backup aborted (cancelled or deleted)")
		return failed(kv.ReasonAborted, "the backup was aborted; its partial output and checkpoint were removed")
	case errors.Is(err, virt.ErrDomainStarted):
		return failed(kv.ReasonSourceLost, fmt.Sprintf("VirtualMachine %s (domain %s) started during the copy of its stopped disks; its partial output was removed: back it up again", run.src.vm, run.domain))
	case errors.Is(err, virt.ErrDomainStopped):
		return failed(kv.ReasonSourceLost, fmt.Sprintf("VirtualMachine %s (domain %s) stopped during the backup; its partial output and checkpoint were removed", run.src.vm, run.domain))
	default:
		return failed(kv.ReasonFailed, err.Error())
	}
}

// record writes the manifest beside the files: what restores and chains
// read.
func (run *backupRun) record(context.Context) *failure {
	b, conn, p := run.b, run.conn, run.plan
	lv, qv, _ := conn.Versions()
	m := vmmanifest.Manifest{Backup: b.Name, VirtualMachine: run.src.vm, Domain: run.domain, Type: p.backupType, Checkpoint: p.checkpoint, Parent: p.since,
		Created: run.now.UTC(), LibvirtVersion: lv, QEMUVersion: qv}
	if def, err := conn.DomainDefinition(run.domain); err == nil {
		m.Definition = def
	}
	for _, d := range run.disks {
		file := run.res.Targets[d.Name]
		sum, err := vmmanifest.FileSHA256(file)
		if err != nil {
			return &failure{reason: kv.ReasonFailed, message: err.Error(), cleanup: true}
		}
		m.Disks = append(m.Disks, vmmanifest.Disk{Name: d.Name, File: filepath.Base(file), VirtualSize: d.VirtualSize, Backing: run.backing[d.Name], SHA256: sum})
		run.volumes = append(run.volumes, kv.BackupVolumeInfo{VolumeName: d.Name, DiskTarget: d.Name, DataEndpoint: file})
	}
	if err := vmmanifest.Write(run.out, m); err != nil {
		return &failure{reason: kv.ReasonFailed, message: err.Error(), cleanup: true}
	}
	return nil
}

// advanceTracker points the tracker at the new checkpoint, or at none
// when its VM cannot track changes; the checkpoint it pointed at before
// is of no use then.
func (run *backupRun) advanceTracker(ctx context.Context) *failure {
	run.c.cfg.Crash.Hit(failpoint.VMBackupBeforeTrackerMoves)
	c, conn, t, p := run.c, run.conn, run.src.tracker, run.plan
	switch p.tracker {
	case trackerCleared:
		if err := c.moveTracker(ctx, t, nil); err != nil {
			return &failure{reason: kv.ReasonFailed, message: fmt.Sprintf("clearing the checkpoint of tracker %s: %v", t.Name, err), cleanup: true}
		}
		// Its previous checkpoint, if libvirt still has it (bitmaps of
		// the VM's qcow2 disks), is of no use now.
		if st := t.Status; st != nil && st.LatestCheckpoint != nil {
			if err := conn.DeleteCheckpoint(run.domain, st.LatestCheckpoint.Name); err != nil {
				run.logger.Error(err, "Deleting the tracker's previous checkpoint", "checkpoint", st.LatestCheckpoint.Name)
			}
		}
	case trackerMoved:
		xmlDesc, err := conn.CheckpointXML(run.domain, p.checkpoint)
		if err == nil {
			err = c.moveTracker(ctx, t, &kv.BackupCheckpoint{Name: p.checkpoint, CreationTime: &metav1.Time{Time: run.now},
				Volumes: run.volumes, Disks: diskNames(run.disks), CheckpointXML: xmlDesc})
		}
		if err != nil {
			return &failure{reason: kv.ReasonFailed, message: fmt.Sprintf("moving tracker %s to checkpoint %s: %v", t.Name, p.checkpoint, err), cleanup: true}
		}
		if p.since != "" {
			if err := conn.DeleteCheckpoint(run.domain, p.since); err != nil {
				run.logger.Error(err, "Deleting the previous checkpoint", "checkpoint", p.since)
			}
		}
	}
	return nil
}

// complete writes the backup's status once: Complete, with what it took.
func (run *backupRun) complete(ctx context.Context) {
	p, res := run.plan, run.res
	conds := []metav1.Condition{
		{Type: string(kv.ConditionProgressing), Status: metav1.ConditionFalse, Reason: kv.ReasonCompleted, Message: "the backup has completed"},
		quiesceCondition(run.b, res),
		p.completed(len(run.disks), res.Bytes),
	}
	checkpoint, parent := p.checkpoint, p.since
	run.c.updateStatus(ctx, run.b, func(st *kv.VirtualMachineBackupStatus) {
		st.Type, st.BackupType = p.backupType, p.backupType
		if checkpoint != "" {
			st.CheckpointName = &checkpoint
		}
		if parent != "" {
			st.ParentCheckpointName = &parent
		}
		st.IncludedVolumes = run.volumes
		st.Progress = &kv.BackupProgress{TotalBytes: int64(res.Bytes), BytesDone: int64(res.Bytes)}
		for _, cond := range conds {
			meta.SetStatusCondition(&st.Conditions, cond)
		}
	})
	run.logger.Info("VM backup completed", "type", p.backupType, "bytes", res.Bytes, "checkpoint", checkpoint)
}

// end ends a run that a step failed.
func (run *backupRun) end(ctx context.Context, f *failure) {
	switch {
	case f.quiet:
		// The server is stopping: failed at the next start.
	case f.cleanup:
		// The files were written: they go, with the checkpoint made.
		run.c.failCleanup(ctx, run.b, run.conn, run.domain, run.plan.checkpoint, f.message)
	default:
		run.c.fail(ctx, run.b, f.reason, f.message)
	}
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
