package virt

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestGrantReadWrite: named user entries are added once each, beside the
// mode's own entries, with a mask that lets them through.
func TestGrantReadWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "disk.raw")
	if err := os.WriteFile(path, []byte("data"), 0o640); err != nil {
		t.Fatal(err)
	}
	for _, uid := range []int{64055, 1234, 64055} {
		if err := grantReadWrite(path, uid); err != nil {
			t.Fatalf("granting uid %d: %v", uid, err)
		}
	}
	buf := make([]byte, 1024)
	n, err := syscall.Getxattr(path, aclXattr, buf)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeACL(buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	want := []aclEntry{
		{aclUserObj, 6, aclNoID},
		{aclUser, 6, 1234},
		{aclUser, 6, 64055},
		{aclGroupObj, 4, aclNoID},
		{aclMask, 6, aclNoID},
		{aclOther, 0, aclNoID},
	}
	if !slices.Equal(got, want) {
		t.Errorf("ACL %+v, want %+v", got, want)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// With an ACL, the group bits of the mode show the mask.
	if fi.Mode().Perm() != 0o660 {
		t.Errorf("mode %o, want 660 (owner rw, mask rw, other none)", fi.Mode().Perm())
	}
}

func TestCheckReachable(t *testing.T) {
	// Not t.TempDir(): its parent is private to the test's user.
	root, err := os.MkdirTemp("", "backstop-reach-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(root, "open", "state")
	closed := filepath.Join(root, "closed", "state")
	for _, d := range []string{open, closed} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Dir(closed), 0o700); err != nil {
		t.Fatal(err)
	}
	// The temporary directory's parents are searchable by others on a
	// normal system; a uid that owns nothing here stands for QEMU's user.
	const uid, gid = 64055, 64055
	if err := checkReachable(open, uid, gid); err != nil {
		t.Errorf("open path: %v", err)
	}
	err = checkReachable(closed, uid, gid)
	if err == nil || !strings.Contains(err.Error(), filepath.Dir(closed)) {
		t.Errorf("closed path: %v, want an error naming %s", err, filepath.Dir(closed))
	}
	if err := checkReachable(closed, 0, 0); err != nil {
		t.Errorf("root reaches everything: %v", err)
	}
}
