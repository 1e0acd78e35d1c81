package virt

import (
	"os"
	"path/filepath"
	"slices"
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
