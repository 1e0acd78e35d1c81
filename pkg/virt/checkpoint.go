package virt

import (
	"context"
	"fmt"
	"slices"

	"libvirt.org/go/libvirt"
)

// CheckpointXML returns a checkpoint's XML without the domain definition
// libvirt embeds (which would pin the domain's UUID when the checkpoint is
// redefined on a new definition of the domain).
func (c *Conn) CheckpointXML(domain, name string) (string, error) {
	d, err := c.domain(domain)
	if err != nil {
		return "", err
	}
	defer d.Free()
	cp, err := d.CheckpointLookupByName(name, 0)
	if err != nil {
		return "", fmt.Errorf("domain %s: checkpoint %s: %w", domain, name, err)
	}
	defer cp.Free()
	out, err := cp.GetXMLDesc(libvirt.DOMAIN_CHECKPOINT_XML_NO_DOMAIN)
	if err != nil {
		return "", fmt.Errorf("domain %s: checkpoint %s: %w", domain, name, err)
	}
	return out, nil
}

// Checkpoints lists the names of a domain's checkpoints libvirt knows.
func (c *Conn) Checkpoints(domain string) ([]string, error) {
	d, err := c.domain(domain)
	if err != nil {
		return nil, err
	}
	defer d.Free()
	cps, err := d.ListAllCheckpoints(0)
	if err != nil {
		return nil, fmt.Errorf("domain %s: listing checkpoints: %w", domain, err)
	}
	var names []string
	for i := range cps {
		if n, err := cps[i].GetName(); err == nil {
			names = append(names, n)
		}
		_ = cps[i].Free()
	}
	return names, nil
}

