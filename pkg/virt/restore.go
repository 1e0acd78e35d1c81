package virt

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"
)

// Restoring a domain's disks: the domain is stopped (its disks are being
// replaced, what it runs is lost either way), every checkpoint is dropped
// with its bitmaps (the data they tracked changes under them, so the next
// backup must be full), the disk images are written from the restored
// chain, and the domain is started again if it ran. A domain that does not
// exist is defined anew from a saved definition, with disks of its own.

// DomainDefinition returns the domain's persistent (inactive) XML, the
// definition a restore defines a new domain from.
func (c *Conn) DomainDefinition(domain string) (string, error) {
	d, err := c.domain(domain)
	if err != nil {
		return "", err
	}
	defer d.Free()
	desc, err := d.GetXMLDesc(libvirt.DOMAIN_XML_INACTIVE)
	if err != nil {
		return "", fmt.Errorf("domain %s: reading its definition: %w", domain, err)
	}
	return desc, nil
}

// StopForRestore stops the domain at once (QEMU is killed: its disks are
// about to be replaced) and drops all its checkpoints, with their bitmaps
// in its disk images. It reports whether the domain was running.
func (c *Conn) StopForRestore(ctx context.Context, domain string) (wasActive bool, err error) {
	d, err := c.domain(domain)
	if err != nil {
		return false, err
	}
	defer d.Free()
	if wasActive, err = d.IsActive(); err != nil {
		return false, fmt.Errorf("domain %s: %w", domain, err)
	}
	if wasActive {
		if err := d.Destroy(); err != nil && !isError(err, libvirt.ERR_OPERATION_INVALID) {
			return true, fmt.Errorf("domain %s: stopping it: %w", domain, err)
		}
	}
	if err := c.deleteCheckpointMetadata(domain); err != nil {
		return wasActive, err
	}
	disks, err := disksOf(d, domain)
	if err != nil {
		return wasActive, err
	}
	for _, disk := range disks {
		if err := WaitReleased(ctx, disk.Source); err != nil {
			return wasActive, err
		}
		if disk.Format == "qcow2" {
			if err := removeBitmaps(ctx, disk.Source); err != nil {
				return wasActive, err
			}
		}
	}
	return wasActive, nil
}

// StartDomain starts a defined domain that is not running.
func (c *Conn) StartDomain(domain string) error {
	d, err := c.domain(domain)
	if err != nil {
		return err
	}
	defer d.Free()
	if err := d.Create(); err != nil {
		return fmt.Errorf("domain %s: starting it: %w", domain, err)
	}
	return nil
}

// DefineFrom defines a new domain named name from definition (another
// domain's, as DomainDefinition returns it): its UUID and the MAC
// addresses of its interfaces are left to libvirt, and each file disk
// reads the qcow2 image disks gives for its target device. Every file
// disk must have one.
func (c *Conn) DefineFrom(definition, name string, disks map[string]string) error {
	dx, err := parseDomain(definition)
	if err != nil {
		return err
	}
	dx.Name, dx.UUID = name, ""
	if dx.Devices != nil {
		for i := range dx.Devices.Interfaces {
			dx.Devices.Interfaces[i].MAC = nil
		}
	}
	for _, disk := range fileDisks(dx) {
		file, ok := disks[diskTarget(disk)]
		if !ok {
			return fmt.Errorf("defining domain %s: no image for disk %s", name, diskTarget(disk))
		}
		setDiskSource(disk, "qcow2", file)
		disk.BackingStore = nil
	}
	// The definition is read from a volume others may write: a domain
	// larger than the host is not defined (started, it would take the
	// host's memory from every other guest).
	conn, err := c.lv()
	if err != nil {
		return err
	}
	info, err := conn.GetNodeInfo()
	if err != nil {
		return fmt.Errorf("defining domain %s: the host's memory: %w", name, err)
	}
	if err := fitsMemory(dx, uint64(info.Memory)); err != nil {
		return fmt.Errorf("defining domain %s: %w", name, err)
	}
	desc, err := dx.Marshal()
	if err != nil {
		return fmt.Errorf("defining domain %s: %w", name, err)
	}
	if err := c.define(desc); err != nil {
		return fmt.Errorf("defining domain %s: %w", name, err)
	}
	return nil
}

