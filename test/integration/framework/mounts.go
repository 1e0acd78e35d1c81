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
	data, err := os.ReadFile(mountinfo)
	if err != nil {
		return nil, fmt.Errorf("reading the mounts: %w", err)
	}
	var under []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		// The mount point is the fifth field, with space, tab, newline
		// and backslash escaped in octal.
		point := unescapeMountinfo(fields[4])
		if strings.HasPrefix(point, dir+"/") {
			under = append(under, point)
		}
	}
	sort.Slice(under, func(i, j int) bool { return len(under[i]) > len(under[j]) })
	return under, nil
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