// DeleteCheckpoints deletes the named checkpoints of a domain with their
// bitmaps (a stopped domain's are removed from its qcow2 images); missing
// ones are not an error. Once nothing will be incremental to a checkpoint
// it only costs: QEMU keeps recording writes in its bitmaps.
func (c *Conn) DeleteCheckpoints(ctx context.Context, domain string, names []string) error {
	for _, name := range names {
		if err := c.DeleteCheckpoint(domain, name); err != nil {
			return err
		}
	}
	active, err := c.Active(domain)
	if err != nil || active {
		return err
	}
	disks, err := c.Disks(domain)
	if err != nil {
		return err
	}
	for _, d := range disks {
		if d.Format != "qcow2" {
			continue
		}
		have, err := Bitmaps(d.Source)
		if err != nil {
			return err
		}
		for _, name := range names {
			if slices.Contains(have, name) {
				if err := removeBitmap(ctx, d.Source, name); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// RedefineCheckpoint gives libvirt back a checkpoint it lost (the domain
// was defined again) from its saved XML, checking that its bitmap is
// still consistent in every disk: ErrCheckpointInconsistent otherwise.
// The XML's parent is dropped (libvirt refuses a parent it does not know).
func (c *Conn) RedefineCheckpoint(domain, checkpointXML string) error {
	checkpointXML, err := withoutParent(checkpointXML)
	if err != nil {
		return fmt.Errorf("domain %s: %w", domain, err)
	}
	d, err := c.domain(domain)
	if err != nil {
		return err
	}
	defer d.Free()
	cp, err := d.CreateCheckpointXML(checkpointXML, libvirt.DOMAIN_CHECKPOINT_CREATE_REDEFINE|libvirt.DOMAIN_CHECKPOINT_CREATE_REDEFINE_VALIDATE)
	if isError(err, libvirt.ERR_CHECKPOINT_INCONSISTENT) {
		return fmt.Errorf("domain %s: %w: %v", domain, ErrCheckpointInconsistent, err)
	}
	if err != nil {
		return fmt.Errorf("domain %s: redefining a checkpoint: %w", domain, err)
	}
	return cp.Free()
}

// DeleteCheckpoint deletes a checkpoint and its bitmaps; a missing one is
// not an error.
func (c *Conn) DeleteCheckpoint(domain, name string) error {
	d, err := c.domain(domain)
	if err != nil {
		return err
	}
	defer d.Free()
	cp, err := d.CheckpointLookupByName(name, 0)
	if isError(err, libvirt.ERR_NO_DOMAIN_CHECKPOINT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("domain %s: checkpoint %s: %w", domain, name, err)
	}
	defer cp.Free()
	if err := cp.Delete(0); err != nil {
		// A stopped domain's bitmaps cannot be removed through QEMU: its
		// metadata goes; a later verification deals with the bitmap.
		if active, aerr := d.IsActive(); aerr == nil && !active {
			if merr := cp.Delete(libvirt.DOMAIN_CHECKPOINT_DELETE_METADATA_ONLY); merr == nil {
				return nil
			}
		}
		return fmt.Errorf("domain %s: deleting checkpoint %s: %w", domain, name, err)
	}
	return nil
}

// CheckpointSize is the bytes changed since a checkpoint, summed over its
// disks: what an incremental backup since it copies.
func (c *Conn) CheckpointSize(domain, name string) (uint64, error) {
	d, err := c.domain(domain)
	if err != nil {
		return 0, err
	}
	defer d.Free()
	cp, err := d.CheckpointLookupByName(name, 0)
	if err != nil {
		return 0, fmt.Errorf("domain %s: checkpoint %s: %w", domain, name, err)
	}
	defer cp.Free()
	desc, err := cp.GetXMLDesc(libvirt.DOMAIN_CHECKPOINT_XML_NO_DOMAIN | libvirt.DOMAIN_CHECKPOINT_XML_SIZE)
	if err != nil {
		return 0, fmt.Errorf("domain %s: checkpoint %s size: %w", domain, name, err)
	}
	total, err := checkpointSize(desc)
	if err != nil {
		return 0, fmt.Errorf("domain %s: checkpoint %s: %w", domain, name, err)
	}
	return total, nil
}

// VerifyCheckpoint makes libvirt check that a checkpoint's bitmaps are
// still consistent (after QEMU stopped abnormally they are not): libvirt
// forgets the checkpoint's metadata, which leaves the bitmaps alone, and
// the checkpoint is redefined with validation, from savedXML or, when that
// is empty, from libvirt's own XML of it. A checkpoint libvirt does not
// know is redefined from savedXML. ErrCheckpointInconsistent when the
// bitmaps are not usable.
func (c *Conn) VerifyCheckpoint(domain, name, savedXML string) error {
	d, err := c.domain(domain)
	if err != nil {
		return err
	}
	cp, err := d.CheckpointLookupByName(name, 0)
	switch {
	case isError(err, libvirt.ERR_NO_DOMAIN_CHECKPOINT):
	case err != nil:
		d.Free()
		return fmt.Errorf("domain %s: checkpoint %s: %w", domain, name, err)
	default:
		if savedXML == "" {
			if savedXML, err = cp.GetXMLDesc(libvirt.DOMAIN_CHECKPOINT_XML_NO_DOMAIN); err != nil {
				cp.Free()
				d.Free()
				return fmt.Errorf("domain %s: checkpoint %s: %w", domain, name, err)
			}
		}
		err = cp.Delete(libvirt.DOMAIN_CHECKPOINT_DELETE_METADATA_ONLY)
		cp.Free()
		if err != nil {
			d.Free()
			return fmt.Errorf("domain %s: checkpoint %s: forgetting its metadata to verify it: %w", domain, name, err)
		}
	}
	d.Free()
	if savedXML == "" {
		return fmt.Errorf("domain %s: checkpoint %s is unknown to libvirt and there is no saved XML to redefine it", domain, name)
	}
	return c.RedefineCheckpoint(domain, savedXML)
}

// RemoveStaleCheckpoint removes the bitmaps a checkpoint left in the
// domain's disks when they cannot be used any more (inconsistent after
// QEMU stopped abnormally), so they do not pile up in the images: the
// checkpoint is redefined without validation from savedXML and deleted,
// which has QEMU remove its bitmaps.
func (c *Conn) RemoveStaleCheckpoint(domain, name, savedXML string) error {
	d, err := c.domain(domain)
	if err != nil {
		return err
	}
	defer d.Free()
	if cp, err := d.CheckpointLookupByName(name, 0); err == nil {
		cp.Free()
	} else {
		if savedXML == "" {
			return fmt.Errorf("domain %s: checkpoint %s: no XML to redefine it from", domain, name)
		}
		redefine, err := withoutParent(savedXML)
		if err != nil {
			return fmt.Errorf("domain %s: checkpoint %s: %w", domain, name, err)
		}
		cp, err := d.CreateCheckpointXML(redefine, libvirt.DOMAIN_CHECKPOINT_CREATE_REDEFINE)
		if err != nil {
			return fmt.Errorf("domain %s: redefining stale checkpoint %s to remove it: %w", domain, name, err)
		}
		cp.Free()
	}
	cp, err := d.CheckpointLookupByName(name, 0)
	if err != nil {
		return fmt.Errorf("domain %s: checkpoint %s: %w", domain, name, err)
	}
	defer cp.Free()
	if err := cp.Delete(0); err != nil {
		// A bitmap QEMU never stored (it was killed before) cannot be
		// removed: there is nothing stale, the metadata goes.
		if merr := cp.Delete(libvirt.DOMAIN_CHECKPOINT_DELETE_METADATA_ONLY); merr != nil {
			return fmt.Errorf("domain %s: removing stale checkpoint %s: %w", domain, name, err)
		}
	}
	return nil
}