// fitsMemory refuses a domain whose memory (or current memory) is more
// than the host's, hostKiB.
func fitsMemory(dx *libvirtxml.Domain, hostKiB uint64) error {
	type quantity struct {
		what  string
		value uint
		unit  string
	}
	var asked []quantity
	if m := dx.Memory; m != nil {
		asked = append(asked, quantity{"memory", m.Value, m.Unit})
	}
	if m := dx.CurrentMemory; m != nil {
		asked = append(asked, quantity{"current memory", m.Value, m.Unit})
	}
	for _, q := range asked {
		kib, err := kibibytes(q.value, q.unit)
		if err != nil {
			return fmt.Errorf("its %s: %w", q.what, err)
		}
		if kib > hostKiB {
			return fmt.Errorf("its %s, %d KiB, is more than the host's %d KiB", q.what, kib, hostKiB)
		}
	}
	return nil
}

// kibibytes is a libvirt quantity in KiB (libvirt's units; none is KiB),
// refusing one that overflows.
func kibibytes(value uint, unit string) (uint64, error) {
	factors := map[string]uint64{"b": 1, "bytes": 1, "KB": 1000, "k": 1024, "KiB": 1024, "MB": 1000 * 1000, "M": 1 << 20, "MiB": 1 << 20,
		"GB": 1000 * 1000 * 1000, "G": 1 << 30, "GiB": 1 << 30, "TB": 1000 * 1000 * 1000 * 1000, "T": 1 << 40, "TiB": 1 << 40,
		"PB": 1000 * 1000 * 1000 * 1000 * 1000, "P": 1 << 50, "PiB": 1 << 50, "EB": 1000 * 1000 * 1000 * 1000 * 1000 * 1000, "E": 1 << 60, "EiB": 1 << 60, "": 1024}
	factor, ok := factors[unit]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q", unit)
	}
	if value != 0 && uint64(value) > math.MaxUint64/factor {
		return 0, fmt.Errorf("%d %s is more than any host has", value, unit)
	}
	return uint64(value) * factor / 1024, nil
}

// DiskTargets lists the target devices (vda) of a domain definition's
// file disks.
func DiskTargets(definition string) ([]string, error) {
	dx, err := parseDomain(definition)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, disk := range fileDisks(dx) {
		out = append(out, diskTarget(disk))
	}
	return out, nil
}

// Bitmaps lists the persistent dirty bitmaps stored in a qcow2 image.
func Bitmaps(image string) ([]string, error) {
	info, err := imageInfo(image)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, b := range info.FormatSpecific.Data.Bitmaps {
		out = append(out, b.Name)
	}
	return out, nil
}

// removeBitmaps removes every persistent dirty bitmap of a qcow2 image
// that no process uses.
func removeBitmaps(ctx context.Context, image string) error {
	names, err := Bitmaps(image)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := removeBitmap(ctx, image, name); err != nil {
			return err
		}
	}
	return nil
}

// removeBitmap removes a persistent dirty bitmap of a qcow2 image that no
// process uses.
func removeBitmap(ctx context.Context, image, name string) error {
	if out, err := exec.CommandContext(ctx, "qemu-img", "bitmap", "--remove", image, name).CombinedOutput(); err != nil {
		return fmt.Errorf("removing bitmap %s of %s: %v: %s", name, image, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// GrantImage lets QEMU's user read and write a new image (and reach it),
// as for the overlays of changed block tracking.
func (c *Conn) GrantImage(image string) error {
	owner, err := c.qemuOwner()
	if err != nil || owner == nil {
		return err
	}
	if err := checkReachable(filepath.Dir(image), owner.uid, owner.gid); err != nil {
		return err
	}
	if err := os.Chown(image, owner.uid, owner.gid); err != nil {
		return fmt.Errorf("giving %s to QEMU's user: %w", image, err)
	}
	return nil
}
