package virt

// Every libvirt XML document the package reads or writes, through
// libvirt.org/go/libvirtxml: domains (their file disks), backup jobs,
// checkpoints and the host capabilities.

import (
	"fmt"
	"path/filepath"

	"libvirt.org/go/libvirtxml"
)

// parseDomain decodes a domain XML.
func parseDomain(desc string) (*libvirtxml.Domain, error) {
	var d libvirtxml.Domain
	if err := d.Unmarshal(desc); err != nil {
		return nil, fmt.Errorf("decoding the domain XML: %w", err)
	}
	return &d, nil
}

// fileDisks are the file-backed disks (device "disk") of a domain, to read
// or change in place.
func fileDisks(d *libvirtxml.Domain) []*libvirtxml.DomainDisk {
	if d.Devices == nil {
		return nil
	}
	var out []*libvirtxml.DomainDisk
	for i := range d.Devices.Disks {
		disk := &d.Devices.Disks[i]
		if disk.Device == "disk" && disk.Source != nil && disk.Source.File != nil && disk.Source.File.File != "" {
			out = append(out, disk)
		}
	}
	return out
}

// diskFormat is a disk's driver type (raw, qcow2).
func diskFormat(disk *libvirtxml.DomainDisk) string {
	if disk.Driver == nil {
		return ""
	}
	return disk.Driver.Type
}

// diskFile is a file disk's image.
func diskFile(disk *libvirtxml.DomainDisk) string { return disk.Source.File.File }

// diskTarget is a disk's device name (vda).
func diskTarget(disk *libvirtxml.DomainDisk) string {
	if disk.Target == nil {
		return ""
	}
	return disk.Target.Dev
}

// setDiskSource makes a file disk read format from file.
func setDiskSource(disk *libvirtxml.DomainDisk, format, file string) {
	if disk.Driver == nil {
		disk.Driver = &libvirtxml.DomainDiskDriver{Name: "qemu"}
	}
	disk.Driver.Type = format
	disk.Source.File.File = file
}

// pushBackupXML is a push-mode backup job writing each disk into its
// target (qcow2), incremental since a checkpoint unless incremental is "".
func pushBackupXML(disks []Disk, targets map[string]string, incremental string) (string, error) {
	push := &libvirtxml.DomainBackupPushDisks{}
	for _, d := range disks {
		push.Disks = append(push.Disks, libvirtxml.DomainBackupPushDisk{
			Name: d.Name, Backup: "yes",
			Driver: &libvirtxml.DomainBackupDiskDriver{Type: "qcow2"},
			Target: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: targets[d.Name]}},
		})
	}
	b := libvirtxml.DomainBackup{Incremental: incremental, Push: &libvirtxml.DomainBackupPush{Disks: push}}
	return b.Marshal()
}

// pullBackupXML is a full pull-mode backup job exporting every disk over
// NBD on a unix socket; the scratch files (in targetDir) take the old
// contents of blocks the guest writes while the export is read.
func pullBackupXML(socket string, disks []Disk, targetDir string) (string, error) {
	pull := &libvirtxml.DomainBackupPullDisks{}
	for _, d := range disks {
		pull.Disks = append(pull.Disks, libvirtxml.DomainBackupPullDisk{
			Name: d.Name, Backup: "yes",
			Scratch: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: filepath.Join(targetDir, "."+d.Name+".scratch")}},
		})
	}
	b := libvirtxml.DomainBackup{Pull: &libvirtxml.DomainBackupPull{
		Server: &libvirtxml.DomainBackupPullServer{UNIX: &libvirtxml.DomainBackupPullServerUNIX{Socket: socket}},
		Disks:  pull,
	}}
	return b.Marshal()
}

// newCheckpointXML is the checkpoint a backup job starts: a dirty bitmap
// in each disk ("" without a name).
func newCheckpointXML(name string, disks []Disk) (string, error) {
	if name == "" {
		return "", nil
	}
	cp := libvirtxml.DomainCheckpoint{Name: name, Disks: &libvirtxml.DomainCheckpointDisks{}}
	for _, d := range disks {
		cp.Disks.Disks = append(cp.Disks.Disks, libvirtxml.DomainCheckpointDisk{Name: d.Name, Checkpoint: "bitmap"})
	}
	return cp.Marshal()
}

// withoutParent is a saved checkpoint XML without its parent: a checkpoint
// is redefined on its own, and libvirt refuses a parent it does not know.
func withoutParent(checkpointXML string) (string, error) {
	var cp libvirtxml.DomainCheckpoint
	if err := cp.Unmarshal(checkpointXML); err != nil {
		return "", fmt.Errorf("decoding the checkpoint XML: %w", err)
	}
	cp.Parent = nil
	return cp.Marshal()
}

// checkpointSize is the sum of the disk sizes of a checkpoint XML read
// with libvirt's size flag: what an incremental since it copies.
func checkpointSize(desc string) (uint64, error) {
	var cp libvirtxml.DomainCheckpoint
	if err := cp.Unmarshal(desc); err != nil {
		return 0, fmt.Errorf("decoding the checkpoint XML: %w", err)
	}
	var total uint64
	if cp.Disks != nil {
		for _, d := range cp.Disks.Disks {
			total += d.Size
		}
	}
	return total, nil
}

// qemuBaseLabel is the DAC base label of QEMU domains in the host
// capabilities ("+64055:+64055"), "" when the DAC model is off.
func qemuBaseLabel(capsXML string) (string, error) {
	var caps libvirtxml.Caps
	if err := caps.Unmarshal(capsXML); err != nil {
		return "", fmt.Errorf("decoding host capabilities: %w", err)
	}
	for _, m := range caps.Host.SecModel {
		if m.Name != "dac" {
			continue
		}
		for _, l := range m.Labels {
			if l.Type == "qemu" {
				return l.Value, nil
			}
		}
	}
	return "", nil
}
