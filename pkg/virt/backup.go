package virt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"libvirt.org/go/libvirt"

	"github.com/backstop-io/backstop/pkg/rootdir"
)

// Disk is a file-backed disk of a domain.
type Disk struct {
	// Name is the target device ("vda"), which names the disk in backup
	// and checkpoint XML.
	Name string
	// Source is the image file; Format its driver type ("qcow2", "raw").
	Source, Format string
	// VirtualSize is the size the guest sees; Allocation the bytes the
	// image uses on the host.
	VirtualSize, Allocation uint64
}

// Disks returns the file-backed disks (device "disk") of a domain.
func (c *Conn) Disks(domain string) ([]Disk, error) {
	d, err := c.domain(domain)
	if err != nil {
		return nil, err
	}
	defer d.Free()
	return disksOf(d, domain)
}

func disksOf(d *libvirt.Domain, domain string) ([]Disk, error) {
	desc, err := d.GetXMLDesc(0)
	if err != nil {
		return nil, fmt.Errorf("domain %s: reading its XML: %w", domain, err)
	}
	dx, err := parseDomain(desc)
	if err != nil {
		return nil, fmt.Errorf("domain %s: %w", domain, err)
	}
	var out []Disk
	for _, x := range fileDisks(dx) {
		// A disk's target name names its files in a backup directory
		// (<name>.qcow2): one path element.
		if err := rootdir.Name(diskTarget(x)); err != nil {
			return nil, fmt.Errorf("domain %s: a disk's target cannot name a backup file: %w", domain, err)
		}
		info, err := d.GetBlockInfo(diskTarget(x), 0)
		if err != nil {
			return nil, fmt.Errorf("domain %s: disk %s: %w", domain, diskTarget(x), err)
		}
		out = append(out, Disk{Name: diskTarget(x), Source: diskFile(x), Format: diskFormat(x),
			VirtualSize: info.Capacity, Allocation: info.Allocation})
	}
	return out, nil
}

// BackupRequest is one push backup of a domain.
type BackupRequest struct {
	Domain string
	// Disks are the disks to back up (names); empty: every file-backed disk.
	Disks []string
	// TargetDir receives one qcow2 per disk, <disk>.qcow2. It must exist
	// and be reachable by the QEMU process (every directory on the path
	// world-executable).
	TargetDir string
	// Incremental is the checkpoint to back up the changes since; "" is a
	// full backup.
	Incremental string
	// Backing names, per disk, the previous backup's file, which an
	// incremental's target gets as its backing file.
	Backing map[string]string
	// Checkpoint is the checkpoint (dirty bitmap) the backup starts; ""
	// starts none.
	Checkpoint string
	// Quiesce freezes the guest's file systems (guest agent) for the
	// instant the backup starts, and thaws them right after.
	Quiesce bool
	// Begun, if set, is called once libvirt has begun the backup job.
	Begun func()
}

// Progress is a running backup's progress in bytes.
type Progress struct {
	Done, Total uint64
}

// BackupResult describes a finished backup.
type BackupResult struct {
	// Targets are the files written, by disk name.
	Targets map[string]string
	// Bytes is what the job copied.
	Bytes uint64
	// Quiesced: the file systems were frozen when the backup started;
	// otherwise QuiesceError says why not (when Quiesce was asked).
	Quiesced     bool
	QuiesceError error
}

// ErrAborted: the backup was aborted (its context ended).
var ErrAborted = errors.New("backup aborted")

// ErrDomainStopped: the domain stopped (shut down, destroyed, crashed)
// while its backup ran.
var ErrDomainStopped = errors.New("the domain stopped during the backup")

// jobPoll is how often job statistics are read while a backup runs.
const jobPoll = 250 * time.Millisecond

