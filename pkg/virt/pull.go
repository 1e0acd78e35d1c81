package virt

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"libvirt.org/go/libvirt"
)

// Full backups in pull mode: QEMU only exports the disks' point-in-time
// state over NBD (writes by the guest meanwhile go to a scratch file
// first), and qemu-img convert reads it with several requests in flight,
// out of order, into an O_DIRECT qcow2 target, flushed at the end. The
// checkpoint is made by BackupBegin as in push mode, so the next
// incremental (push) continues from it. docs/benchmarks.md compares it with
// libvirt's push job, QEMU's backup block job, which is the default.

// pullCopyCoroutines is qemu-img convert's -m: requests in flight.
const pullCopyCoroutines = "8"

// FullBackupPull runs a full backup of req.Domain in pull mode into
// req.TargetDir/<disk>.qcow2 and returns when every target is written and
// flushed and the libvirt job has ended. req.Incremental and req.Backing
// must be empty. When ctx ends first the copy is stopped, the job aborted
// and ErrAborted returned; when the domain stops, ErrDomainStopped. On any
// failure the targets and the new checkpoint are removed. rateLimit (bytes
// per second, 0 for none) limits each disk's copy.
func (c *Conn) FullBackupPull(ctx context.Context, req BackupRequest, rateLimit int64, progress func(Progress)) (BackupResult, error) {
	if req.Incremental != "" {
		return BackupResult{}, errors.New("a pull backup is full: incrementals are pushed")
	}
	d, disks, err := c.backupDisks(req)
	if err != nil {
		return BackupResult{}, err
	}
	defer d.Free()
	// QEMU creates the NBD socket: a directory of its own, with a short
	// path (a socket's path has at most 107 bytes).
	sockDir, err := os.MkdirTemp("", "backstop-nbd-")
	if err != nil {
		return BackupResult{}, fmt.Errorf("domain %s: %w", req.Domain, err)
	}
	defer os.RemoveAll(sockDir)
	owner, err := c.qemuOwner()
	if err != nil {
		return BackupResult{}, err
	}
	if owner != nil {
		if err := os.Chown(sockDir, owner.uid, owner.gid); err != nil {
			return BackupResult{}, fmt.Errorf("domain %s: giving QEMU the NBD socket directory: %w", req.Domain, err)
		}
	}
	if err := os.Chmod(sockDir, 0o755); err != nil {
		return BackupResult{}, err
	}
	socket := filepath.Join(sockDir, "nbd.sock")

	targets := map[string]string{}
	for _, disk := range disks {
		targets[disk.Name] = filepath.Join(req.TargetDir, disk.Name+".qcow2")
	}
	cleanup := func() {
		for _, t := range targets {
			_ = os.Remove(t)
		}
		if req.Checkpoint != "" {
			_ = c.DeleteCheckpoint(req.Domain, req.Checkpoint)
		}
	}

	w, done, err := c.waiter(req.Domain)
	if err != nil {
		return BackupResult{}, err
	}
	defer done()
	// The scratch files take the old contents of blocks the guest writes
	// while the export is read; libvirt creates and removes them.
	jobXML, err := pullBackupXML(socket, disks, req.TargetDir)
	if err != nil {
		return BackupResult{}, err
	}
	cpXML, err := newCheckpointXML(req.Checkpoint, disks)
	if err != nil {
		return BackupResult{}, err
	}
	quiesced, quiesceErr, beginErr := c.begin(d, req.Quiesce, jobXML, cpXML, 0)
	if beginErr != nil {
		return BackupResult{}, fmt.Errorf("domain %s: starting the backup: %w", req.Domain, beginErr)
	}
	if req.Begun != nil {
		req.Begun()
	}

	// The copy stops when ctx ends or the domain stops.
	copyCtx, stopCopy := context.WithCancel(ctx)
	defer stopCopy()
	go func() {
		select {
		case <-w.stopped:
			stopCopy()
		case <-copyCtx.Done():
		}
	}()
	var total, copied uint64
	for _, disk := range disks {
		total += disk.VirtualSize
	}
	var bytesWritten uint64
	var copyErr error
	for _, disk := range disks {
		base := copied
		copyErr = pullDisk(copyCtx, socket, disk.Name, targets[disk.Name], rateLimit, func(fraction float64) {
			if progress != nil {
				progress(Progress{Done: base + uint64(fraction*float64(disk.VirtualSize)), Total: total})
			}
		})
		if copyErr != nil {
			break
		}
		copied += disk.VirtualSize
		if fi, err := os.Stat(targets[disk.Name]); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				bytesWritten += uint64(st.Blocks) * 512
			}
		}
	}

	// A pull job runs until it is aborted: that ends it, successful or not.
	stopped := false
	select {
	case <-w.stopped:
		stopped = true
	default:
	}
	if !stopped {
		if err := d.AbortJob(); err != nil && !isError(err, libvirt.ERR_OPERATION_INVALID) {
			if active, aerr := d.IsActive(); aerr == nil && !active {
				stopped = true
			} else {
				cleanup()
				return BackupResult{}, fmt.Errorf("domain %s: ending the pull backup job: %w", req.Domain, err)
			}
		}
	}
	if !stopped {
		if err := c.AbortJob(context.WithoutCancel(ctx), req.Domain); err != nil {
			cleanup()
			return BackupResult{}, err
		}
	}
	switch {
	case ctx.Err() != nil:
		cleanup()
		return BackupResult{}, ErrAborted
	case stopped || (copyErr != nil && stoppedSoon(d, w)):
		cleanup()
		return BackupResult{}, ErrDomainStopped
	case copyErr != nil:
		cleanup()
		return BackupResult{}, fmt.Errorf("domain %s: %w", req.Domain, copyErr)
	}
	return BackupResult{Targets: targets, Bytes: bytesWritten, Quiesced: quiesced, QuiesceError: quiesceErr}, nil
}

