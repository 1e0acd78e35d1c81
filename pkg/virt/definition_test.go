package virt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"
)

// TestRestorableDefinition: a definition written by whoever writes the
// backup's volume defines, restored, a domain with none of the host's
// resources it names: no QEMU arguments, host file systems or devices,
// files as serial ports, security labels, emulator path, secrets, or a
// kernel or firmware outside the allowed directories; what a VM needs
// stays (its disks, network, console, guest agent, firmware from an
// allowed directory), and each thing left out is said.
func TestRestorableDefinition(t *testing.T) {
	boot := t.TempDir()
	firmware := filepath.Join(boot, "OVMF_CODE.fd")
	if err := os.WriteFile(firmware, []byte("firmware"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A link in the allowed directory to a file outside it.
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(boot, "vmlinuz")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	hostile := `<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>ns_vm</name>
  <memory unit='MiB'>256</memory>
  <vcpu>2</vcpu>
  <memoryBacking><source type='file'/></memoryBacking>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <smbios mode='host'/>
    <loader readonly='no' type='pflash'>` + firmware + `</loader>
    <nvram>/etc/shadow</nvram>
    <kernel>` + link + `</kernel>
    <initrd>/etc/ssh/ssh_host_rsa_key</initrd>
    <cmdline>console=ttyS0</cmdline>
  </os>
  <devices>
    <emulator>/tmp/evil-qemu</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='/var/lib/libvirt/images/other-tenant.qcow2'/>
      <target dev='vda' bus='virtio'/>
      <encryption format='luks'><secret type='passphrase' uuid='0a81f5b2-8403-7b23-c8d6-21ccc2f80d6f'/></encryption>
    </disk>
    <disk type='file' device='cdrom'>
      <source file='/root/.kube/config'/>
      <target dev='sda' bus='sata'/>
    </disk>
    <filesystem type='mount'><source dir='/'/><target dir='hostroot'/></filesystem>
    <hostdev mode='subsystem' type='pci'><source><address domain='0' bus='0' slot='2' function='0'/></source></hostdev>
    <interface type='network'><source network='default'/><model type='virtio'/></interface>
    <interface type='ethernet'><script path='/tmp/evil.sh'/></interface>
    <interface type='user'/>
    <interface type='bridge'><source bridge='storage0'/></interface>
    <serial type='file'><source path='/etc/cron.d/evil'/><target port='0'/></serial>
    <console type='pty'><target type='serial' port='0'/></console>
    <channel type='unix'><source mode='bind' path='/run/evil.sock'/><target type='virtio' name='org.qemu.guest_agent.0'/></channel>
    <channel type='unix'><source mode='connect' path='/run/libvirt/libvirt-sock'/><target type='virtio' name='org.example.x'/></channel>
    <graphics type='vnc' port='5900' listen='0.0.0.0' passwd='x'/>
    <rng model='virtio'><backend model='random'>/dev/sda</backend></rng>
    <input type='evdev'><source dev='/dev/input/event0'/></input>
    <input type='tablet' bus='usb'/>
  </devices>
  <on_crash>coredump-restart</on_crash>
  <seclabel type='none'/>
  <qemu:commandline><qemu:arg value='-add-fd'/><qemu:arg value='fd=3,set=1'/></qemu:commandline>
</domain>`
	got, dropped, err := RestorableDefinition(hostile, Restorable{BootDirs: []string{boot}, Networks: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"commandline", "-add-fd", "/etc/shadow", link, "ssh_host", "evil", "/root/.kube", "hostroot", "hostdev",
		"seclabel", "0.0.0.0", "passwd", "/dev/sda", "event0", "memoryBacking", "encryption", "0a81f5b2", "libvirt-sock", "cdrom",
		`type="user"`, "storage0", "coredump", `mode="host"`, `readonly="no"`} {
		if strings.Contains(got, gone) {
			t.Errorf("the restorable definition holds %q:\n%s", gone, got)
		}
	}
	for _, kept := range []string{"<name>ns_vm</name>", "<vcpu>2</vcpu>", firmware, `dev="vda"`, `network="default"`,
		`name="org.qemu.guest_agent.0"`, `type="tablet"`, `<listen type="address" address="127.0.0.1"`, `<serial type="pty">`} {
		if !strings.Contains(got, kept) {
			t.Errorf("the restorable definition lacks %q:\n%s", kept, got)
		}
	}
	said := strings.Join(dropped, "\n")
	for _, want := range []string{"QEMU command line", "security labels", "memory backing", "kernel", "initrd", "NVRAM",
		"host file systems", "host devices", "cdrom disk", "interface", "serial port", "channel other", "random number", "type evdev", "encryption"} {
		if !strings.Contains(said, want) {
			t.Errorf("what was left out does not say %q:\n%s", want, said)
		}
	}
	if _, err := parseDomain(got); err != nil {
		t.Errorf("the restorable definition does not parse: %v", err)
	}
	t.Logf("left out:\n%s", said)
}

// TestFitsMemory: a domain defined from a restored definition may not ask
// for more memory than the host has, in any of libvirt's units; a
// quantity that overflows or has no unit libvirt knows is refused.
func TestFitsMemory(t *testing.T) {
	const host = 8 << 20 // 8 GiB, in KiB
	for _, tc := range []struct {
		name    string
		memory  *libvirtxml.DomainMemory
		current *libvirtxml.DomainCurrentMemory
		refused string
	}{
		{name: "1 GiB in KiB, libvirt's default unit", memory: &libvirtxml.DomainMemory{Value: 1 << 20}},
		{name: "the host's whole memory", memory: &libvirtxml.DomainMemory{Value: 8, Unit: "GiB"}},
		{name: "1 TiB", memory: &libvirtxml.DomainMemory{Value: 1, Unit: "TiB"}, refused: "more than the host's"},
		{name: "9 GB in bytes", memory: &libvirtxml.DomainMemory{Value: 9_000_000_000, Unit: "b"}, refused: "more than the host's"},
		{name: "a current memory past the host's", memory: &libvirtxml.DomainMemory{Value: 1, Unit: "GiB"},
			current: &libvirtxml.DomainCurrentMemory{Value: 16, Unit: "G"}, refused: "current memory"},
		{name: "an overflowing quantity", memory: &libvirtxml.DomainMemory{Value: 1 << 40, Unit: "EiB"}, refused: "more than any host has"},
		{name: "an unknown unit", memory: &libvirtxml.DomainMemory{Value: 1, Unit: "pages"}, refused: "unknown unit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := fitsMemory(&libvirtxml.Domain{Memory: tc.memory, CurrentMemory: tc.current}, host)
			if tc.refused == "" && err != nil {
				t.Errorf("refused: %v", err)
			}
			if tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)) {
				t.Errorf("%v, want refused saying %q", err, tc.refused)
			}
		})
	}
}
