package virttest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"libvirt.org/go/libvirt"
)

// guestFiles returns the test guest's kernel and initramfs, which
// hack/build-guest.sh (make tools) builds into _output/guest of the module
// ($BACKSTOP_GUEST_DIR elsewhere).
func guestFiles(t testing.TB) (kernel, initrd string) {
	t.Helper()
	dir := os.Getenv("BACKSTOP_GUEST_DIR")
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				dir = filepath.Join(d, "_output", "guest")
				break
			}
			if filepath.Dir(d) == d {
				t.Fatalf("no go.mod above %s to find _output/guest from; set BACKSTOP_GUEST_DIR", wd)
			}
		}
	}
	kernel, initrd = filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "initrd.gz")
	for _, f := range []string{kernel, initrd} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("the test guest is missing (%v): run hack/build-guest.sh (make tools does)", err)
		}
	}
	return kernel, initrd
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func guestXML(name, disk, kernel, initrd, console string) string {
	return fmt.Sprintf(`<domain type='qemu'>
  <name>%s</name>
  <memory unit='MiB'>256</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>%s</kernel>
    <initrd>%s</initrd>
    <cmdline>console=ttyS0 quiet panic=-1</cmdline>
  </os>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='%s'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <channel type='unix'>
      <target type='virtio' name='org.qemu.guest_agent.0'/>
    </channel>
    <serial type='file'>
      <source path='%s'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>`, name, kernel, initrd, disk, console)
}

// NewGuestDomain defines and starts a domain that boots a small Linux
// guest (hack/build-guest.sh) running QEMU's guest agent, whose 64 MiB
// qcow2 disk holds an ext4 file system the guest mounts; it returns once
// the agent answers. The domain is destroyed and undefined when the test
// ends.
func NewGuestDomain(t testing.TB, name string) *Domain {
	t.Helper()
	kernel, initrd := guestFiles(t)
	conn := connectFor(t, URI, name)
	dir := Dir(t)
	// Copies QEMU can reach (libvirt labels them for it while it runs).
	k, i := filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "initrd.gz")
	copyFile(t, kernel, k)
	copyFile(t, initrd, i)
	raw := filepath.Join(dir, "disk.raw")
	Run(t, "truncate", "-s", "64M", raw)
	Run(t, "mkfs.ext4", "-q", "-F", raw)
	d := &Domain{Name: name, Dir: dir, Disk: filepath.Join(dir, "disk.qcow2"), conn: conn}
	Run(t, "qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", raw, d.Disk)
	_ = os.Remove(raw)
	d.console = filepath.Join(dir, "console.log")
	d.xml = guestXML(name, d.Disk, k, i, d.console)
	d.Start(t)
	d.WaitAgent(t)
	return d
}

// WaitAgent waits (up to two minutes) until the guest agent answers a
// ping.
func (d *Domain) WaitAgent(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var err error
	for time.Now().Before(deadline) {
		if _, err = d.dom.QemuAgentCommand(`{"execute":"guest-ping"}`, libvirt.DomainQemuAgentCommandTimeout(5), 0); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	console, _ := os.ReadFile(d.console)
	t.Fatalf("the guest agent of %s did not answer within two minutes: %v; console:\n%s", d.Name, err, console)
}

// AgentCommand runs a guest agent command (JSON) and returns its answer.
func (d *Domain) AgentCommand(t testing.TB, cmd string) string {
	t.Helper()
	out, err := d.dom.QemuAgentCommand(cmd, libvirt.DOMAIN_QEMU_AGENT_COMMAND_DEFAULT, 0)
	if err != nil {
		t.Fatalf("guest agent command %s on %s: %v", cmd, d.Name, err)
	}
	return out
}

// FilesystemState reads the state flags of the ext4 file system in a
// backup image (qcow2): "clean", or "needs_recovery" when its journal was
// not flushed (a copy of a mounted, unfrozen file system).
func FilesystemState(t testing.TB, image string) string {
	t.Helper()
	raw := filepath.Join(t.TempDir(), "fs.raw")
	Run(t, "qemu-img", "convert", "-U", "-O", "raw", image, raw)
	out := Run(t, "dumpe2fs", "-h", raw)
	for _, line := range strings.Split(out, "\n") {
		if features, ok := strings.CutPrefix(line, "Filesystem features:"); ok {
			if strings.Contains(features, "needs_recovery") {
				return "needs_recovery"
			}
			return "clean"
		}
	}
	t.Fatal(errors.New("dumpe2fs printed no features"))
	return ""
}
