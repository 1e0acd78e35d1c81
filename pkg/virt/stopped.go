package virt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/backstop-io/backstop/pkg/atomicfile"
)

// A VM that is not running has no QEMU to run a backup job, and libvirt
// cannot make a checkpoint of it: its backup is a full copy of its disks,
// read from the image files. The copy does not lock the images (a VM may
// start meanwhile: starting it wins); any lifecycle event of the domain
// during the copy (a start, a definition) makes the backup fail with
// ErrDomainStarted rather than keep a copy that may mix two states.

// ErrDomainStarted: the domain started (or changed) while a copy of its
// stopped disks ran.
var ErrDomainStarted = errors.New("the domain started during the backup of its stopped disks")

// Active reports whether the domain runs (or is paused): whether it has a
// QEMU process.
func (c *Conn) Active(domain string) (bool, error) {
	d, err := c.domain(domain)
	if err != nil {
		return false, err
	}
	defer d.Free()
	active, err := d.IsActive()
	if err != nil {
		return false, fmt.Errorf("domain %s: %w", domain, err)
	}
	return active, nil
}

// CopyStopped copies the disks of a domain that is not running into
// req.TargetDir/<disk>.qcow2 (a full backup; req.Incremental, req.Backing
// and req.Checkpoint must be empty). When ctx ends first the copy stops and
// ErrAborted is returned; when the domain starts meanwhile,
// ErrDomainStarted. On any failure the targets are removed.
func (c *Conn) CopyStopped(ctx context.Context, req BackupRequest, progress func(Progress)) (res BackupResult, err error) {
	if req.Incremental != "" || len(req.Backing) > 0 || req.Checkpoint != "" {
		return BackupResult{}, errors.New("a stopped domain's backup is full, without a checkpoint")
	}
	all, err := c.Disks(req.Domain)
	if err != nil {
		return BackupResult{}, err
	}
	disks, err := selectDisks(all, req.Disks)
	if err != nil {
		return BackupResult{}, err
	}
	var disturbed atomic.Bool
	stop := c.OnLifecycle(func(domain string) {
		if domain == req.Domain {
			disturbed.Store(true)
		}
	})
	defer stop()
	if active, err := c.Active(req.Domain); err != nil || active {
		if err == nil {
			err = fmt.Errorf("domain %s is running: %w", req.Domain, ErrDomainStarted)
		}
		return BackupResult{}, err
	}
	res = BackupResult{Targets: map[string]string{}, QuiesceError: errors.New("the VirtualMachine is not running: its file systems are at rest")}
	defer func() {
		if err != nil {
			for _, t := range res.Targets {
				_ = os.Remove(t)
			}
		}
	}()
	var total, done uint64
	for _, d := range disks {
		total += d.Allocation
	}
	for _, d := range disks {
		target := filepath.Join(req.TargetDir, d.Name+".qcow2")
		res.Targets[d.Name] = target
		// -U: the image is not locked, so that starting the VM is never
		// refused because of its backup (the events above catch it).
		out, cerr := exec.CommandContext(ctx, "qemu-img", "convert", "-U", "-f", d.Format, "-O", "qcow2", d.Source, target).CombinedOutput()
		if ctx.Err() != nil {
			return res, ErrAborted
		}
		if cerr != nil {
			return res, fmt.Errorf("copying disk %s of stopped domain %s: %v: %s", d.Name, req.Domain, cerr, strings.TrimSpace(string(out)))
		}
		if err := atomicfile.Sync(target); err != nil {
			return res, err
		}
		done += d.Allocation
		res.Bytes += d.Allocation
		if progress != nil {
			progress(Progress{Done: done, Total: total})
		}
	}
	if active, err := c.Active(req.Domain); disturbed.Load() || err != nil || active {
		return res, fmt.Errorf("domain %s: %w", req.Domain, ErrDomainStarted)
	}
	return res, nil
}
