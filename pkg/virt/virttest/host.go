package virttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"libvirt.org/go/libvirt"
)

// StartHost starts a second libvirt daemon (libvirtd and its virtlogd) on
// this machine, as another host's would be: in a mount namespace of its
// own, whose /run/libvirt, /etc/libvirt, /var/lib/libvirt,
// /var/cache/libvirt and /var/log/libvirt are directories of the test, so
// that it shares no domain, socket or state with the system daemon. It
// returns its URI (its socket, reached from outside the namespace); the
// daemons are killed when the test ends, after the domains made on it
// (cleanups run last-in first-out).
func StartHost(t testing.TB) string {
	t.Helper()
	Require(t)
	dir, err := os.MkdirTemp("", "backstop-libvirt-host-")
	if err != nil {
		t.Fatal(err)
	}
	sub := map[string]string{"run": "/run/libvirt", "etc": "/etc/libvirt", "lib": "/var/lib/libvirt", "cache": "/var/cache/libvirt", "log": "/var/log/libvirt"}
	var mounts []string
	for name, target := range sub {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		mounts = append(mounts, fmt.Sprintf("mount --bind %s %s", filepath.Join(dir, name), target))
	}
	// The system daemon's configuration, without its domains.
	Run(t, "cp", "-a", "/etc/libvirt/.", filepath.Join(dir, "etc"))
	defined, _ := filepath.Glob(filepath.Join(dir, "etc", "qemu", "*.xml"))
	for _, f := range defined {
		_ = os.Remove(f)
	}
	logd, daemon := filepath.Join(dir, "virtlogd.pid"), filepath.Join(dir, "libvirtd.pid")
	script := strings.Join(mounts, " && ") + fmt.Sprintf(" && virtlogd --daemon --pid-file %s && libvirtd --daemon --pid-file %s", logd, daemon)
	if out, err := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script).CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		t.Fatalf("starting a second libvirt daemon: %v: %s", err, out)
	}
	uri := "qemu+unix:///system?socket=" + filepath.Join(dir, "run", "libvirt-sock")
	t.Cleanup(func() {
		for _, pidFile := range []string{daemon, logd} {
			if data, err := os.ReadFile(pidFile); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
					_ = syscall.Kill(pid, syscall.SIGTERM)
					for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil; {
						time.Sleep(50 * time.Millisecond)
					}
				}
			}
		}
		_ = os.RemoveAll(dir)
	})
	var last error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		conn, err := libvirt.NewConnect(uri)
		if err == nil {
			_, _ = conn.Close()
			return uri
		}
		last = err
	}
	t.Fatalf("the second libvirt daemon does not answer on %s: %v", uri, last)
	return ""
}
