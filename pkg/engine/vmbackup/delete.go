package vmbackup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/failpoint"
	"github.com/backstop-io/backstop/pkg/rootdir"
	"github.com/backstop-io/backstop/pkg/vmchain"
	"github.com/backstop-io/backstop/pkg/vmmanifest"
)

// volumes is the directory of the volumes backups push into: every path
// under it is made of checked names (package rootdir).
func (c *Controller) volumes() rootdir.Dir { return rootdir.Dir(c.cfg.VolumeRoot) }

// outputDir is where a backup writes (its volume's subdirectory of its
// name), "" when it names no volume; an error when its names cannot be a
// path under the volume root (a backup stored before admission checked
// them).
func (c *Controller) outputDir(b *kv.VirtualMachineBackup) (string, error) {
	if b.Spec.PvcName == nil {
		return "", nil
	}
	return c.volumes().Join(b.Namespace, *b.Spec.PvcName, b.Name)
}

// removeOutputDir removes what a backup wrote, through rootdir: nothing
// outside its own directory, whatever its names.
func (c *Controller) removeOutputDir(b *kv.VirtualMachineBackup) error {
	if b.Spec.PvcName == nil {
		return nil
	}
	return c.volumes().RemoveAll(b.Namespace, *b.Spec.PvcName, b.Name)
}

// removeOutput deletes what a deleted backup wrote, keeping its chain
// whole (package vmchain): a backup with a later link is merged into it,
// the newest link just goes (the tracker's next backup is then full, and
// says why). Done reports whether nothing is left to do, so that the
// finalizer may go; a backup of a VM another live host runs is left to
// that host, and one of a VM with another backup running waits.
func (c *Controller) removeOutput(ctx context.Context, key cache.ObjectName, b *kv.VirtualMachineBackup) (done bool, err error) {
	dir, err := c.outputDir(b)
	if err != nil {
		// Names no path under the volume root can have: it wrote nothing.
		klog.FromContext(ctx).Info("VM backup deleted: its volume names no directory of the volume root, nothing to remove",
			"virtualMachineBackup", klog.KObj(b), "reason", err.Error())
		return true, nil
	}
	if dir == "" {
		return true, nil
	}
	m, readErr := vmmanifest.Read(dir)
	vm := m.VirtualMachine
	if readErr != nil {
		if src, _, err := c.resolve(ctx, b); err == nil {
			vm = src.vm
		}
	}
	if vm == "" {
		vm = b.Spec.Source.Name
	}
	conn, err := c.cfg.Virt()
	switch {
	case err != nil && !c.cfg.Hosts.Alone(ctx):
		// Whose VM it is cannot be known without libvirt: the files may
		// be another host's.
		c.AddAfter(key, waitPoll)
		return false, nil
	case err == nil:
		switch where, _, err := c.locate(ctx, b, conn, vm); {
		case err != nil:
			return false, err
		case where == placedRecorded:
			return false, nil
		case where == placedElsewhere:
			c.AddAfter(key, waitPoll)
			return false, nil
		}
	}
	vmKey, holder := b.Namespace+"/"+vm, c.holder(b)
	holder.What = "the deletion of backup " + b.Name
	if _, ok := c.locks.TryLock(vmKey, holder); !ok {
		c.AddAfter(key, waitPoll) // a backup or restore of the VM runs: its chain is not edited under it
		return false, nil
	}
	defer c.locks.Unlock(vmKey, holder)

	if readErr != nil {
		// No manifest: no finished output (a failed run removed what it
		// wrote, or nothing was written).
		if err := c.removeOutputDir(b); err != nil {
			return false, err
		}
		return true, nil
	}
	next, err := c.nextLink(b.Namespace, m)
	if err != nil {
		return false, err
	}
	crash := func(point string) {
		if point == vmchain.CrashJournaled {
			c.cfg.Crash.Hit(failpoint.VMBackupMergeJournaled)
		}
	}
	if err := vmchain.Remove(ctx, dir, next, vmchain.Options{Crash: crash}); err != nil {
		return false, fmt.Errorf("removing backup %s from its chain: %w", dir, err)
	}
	logger := klog.FromContext(ctx).WithValues("virtualMachineBackup", klog.KObj(b))
	if next != "" {
		logger.Info("VM backup deleted: merged into the next backup of its chain", "next", next)
	} else {
		logger.Info("VM backup deleted: it was the newest of its chain")
	}
	return true, nil
}

// nextLink is the directory of the backup taken since m's checkpoint (an
// incremental of the same domain whose parent it is), among the backups of
// the namespace's volumes; "" when there is none.
func (c *Controller) nextLink(namespace string, m vmmanifest.Manifest) (string, error) {
	nsDir, err := c.volumes().Join(namespace)
	if err != nil {
		return "", err
	}
	links, err := vmchain.Links(nsDir, m.Domain)
	if err != nil {
		return "", err
	}
	next, ok, err := vmchain.Next(links, m.Checkpoint)
	if !ok || err != nil {
		return "", err
	}
	return next.Dir, nil
}

// recoverMerges finishes the chain merges a crash interrupted (their
// journals are in the volumes), before any backup reads a chain.
func (c *Controller) recoverMerges(ctx context.Context) {
	journals, _ := filepath.Glob(filepath.Join(c.cfg.VolumeRoot, "*", "*", "*", vmchain.JournalFile))
	for _, j := range journals {
		dir := filepath.Dir(j)
		if err := vmchain.Recover(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			klog.FromContext(ctx).Error(err, "Finishing an interrupted merge of VM backups", "dir", dir)
		}
	}
}
