package virt

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"libvirt.org/go/libvirtxml"
)

// A domain definition saved with a VM backup lives in the backup's volume,
// which the VM's namespace can write: a restore that defines a new domain
// from it defines what the definition says, with the rights of the libvirt
// daemon (QEMU's command line, files it opens, host devices). So a new
// domain is defined from a definition rebuilt from what a VM needs and
// nothing else: RestorableDefinition keeps the machine (memory, CPUs,
// features, clock), file disks (whose images the restore writes and
// names), network interfaces on the libvirt networks and bridges the
// admin allows (Restorable.Networks), serial
// consoles (on a pty), the guest agent's channel (its socket libvirt's),
// graphics on loopback, and the devices that name no host resource; a
// kernel, an initrd or a firmware only from the directories the admin
// allows (BootDirs). Everything else (extra QEMU arguments, host devices,
// file systems of the host, files as serial ports, security labels, the
// emulator's path, shared memory, ...) is left out, and said.

// DefaultBootDirs are the directories a restored domain's firmware may
// come from by default: the distributions' firmware.
var DefaultBootDirs = []string{"/usr/share/OVMF", "/usr/share/AAVMF", "/usr/share/edk2", "/usr/share/qemu", "/usr/share/seabios"}

// DefaultNetworks are the libvirt networks and bridges a restored domain's
// interfaces may be on by default: libvirt's default network.
var DefaultNetworks = []string{"default"}

// Restorable says what a restored domain may use of the host.
type Restorable struct {
	// BootDirs are the directories its kernel, initrd, device tree and
	// firmware may be read from (an absolute path whose links resolve
	// inside one of them).
	BootDirs []string
	// Networks are the libvirt networks and bridges its interfaces may be
	// on (a name elsewhere could be a host's management or storage
	// network, or hand the guest a host device).
	Networks []string
}

// RestorableDefinition rebuilds definition as a restore defines a new
// domain from it (above), and says what it left out.
func RestorableDefinition(definition string, allowed Restorable) (string, []string, error) {
	bootDirs := allowed.BootDirs
	in, err := parseDomain(definition)
	if err != nil {
		return "", nil, err
	}
	out := &libvirtxml.Domain{Type: in.Type, Name: in.Name, Title: in.Title, Description: in.Description,
		MaximumMemory: in.MaximumMemory, Memory: in.Memory, CurrentMemory: in.CurrentMemory, VCPU: in.VCPU, VCPUs: in.VCPUs,
		IOThreads: in.IOThreads, IOThreadIDs: in.IOThreadIDs, CPU: in.CPU, Clock: in.Clock, Features: in.Features,
		OnPoweroff: in.OnPoweroff, OnReboot: in.OnReboot, OnCrash: in.OnCrash, PM: in.PM}
	// A crash dumps no memory onto the host's disk.
	if strings.HasPrefix(out.OnCrash, "coredump") {
		out.OnCrash = "destroy"
	}
	var dropped []string
	drop := func(format string, args ...any) { dropped = append(dropped, fmt.Sprintf(format, args...)) }
	for name, present := range map[string]bool{
		"QEMU command line arguments": in.QEMUCommandline != nil, "QEMU capabilities": in.QEMUCapabilities != nil,
		"QEMU overrides": in.QEMUOverride != nil, "security labels": len(in.SecLabel) > 0, "memory backing": in.MemoryBacking != nil,
		"block I/O tuning": in.BlockIOTune != nil, "system information": len(in.SysInfo) > 0,
		"resource partition": in.Resource != nil && (in.Resource.Partition != "/machine" || in.Resource.FibreChannel != nil),
		"bootloader":         in.Bootloader != "", "ID map": in.IDMap != nil, "metadata": in.Metadata != nil, "launch security": in.LaunchSecurity != nil,
		"key wrapping": in.KeyWrap != nil, "performance events": in.Perf != nil, "NUMA tuning": in.NUMATune != nil, "CPU tuning": in.CPUTune != nil,
	} {
		if present {
			drop("%s", name)
		}
	}
	inDirs := func(p string) bool { return p != "" && underDirs(p, bootDirs) }
	if os := in.OS; os != nil {
		o := &libvirtxml.DomainOS{Type: os.Type, Firmware: os.Firmware, FirmwareInfo: os.FirmwareInfo, BootDevices: os.BootDevices,
			BootMenu: os.BootMenu, BIOS: os.BIOS}
		// The host's own SMBIOS data is the host's.
		if os.SMBios != nil && os.SMBios.Mode != "host" {
			o.SMBios = os.SMBios
		}
		if l := os.Loader; l != nil {
			if inDirs(l.Path) {
				// Read-only: the firmware's file is shared by every domain.
				o.Loader = &libvirtxml.DomainLoader{Path: l.Path, Readonly: "yes", Secure: l.Secure, Type: l.Type, Format: l.Format}
			} else {
				drop("loader %q (not in the allowed boot directories)", l.Path)
			}
		}
		if n := os.NVRam; n != nil {
			// The variables' file is libvirt's to make, from the template.
			if inDirs(n.Template) {
				o.NVRam = &libvirtxml.DomainNVRam{Template: n.Template, TemplateFormat: n.TemplateFormat}
			} else if n.Template != "" || n.NVRam != "" || n.Source != nil {
				drop("NVRAM %q (libvirt makes the variables' file)", n.NVRam+n.Template)
			}
		}
		for _, f := range []struct {
			what string
			path string
			set  func(string)
		}{
			{"kernel", os.Kernel, func(p string) { o.Kernel, o.Cmdline = p, os.Cmdline }},
			{"initrd", os.Initrd, func(p string) { o.Initrd = p }},
			{"device tree", os.DTB, func(p string) { o.DTB = p }},
			{"shim", os.Shim, func(p string) { o.Shim = p }},
		} {
			switch {
			case f.path == "":
			case inDirs(f.path):
				f.set(f.path)
			default:
				drop("%s %q (not in the allowed boot directories)", f.what, f.path)
			}
		}
		if os.ACPI != nil {
			drop("ACPI tables")
		}
		if os.Init != "" || len(os.InitArgs) > 0 || len(os.InitEnv) > 0 {
			drop("container init")
		}
		out.OS = o
	}
	if in.Devices != nil {
		out.Devices, dropped = restorableDevices(in.Devices, allowed.Networks, dropped)
	}
	sort.Strings(dropped)
	xml, err := out.Marshal()
	if err != nil {
		return "", nil, fmt.Errorf("encoding the domain's definition: %w", err)
	}
	return xml, dropped, nil
}

