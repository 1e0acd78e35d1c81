// Package virttest makes real libvirt domains for tests: a guest-less
// QEMU (TCG) domain with one qcow2 virtio disk, which sits in firmware
// while tests write to its disk through the QEMU monitor (qemu-io on the
// virtio device's block backend), as a guest would.
package virttest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"libvirt.org/go/libvirt"
)

// URI is the libvirt daemon tests use.
const URI = "qemu:///system"

// Domain is a running test domain.
type Domain struct {
	Name string
	// Dir holds the disk; it and its parents are world-executable, as the
	// QEMU process (user libvirt-qemu) needs for every path it opens.
	Dir  string
	Disk string
	// console is the serial console's log (guest domains).
	console string
	conn    *libvirt.Connect
	dom     *libvirt.Domain
	xml     string
}

// Require skips t in the fast tier (go test -short, make test-unit): it
// needs libvirtd, QEMU and its tools, as root. In the full tier (make
// test) a missing daemon fails the test instead.
func Require(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs libvirtd and QEMU as root: not in the fast tier (make test-unit); make test runs it")
	}
}

// Dir makes a directory QEMU can reach, removed when the test ends.
func Dir(t testing.TB) string {
	t.Helper()
	Require(t)
	dir, err := os.MkdirTemp("", "backstop-virt-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func domainXML(name, disk, format string) string {
	return fmt.Sprintf(`<domain type='qemu'>
  <name>%s</name>
  <memory unit='MiB'>128</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='%s'/>
      <source file='%s'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <memballoon model='none'/>
  </devices>
</domain>`, name, format, disk)
}

// NewDomain defines and starts a domain with a qcow2 disk of size (a
// qemu-img size, e.g. "64M"); it is destroyed and undefined, with its
// checkpoint metadata, when the test ends.
func NewDomain(t testing.TB, name, size string) *Domain {
	t.Helper()
	return newDomain(t, URI, name, size, "qcow2")
}

// NewDomainOn is NewDomain on the libvirt daemon at uri (one StartHost
// started, say).
func NewDomainOn(t testing.TB, uri, name, size string) *Domain {
	t.Helper()
	return newDomain(t, uri, name, size, "qcow2")
}

// NewRawDomain is NewDomain with a raw disk (disk.raw), as KubeVirt's
// DataVolume and PVC disks are.
func NewRawDomain(t testing.TB, name, size string) *Domain {
	t.Helper()
	return newDomain(t, URI, name, size, "raw")
}

func newDomain(t testing.TB, uri, name, size, format string) *Domain {
	t.Helper()
	conn := connectFor(t, uri, name)
	dir := Dir(t)
	d := &Domain{Name: name, Dir: dir, Disk: filepath.Join(dir, "disk."+format), conn: conn}
	Run(t, "qemu-img", "create", "-q", "-f", format, d.Disk, size)
	d.xml = domainXML(name, d.Disk, format)
	d.Start(t)
	return d
}

// connectFor connects to the test daemon for a domain of that name: one
// left by an earlier run that was killed is removed now, and the domain
// is destroyed and undefined, with its checkpoint metadata, when the test
// ends.
func connectFor(t testing.TB, uri, name string) *libvirt.Connect {
	t.Helper()
	Require(t)
	conn, err := libvirt.NewConnect(uri)
	if err != nil {
		t.Fatalf("connecting to %s (is libvirtd running? hack/start-libvirt.sh): %v", uri, err)
	}
	// A connection of its own each time: the test's may have died with a
	// daemon the test restarted (TestLibvirtdRestart).
	remove := func() error {
		c, err := libvirt.NewConnect(uri)
		if err != nil {
			return err
		}
		defer func() { _, _ = c.Close() }()
		dom, err := c.LookupDomainByName(name)
		if err != nil {
			return nil // not defined
		}
		defer func() { _ = dom.Free() }()
		_ = dom.Destroy()
		return dom.UndefineFlags(libvirt.DOMAIN_UNDEFINE_CHECKPOINTS_METADATA)
	}
	if err := remove(); err != nil {
		t.Fatalf("removing domain %s left by an earlier run: %v", name, err)
	}
	t.Cleanup(func() {
		_, _ = conn.Close()
		if err := remove(); err != nil {
			t.Errorf("removing domain %s: %v", name, err)
		}
	})
	return conn
}

// Start starts the domain, defining it first when it is not defined
// (anew after ForgetCheckpoints).
func (d *Domain) Start(t testing.TB) {
	t.Helper()
	dom, err := d.conn.LookupDomainByName(d.Name)
	if err != nil {
		if dom, err = d.conn.DomainDefineXML(d.xml); err != nil {
			t.Fatalf("defining domain %s: %v", d.Name, err)
		}
	}
	if err := dom.Create(); err != nil {
		t.Fatalf("starting domain %s: %v", d.Name, err)
	}
	d.dom = dom
}

// UseDisk makes the (stopped) domain use another qcow2 image as its disk.
func (d *Domain) UseDisk(t testing.TB, disk string) {
	t.Helper()
	d.Disk = disk
	d.xml = domainXML(d.Name, disk, "qcow2")
	if err := d.dom.UndefineFlags(libvirt.DOMAIN_UNDEFINE_CHECKPOINTS_METADATA); err != nil {
		t.Fatalf("undefining domain %s: %v", d.Name, err)
	}
	dom, err := d.conn.DomainDefineXML(d.xml)
	if err != nil {
		t.Fatalf("redefining domain %s with disk %s: %v", d.Name, disk, err)
	}
	d.dom = dom
}

// Stop destroys the domain (QEMU exits; the disk keeps its bitmaps).
func (d *Domain) Stop(t testing.TB) {
	t.Helper()
	if err := d.dom.Destroy(); err != nil {
		t.Fatalf("destroying domain %s: %v", d.Name, err)
	}
}

// ForgetCheckpoints undefines the stopped domain with its checkpoint
// metadata, as when a VM's definition is made anew (libvirt then knows
// none of its checkpoints).
func (d *Domain) ForgetCheckpoints(t testing.TB) {
	t.Helper()
	if err := d.dom.UndefineFlags(libvirt.DOMAIN_UNDEFINE_CHECKPOINTS_METADATA); err != nil {
		t.Fatalf("undefining domain %s: %v", d.Name, err)
	}
}

// Write writes length bytes of pattern at offset of the disk as the
// guest would (qemu-io through the virtio device's block backend).
// Offsets and lengths are qemu-io's ("1M", "64k").
func (d *Domain) Write(t testing.TB, pattern byte, offset, length string) {
	t.Helper()
	cmd := fmt.Sprintf(`qemu-io -d /machine/peripheral/virtio-disk0/virtio-backend "write -P 0x%02x %s %s"`, pattern, offset, length)
	out, err := d.dom.QemuMonitorCommand(cmd, libvirt.DOMAIN_QEMU_MONITOR_COMMAND_HMP)
	// HMP reports success either way: an error is text in the output.
	if err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("writing to the disk of %s (%s): %v %q", d.Name, cmd, err, out)
	}
}