// PushBackup runs a push backup and returns when QEMU has closed its
// targets. When ctx ends first, the job is aborted and ErrAborted
// returned. On any failure the targets and the new checkpoint are removed.
func (c *Conn) PushBackup(ctx context.Context, req BackupRequest, progress func(Progress)) (BackupResult, error) {
	d, disks, err := c.backupDisks(req)
	if err != nil {
		return BackupResult{}, err
	}
	defer d.Free()
	targets := map[string]string{}
	cleanup := func() {
		for _, t := range targets {
			_ = os.Remove(t)
		}
		if req.Checkpoint != "" {
			_ = c.DeleteCheckpoint(req.Domain, req.Checkpoint)
		}
	}
	for _, disk := range disks {
		target := filepath.Join(req.TargetDir, disk.Name+".qcow2")
		backing := ""
		if req.Incremental != "" {
			if backing = req.Backing[disk.Name]; backing == "" {
				return BackupResult{}, fmt.Errorf("domain %s: incremental backup of disk %s: no previous backup file to chain to", req.Domain, disk.Name)
			}
		}
		if err := createTarget(target, backing, disk.VirtualSize); err != nil {
			cleanup()
			return BackupResult{}, err
		}
		targets[disk.Name] = target
	}

	w, done, err := c.waiter(req.Domain)
	if err != nil {
		cleanup()
		return BackupResult{}, err
	}
	defer done()
	jobXML, err := pushBackupXML(disks, targets, req.Incremental)
	if err != nil {
		cleanup()
		return BackupResult{}, err
	}
	cpXML, err := newCheckpointXML(req.Checkpoint, disks)
	if err != nil {
		cleanup()
		return BackupResult{}, err
	}
	quiesced, quiesceErr, beginErr := c.begin(d, req.Quiesce, jobXML, cpXML, libvirt.DOMAIN_BACKUP_BEGIN_REUSE_EXTERNAL)
	if beginErr != nil {
		// BackupBegin created nothing (a libvirt job is all or nothing).
		for _, t := range targets {
			_ = os.Remove(t)
		}
		return BackupResult{}, fmt.Errorf("domain %s: starting the backup: %w", req.Domain, beginErr)
	}
	if req.Begun != nil {
		req.Begun()
	}

	info, err := c.waitJob(ctx, d, w, progress)
	if err != nil {
		cleanup()
		return BackupResult{}, err
	}
	for _, t := range targets {
		if err := WaitReleased(ctx, t); err != nil {
			cleanup()
			return BackupResult{}, err
		}
	}
	bytes := info.DataTotal
	if !info.DataTotalSet {
		bytes = info.DiskTotal
	}
	return BackupResult{Targets: targets, Bytes: bytes, Quiesced: quiesced, QuiesceError: quiesceErr}, nil
}

// backupDisks looks up the domain of a backup request (the caller frees
// it) and the disks it backs up.
func (c *Conn) backupDisks(req BackupRequest) (*libvirt.Domain, []Disk, error) {
	d, err := c.domain(req.Domain)
	if err != nil {
		return nil, nil, err
	}
	all, err := disksOf(d, req.Domain)
	if err == nil {
		var disks []Disk
		if disks, err = selectDisks(all, req.Disks); err == nil {
			return d, disks, nil
		}
		err = fmt.Errorf("domain %s: %w", req.Domain, err)
	}
	_ = d.Free()
	return nil, nil, err
}

func selectDisks(all []Disk, names []string) ([]Disk, error) {
	if len(names) == 0 {
		if len(all) == 0 {
			return nil, errors.New("no file-backed disk to back up")
		}
		return all, nil
	}
	var out []Disk
	for _, n := range names {
		found := false
		for _, d := range all {
			if d.Name == n {
				out, found = append(out, d), true
			}
		}
		if !found {
			return nil, fmt.Errorf("no file-backed disk %q", n)
		}
	}
	return out, nil
}