// restorableDevices keeps the devices a restored domain may have.
func restorableDevices(in *libvirtxml.DomainDeviceList, networks []string, dropped []string) (*libvirtxml.DomainDeviceList, []string) {
	drop := func(format string, args ...any) { dropped = append(dropped, fmt.Sprintf(format, args...)) }
	out := &libvirtxml.DomainDeviceList{Controllers: in.Controllers, Videos: in.Videos, Watchdogs: in.Watchdogs, Sounds: in.Sounds,
		Panics: in.Panics, MemBalloon: in.MemBalloon, IOMMU: in.IOMMU}
	// The emulator is libvirt's default for the machine (a path saved
	// with the definition is not taken, and not worth saying: libvirt
	// writes its default there).
	for _, d := range in.Disks {
		if d.Device != "disk" || d.Source == nil || d.Source.File == nil || d.Target == nil {
			drop("a %s disk (only file disks are restored)", d.Device)
			continue
		}
		disk := libvirtxml.DomainDisk{Device: "disk", Model: d.Model, Target: &libvirtxml.DomainDiskTarget{Dev: d.Target.Dev, Bus: d.Target.Bus},
			Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: d.Source.File.File}},
			Boot:   d.Boot, Serial: d.Serial, WWN: d.WWN, BlockIO: d.BlockIO, IOTune: d.IOTune, ReadOnly: d.ReadOnly, Shareable: d.Shareable,
			Address: d.Address}
		if dr := d.Driver; dr != nil {
			disk.Driver = &libvirtxml.DomainDiskDriver{Name: "qemu", Type: dr.Type, Cache: dr.Cache, IO: dr.IO, Discard: dr.Discard,
				DetectZeros: dr.DetectZeros, IOThread: dr.IOThread}
		}
		if d.Encryption != nil || d.Auth != nil {
			drop("the encryption and authentication of disk %s", d.Target.Dev)
		}
		out.Disks = append(out.Disks, disk)
	}
	for _, i := range in.Interfaces {
		src := i.Source
		var keep *libvirtxml.DomainInterfaceSource
		// User networking is left out: its gateway is the host's loopback.
		switch {
		case src != nil && src.Network != nil && slices.Contains(networks, src.Network.Network):
			keep = &libvirtxml.DomainInterfaceSource{Network: &libvirtxml.DomainInterfaceSourceNetwork{Network: src.Network.Network, PortGroup: src.Network.PortGroup}}
		case src != nil && src.Bridge != nil && slices.Contains(networks, src.Bridge.Bridge):
			keep = &libvirtxml.DomainInterfaceSource{Bridge: &libvirtxml.DomainInterfaceSourceBridge{Bridge: src.Bridge.Bridge}}
		}
		if keep == nil {
			drop("a network interface that is not on an allowed libvirt network or bridge (--vm-restore-networks)")
			continue
		}
		out.Interfaces = append(out.Interfaces, libvirtxml.DomainInterface{Source: keep, Model: i.Model, Boot: i.Boot, Address: i.Address})
	}
	pty := func() *libvirtxml.DomainChardevSource {
		return &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}}
	}
	for _, s := range in.Serials {
		if s.Source != nil && s.Source.Pty == nil {
			drop("the host end of a serial port (a pty instead)")
		}
		out.Serials = append(out.Serials, libvirtxml.DomainSerial{Source: pty(), Target: s.Target})
	}
	for _, c := range in.Consoles {
		if c.Source != nil && c.Source.Pty == nil {
			drop("the host end of a console (a pty instead)")
		}
		out.Consoles = append(out.Consoles, libvirtxml.DomainConsole{Source: pty(), Target: c.Target})
	}
	for _, c := range in.Channels {
		if c.Target == nil || c.Target.VirtIO == nil || c.Target.VirtIO.Name != "org.qemu.guest_agent.0" {
			drop("a channel other than the guest agent's")
			continue
		}
		out.Channels = append(out.Channels, libvirtxml.DomainChannel{
			Source: &libvirtxml.DomainChardevSource{UNIX: &libvirtxml.DomainChardevSourceUNIX{Mode: "bind"}},
			Target: &libvirtxml.DomainChannelTarget{VirtIO: &libvirtxml.DomainChannelTargetVirtIO{Name: c.Target.VirtIO.Name}}})
	}
	loopback := []libvirtxml.DomainGraphicListener{{Address: &libvirtxml.DomainGraphicListenerAddress{Address: "127.0.0.1"}}}
	for _, g := range in.Graphics {
		switch {
		case g.VNC != nil:
			out.Graphics = append(out.Graphics, libvirtxml.DomainGraphic{VNC: &libvirtxml.DomainGraphicVNC{AutoPort: "yes", Keymap: g.VNC.Keymap, Listeners: loopback}})
		case g.Spice != nil:
			out.Graphics = append(out.Graphics, libvirtxml.DomainGraphic{Spice: &libvirtxml.DomainGraphicSpice{AutoPort: "yes", Listeners: loopback}})
		default:
			drop("graphics other than VNC or SPICE")
		}
	}
	for _, i := range in.Inputs {
		switch i.Type {
		case "tablet", "mouse", "keyboard":
			out.Inputs = append(out.Inputs, libvirtxml.DomainInput{Type: i.Type, Bus: i.Bus, Model: i.Model})
		default:
			drop("an input of type %s", i.Type)
		}
	}
	for _, r := range in.RNGs {
		b := r.Backend
		switch {
		case b != nil && b.BuiltIn != nil:
			out.RNGs = append(out.RNGs, libvirtxml.DomainRNG{Model: r.Model, Rate: r.Rate, Backend: &libvirtxml.DomainRNGBackend{BuiltIn: &libvirtxml.DomainRNGBackendBuiltIn{}}})
		case b != nil && b.Random != nil && (b.Random.Device == "/dev/urandom" || b.Random.Device == "/dev/random"):
			out.RNGs = append(out.RNGs, libvirtxml.DomainRNG{Model: r.Model, Rate: r.Rate, Backend: &libvirtxml.DomainRNGBackend{Random: &libvirtxml.DomainRNGBackendRandom{Device: b.Random.Device}}})
		default:
			drop("a random number generator on a host device or socket")
		}
	}
	if in.VSock != nil {
		out.VSock = &libvirtxml.DomainVSock{Model: in.VSock.Model, CID: &libvirtxml.DomainVSockCID{Auto: "yes"}}
	}
	for name, n := range map[string]int{
		"host file systems": len(in.Filesystems), "host devices": len(in.Hostdevs), "redirected USB devices": len(in.RedirDevs),
		"smartcards": len(in.Smartcards), "parallel ports": len(in.Parallels), "TPMs": len(in.TPMs), "shared memory": len(in.Shmems),
		"memory devices": len(in.Memorydevs), "leases": len(in.Leases), "crypto devices": len(in.Crypto), "USB hubs": len(in.Hubs),
		"audio backends": len(in.Audios), "redirection filters": len(in.RedirFilters),
	} {
		if n > 0 {
			drop("%s", name)
		}
	}
	if in.NVRAM != nil || in.PStore != nil {
		drop("NVRAM and pstore devices")
	}
	return out, dropped
}

// underDirs reports whether p is an absolute, clean path that, its links
// resolved, lies inside one of dirs (theirs resolved too).
func underDirs(p string, dirs []string) bool {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return false
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return false
	}
	for _, d := range dirs {
		rd, err := filepath.EvalSymlinks(d)
		if err != nil {
			continue
		}
		if real == rd || strings.HasPrefix(real, rd+string(filepath.Separator)) {
			return true
		}
	}
	return false
}
