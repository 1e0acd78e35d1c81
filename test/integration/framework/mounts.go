package framework

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// MountsUnder are the mount points under dir (not dir itself), the
// deepest first.
func MountsUnder(t testing.TB, dir string) []string {
	t.Helper()
	under, err := mountsUnder("/proc/self/mountinfo", dir)
	if err != nil {
		t.Fatal(err)
	}
	return under
}

// mountsUnder are the mount points a mountinfo file lists under dir (not
// dir itself), the deepest first.
func mountsUnder(mountinfo, dir string) ([]string, error) {
	mounts, err := readMountinfo(mountinfo)
	if err != nil {
		return nil, err
	}
	var under []string
	for _, m := range mounts {
		if strings.HasPrefix(m.point, dir+"/") {
			under = append(under, m.point)
		}
	}
	sort.Slice(under, func(i, j int) bool { return len(under[i]) > len(under[j]) })
	return under, nil
}

// mount is a line of a mountinfo file: where, and of which filesystem.
type mount struct{ point, fsType string }

// readMountinfo reads a process's mountinfo file (/proc/<pid>/mountinfo).
func readMountinfo(file string) ([]mount, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading the mounts: %w", err)
	}
	var mounts []mount
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		// The mount point is the fifth field, with space, tab, newline
		// and backslash escaped in octal; the filesystem's type follows
		// the "-" that ends the optional fields.
		m := mount{point: unescapeMountinfo(fields[4])}
		for i := 6; i+1 < len(fields); i++ {
			if fields[i] == "-" {
				m.fsType = fields[i+1]
				break
			}
		}
		mounts = append(mounts, m)
	}
	return mounts, nil
}

// unmountUnder detaches every mount under dir, the deepest first: what a
// server killed or crashed mid-way left mounted (the data mover's
// publishes of claims), so that the test's directory can be removed. It
// reports each one it had to detach.
func unmountUnder(t testing.TB, dir string) {
	for _, point := range MountsUnder(t, dir) {
		if err := syscall.Unmount(point, syscall.MNT_DETACH); err != nil {
			t.Logf("left mounted after the test: %s (%v)", point, err)
			continue
		}
		t.Logf("detached a mount left after the test: %s", point)
	}
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
