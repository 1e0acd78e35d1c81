package vmmanifest

import (
	"fmt"
	"syscall"
)

// FreeBytes is the space an unprivileged writer may still use in the file
// system of dir.
func FreeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}