// Suspend pauses the guest, so that its disk can be compared; Resume
// undoes it.
func (d *Domain) Suspend(t testing.TB) {
	t.Helper()
	if err := d.dom.Suspend(); err != nil {
		t.Fatal(err)
	}
}

// Resume resumes a suspended guest.
func (d *Domain) Resume(t testing.TB) {
	t.Helper()
	if err := d.dom.Resume(); err != nil {
		t.Fatal(err)
	}
}

// Run runs a command and returns its output, failing the test on error.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// KillQEMU kills the domain's QEMU process with SIGKILL, as a crash
// would, and waits until libvirt sees the domain shut off.
func (d *Domain) KillQEMU(t testing.TB) {
	t.Helper()
	out, err := exec.Command("pgrep", "-f", "guest="+d.Name+",").Output()
	pids := strings.Fields(string(out))
	if err != nil || len(pids) != 1 {
		t.Fatalf("finding the QEMU process of %s: %v %q", d.Name, err, out)
	}
	Run(t, "kill", "-9", pids[0])
	deadline := time.Now().Add(time.Minute)
	for {
		state, _, err := d.dom.GetState()
		if err == nil && state == libvirt.DOMAIN_SHUTOFF {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("domain %s not shut off a minute after its QEMU was killed (state %v, %v)", d.Name, state, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ThrottleBackupJob waits (up to a minute) for the domain's backup job to
// appear in QEMU and limits its speed to bytesPerSecond (QMP
// block-job-set-speed), so that a test can act on a running backup.
func (d *Domain) ThrottleBackupJob(t testing.TB, bytesPerSecond int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := d.dom.QemuMonitorCommand(`{"execute":"query-block-jobs"}`, libvirt.DOMAIN_QEMU_MONITOR_COMMAND_DEFAULT)
		if err != nil {
			t.Fatalf("query-block-jobs on %s: %v", d.Name, err)
		}
		var res struct {
			Return []struct {
				Device string `json:"device"`
				Type   string `json:"type"`
				Status string `json:"status"`
			} `json:"return"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("query-block-jobs on %s: %v: %s", d.Name, err, out)
		}
		for _, j := range res.Return {
			// A job that ended (an earlier backup's, until libvirt
			// dismisses it) is listed too: not the one to throttle.
			if j.Type != "backup" || j.Status == "concluded" || j.Status == "null" || j.Status == "aborting" || j.Status == "pending" {
				continue
			}
			cmd := fmt.Sprintf(`{"execute":"block-job-set-speed","arguments":{"device":%q,"speed":%d}}`, j.Device, bytesPerSecond)
			if out, err := d.dom.QemuMonitorCommand(cmd, libvirt.DOMAIN_QEMU_MONITOR_COMMAND_DEFAULT); err != nil || strings.Contains(out, `"error"`) {
				t.Fatalf("throttling backup job %s of %s: %v %s", j.Device, d.Name, err, out)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no backup job appeared on %s within a minute", d.Name)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// DataRanges lists the ranges an image holds data for itself (not its
// backing chain), as "start+length" (qemu-img map).
func DataRanges(t testing.TB, image string) []string {
	t.Helper()
	var extents []struct {
		Start, Length, Depth int64
		Data                 bool
	}
	if err := json.Unmarshal([]byte(Run(t, "qemu-img", "map", "-U", "--output=json", image)), &extents); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range extents {
		if e.Depth == 0 && e.Data {
			out = append(out, fmt.Sprintf("%d+%d", e.Start, e.Length))
		}
	}
	return out
}

// Adopt makes a domain that a test has the server create (a restore's
// new domain) the test's: one of that name is removed now, and it is
// destroyed and undefined when the test ends.
func Adopt(t testing.TB, name string) { connectFor(t, URI, name) }

// Delete destroys the domain and undefines it with its checkpoint
// metadata, as deleting its VM would; its disk image stays.
func (d *Domain) Delete(t testing.TB) {
	t.Helper()
	_ = d.dom.Destroy()
	if err := d.dom.UndefineFlags(libvirt.DOMAIN_UNDEFINE_CHECKPOINTS_METADATA); err != nil {
		t.Fatalf("undefining domain %s: %v", d.Name, err)
	}
}

// ImageSHA256 is the sha256 of what the guest reads from an image (its
// raw contents), read without taking QEMU's locks.
func ImageSHA256(t testing.TB, image string) string {
	t.Helper()
	raw := filepath.Join(t.TempDir(), "image.raw")
	Run(t, "qemu-img", "convert", "-U", "-O", "raw", image, raw)
	out := Run(t, "sha256sum", raw)
	return strings.Fields(out)[0]
}
