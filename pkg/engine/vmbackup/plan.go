package vmbackup

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
)

// facts are what a VM backup's plan is decided from, read before anything
// is copied.
type facts struct {
	vm string
	// tracker is the backup's tracker (nil: a backup of the VM itself,
	// always full, without a checkpoint).
	tracker *kv.VirtualMachineBackupTracker
	// untracked are the VM's disks without dirty bitmaps (not qcow2).
	untracked []string
	// stopped: the VM is not running.
	stopped bool
	// forceFull: spec.forceFullBackup.
	forceFull bool
	// fullPull: full backups are pulled (--vm-full-backup-mode=pull).
	fullPull bool
	// checkpoint is the name this backup's checkpoint would have.
	checkpoint string
}

// copyMode is how the disks are copied.
type copyMode string

const (
	// copyPush: libvirt's backup job writes the files.
	copyPush copyMode = "push"
	// copyPull: QEMU exports the disks over NBD, qemu-img reads them.
	copyPull copyMode = "pull"
	// copyStopped: the disks of a VM that is not running, copied as they
	// are.
	copyStopped copyMode = "stopped"
)

// trackerStep is what becomes of the tracker once the files are written.
type trackerStep string

const (
	// trackerKept: no tracker, or a stopped VM's (it keeps its checkpoint
	// for the next backup of the running VM).
	trackerKept trackerStep = "kept"
	// trackerCleared: its VM cannot track changes (a disk without
	// bitmaps): the tracker points at no checkpoint.
	trackerCleared trackerStep = "cleared"
	// trackerMoved: the tracker points at the checkpoint this backup made.
	trackerMoved trackerStep = "moved"
)

// plan is what one run of a VM backup does, and why, decided before any
// disk is copied (as KubeVirt's cbt package plans, then acts, then writes
// the status once).
type plan struct {
	backupType kv.BackupType
	// since is the checkpoint an incremental backup is since ("": full).
	since string
	// checkpoint is the checkpoint the backup makes ("": none).
	checkpoint string
	copy       copyMode
	tracker    trackerStep
	// fallback says why the backup is full where an incremental was
	// expected; bounded why it is full by the chain's bound.
	fallback, bounded string
	// untrackedWithTracker: a tracker's VM has disks without bitmaps.
	untrackedWithTracker bool
}

// decide plans a backup from the facts. An incremental plan is a
// candidate: the chain's bound, the checkpoint and the previous files are
// checked next, and fullBounded or fullInstead turn it into a full backup
// when they do not allow it.
func decide(f facts) plan {
	p := plan{backupType: kv.Full, untrackedWithTracker: f.tracker != nil && len(f.untracked) > 0}
	switch {
	case f.stopped && f.tracker != nil:
		p.fallback = fmt.Sprintf("VirtualMachine %s is not running: a full copy of its disks was taken, without a checkpoint (libvirt makes none of a stopped VM); the tracker keeps its checkpoint for the next backup of the running VM", f.vm)
	case f.tracker != nil && len(f.untracked) > 0:
		p.fallback = fmt.Sprintf("disk(s) %s of VirtualMachine %s keep no dirty bitmaps (raw, changed block tracking %s): a full backup without a checkpoint was taken",
			strings.Join(f.untracked, ", "), f.vm, cbtState(f.tracker))
	case f.tracker != nil && f.tracker.Status != nil && f.tracker.Status.LatestCheckpoint != nil && !f.forceFull:
		p.backupType, p.since = kv.Incremental, f.tracker.Status.LatestCheckpoint.Name
	}
	if f.tracker != nil && len(f.untracked) == 0 && !f.stopped {
		p.checkpoint = f.checkpoint
	}
	switch {
	case f.tracker == nil || f.stopped:
		p.tracker = trackerKept
	case p.checkpoint == "":
		p.tracker = trackerCleared
	default:
		p.tracker = trackerMoved
	}
	p.copy = copyPush
	switch {
	case f.stopped:
		p.copy = copyStopped
	case p.backupType == kv.Full && f.fullPull:
		p.copy = copyPull
	}
	return p
}

// fullInstead makes an incremental plan a full backup, for why (the
// checkpoint or the previous files do not hold).
func (p plan) fullInstead(why string, fullPull bool) plan {
	p = p.full(fullPull)
	p.fallback = why
	return p
}

// fullBounded makes an incremental plan a full backup because the chain
// is as long as kv.FullEveryAnnotation allows (why says so).
func (p plan) fullBounded(why string, fullPull bool) plan {
	p = p.full(fullPull)
	p.bounded = why
	return p
}

// full is the plan as a full backup, pulled in pull mode.
func (p plan) full(fullPull bool) plan {
	p.backupType, p.since = kv.Full, ""
	if fullPull && p.copy == copyPush {
		p.copy = copyPull
	}
	return p
}

// completed is the Complete condition of the backup the plan made, of n
// disks and bytes copied.
func (p plan) completed(n int, bytes uint64) metav1.Condition {
	c := metav1.Condition{Type: string(kv.ConditionComplete), Status: metav1.ConditionTrue, Reason: kv.ReasonCompleted,
		Message: fmt.Sprintf("%s backup of %d disk(s), %d bytes copied", p.backupType, n, bytes)}
	switch {
	case p.untrackedWithTracker:
		c.Reason, c.Message = kv.ReasonCompletedWithWarning, p.fallback
	case p.fallback != "":
		c.Reason = kv.ReasonCompletedWithWarning
		c.Message = fmt.Sprintf("a full backup was taken instead of an incremental one: %s", p.fallback)
	case p.bounded != "":
		c.Message += ": " + p.bounded
	}
	return c
}