// createTarget makes a push target: an empty qcow2 of the disk's size,
// over backing (the previous backup) for an incremental.
func createTarget(target, backing string, size uint64) error {
	args := []string{"create", "-q", "-f", "qcow2"}
	if backing != "" {
		args = append(args, "-b", backing, "-F", "qcow2")
	}
	args = append(args, target, strconv.FormatUint(size, 10))
	if out, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("creating backup target %s: %v: %s", target, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// waitJob waits for the backup job of d to end: the job-completed event,
// the domain stopping (lifecycle event), or job statistics saying it is no
// longer running (an event missed). It reports progress meanwhile and
// aborts the job when ctx ends.
func (c *Conn) waitJob(ctx context.Context, d *libvirt.Domain, w *jobWaiter, progress func(Progress)) (libvirt.DomainJobInfo, error) {
	t := time.NewTicker(jobPoll)
	defer t.Stop()
	// ended is the outcome of a job that has ended, however that was seen.
	ended := func(info libvirt.DomainJobInfo) (libvirt.DomainJobInfo, error) {
		info, err := jobOutcome(info)
		if err != nil && stoppedSoon(d, w) {
			// The job failed because the domain went away.
			return info, ErrDomainStopped
		}
		return info, err
	}
	for {
		select {
		case info := <-w.completed:
			return ended(info)
		case <-w.stopped:
			return libvirt.DomainJobInfo{}, ErrDomainStopped
		case <-ctx.Done():
			if err := d.AbortJob(); err != nil && !isError(err, libvirt.ERR_OPERATION_INVALID) {
				return libvirt.DomainJobInfo{}, fmt.Errorf("aborting the backup: %w", err)
			}
			// The abort is reported as a (failed) job-completed event.
			select {
			case <-w.completed:
			case <-w.stopped:
			case <-time.After(30 * time.Second):
			}
			return libvirt.DomainJobInfo{}, ErrAborted
		case <-t.C:
			st, err := d.GetJobStats(0)
			if err != nil {
				if active, aerr := d.IsActive(); aerr == nil && !active {
					return libvirt.DomainJobInfo{}, ErrDomainStopped
				}
				continue
			}
			if st.Type == libvirt.DOMAIN_JOB_NONE {
				// Ended without an event reaching us: read how.
				done, err := d.GetJobStats(libvirt.DOMAIN_JOB_STATS_COMPLETED | libvirt.DOMAIN_JOB_STATS_KEEP_COMPLETED)
				if err != nil {
					return libvirt.DomainJobInfo{}, fmt.Errorf("reading the result of the backup job: %w", err)
				}
				select {
				case info := <-w.completed:
					return ended(info)
				default:
				}
				if done.Type == libvirt.DOMAIN_JOB_NONE {
					continue // not started yet
				}
				return ended(*done)
			}
			if progress != nil {
				total, processed := st.DataTotal, st.DataProcessed
				if !st.DataTotalSet {
					total, processed = st.DiskTotal, st.DiskProcessed
				}
				progress(Progress{Done: processed, Total: total})
			}
		}
	}
}

// stoppedSoon reports whether the domain stops around a failed job: the
// job fails as soon as QEMU starts to go, and libvirt reports the domain
// stopped only once QEMU has exited, seconds later when a block job has
// to be torn down (about 2 s here, more under load).
func stoppedSoon(d *libvirt.Domain, w *jobWaiter) bool {
	deadline := time.After(30 * time.Second)
	for {
		select {
		case <-w.stopped:
			return true
		case <-deadline:
			return false
		case <-time.After(100 * time.Millisecond):
			if active, err := d.IsActive(); err == nil && !active {
				return true
			}
		}
	}
}

// jobOutcome turns a finished job's information into an error when it
// failed. (In job-completed events Type is 0: JobSuccess and ErrorMessage
// tell; in statistics, Type does.)
func jobOutcome(info libvirt.DomainJobInfo) (libvirt.DomainJobInfo, error) {
	failed := (info.JobSuccessSet && !info.JobSuccess) || info.Type == libvirt.DOMAIN_JOB_FAILED || info.Type == libvirt.DOMAIN_JOB_CANCELLED
	if !failed {
		return info, nil
	}
	msg := "the backup job failed"
	if info.ErrorMessageSet && info.ErrorMessage != "" {
		msg += ": " + info.ErrorMessage
	}
	return info, errors.New(msg)
}

// WaitReleased waits until QEMU has closed an image (a backup target):
// the job-completed event comes before libvirt removes the target's block
// node, and QEMU holds OFD locks on bytes 100-299 of images it has open.
func WaitReleased(ctx context.Context, path string) error {
	const fOFDGetLk = 36 // F_OFD_GETLK
	deadline := time.Now().Add(30 * time.Second)
	for {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("backup target %s: %w", path, err)
		}
		lk := syscall.Flock_t{Type: syscall.F_WRLCK, Start: 100, Len: 200}
		_, _, errno := syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), fOFDGetLk, uintptr(unsafe.Pointer(&lk)))
		f.Close()
		if errno != 0 {
			return fmt.Errorf("backup target %s: reading its locks: %w", path, errno)
		}
		if lk.Type == syscall.F_UNLCK {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("backup target %s: still open by QEMU 30s after the job ended", path)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// AbortJob aborts a domain's running job (a backup a previous process
// started) and waits until the domain has none; a domain without a job is
// not an error.
func (c *Conn) AbortJob(ctx context.Context, domain string) error {
	d, err := c.domain(domain)
	if err != nil {
		return err
	}
	defer d.Free()
	if err := d.AbortJob(); err != nil && !isError(err, libvirt.ERR_OPERATION_INVALID) {
		return fmt.Errorf("domain %s: aborting its job: %w", domain, err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := d.GetJobStats(0)
		if err != nil || st.Type == libvirt.DOMAIN_JOB_NONE {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("domain %s: its job still runs a minute after it was aborted", domain)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