// begin starts a backup job, the guest's file systems frozen around it
// when quiesce is asked (and an agent answers).
func (c *Conn) begin(d *libvirt.Domain, quiesce bool, backupXML, checkpointXML string, flags libvirt.DomainBackupBeginFlags) (quiesced bool, quiesceErr, beginErr error) {
	if quiesce {
		if quiesceErr = d.FSFreeze(nil, 0); quiesceErr == nil {
			quiesced = true
		} else {
			quiesceErr = fmt.Errorf("freezing the guest's file systems: %w", quiesceErr)
		}
	}
	beginErr = d.BackupBegin(backupXML, checkpointXML, flags)
	if quiesced {
		if err := d.FSThaw(nil, 0); err != nil {
			quiesced, quiesceErr = false, fmt.Errorf("thawing the guest's file systems: %w", err)
		}
	}
	return quiesced, quiesceErr, beginErr
}

// pullDisk copies one exported disk into a new qcow2 target with qemu-img
// convert: 8 requests in flight, written out of order, O_DIRECT, flushed
// when done. progress gets the fraction copied.
func pullDisk(ctx context.Context, socket, disk, target string, rateLimit int64, progress func(float64)) error {
	args := []string{"convert", "-p", "-t", "none", "-W", "-m", pullCopyCoroutines, "-f", "raw", "-O", "qcow2"}
	if rateLimit > 0 {
		args = append(args, "-r", strconv.FormatInt(rateLimit, 10))
	}
	args = append(args, "nbd+unix:///"+disk+"?socket="+socket, target)
	cmd := exec.CommandContext(ctx, "qemu-img", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("disk %s: starting qemu-img: %w", disk, err)
	}
	// -p prints "    (12.34/100%)" lines ended by '\r'.
	sc := bufio.NewScanner(stdout)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
			return i + 1, data[:i], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if pct, ok := strings.CutPrefix(line, "("); ok {
			if v, _, ok := strings.Cut(pct, "/"); ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					progress(f / 100)
				}
			}
		}
	}
	_, _ = io.Copy(io.Discard, stdout) // what a failed scan left
	if err := cmd.Wait(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("disk %s: copying the export: %v: %s", disk, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
