package virt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// POSIX access ACLs, as Linux stores them in the system.posix_acl_access
// extended attribute (linux/posix_acl_xattr.h).
const (
	aclXattr     = "system.posix_acl_access"
	aclVersion   = 2
	aclUserObj   = 0x01
	aclUser      = 0x02
	aclGroupObj  = 0x04
	aclGroup     = 0x08
	aclMask      = 0x10
	aclOther     = 0x20
	aclNoID      = 0xffffffff
	aclEntrySize = 8
)

type aclEntry struct {
	tag  uint16
	perm uint16
	id   uint32
}

// grantReadWrite gives user uid read and write access to path through its
// access ACL, keeping its owner, mode and other ACL entries. An ACL entry,
// unlike the owner, survives libvirt restoring a disk's owner when a domain
// that used it directly stops.
func grantReadWrite(path string, uid int) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	mode := uint16(fi.Mode().Perm())
	entries := []aclEntry{
		{aclUserObj, mode >> 6 & 7, aclNoID},
		{aclGroupObj, mode >> 3 & 7, aclNoID},
		{aclOther, mode & 7, aclNoID},
	}
	buf := make([]byte, 4+64*aclEntrySize)
	n, err := syscall.Getxattr(path, aclXattr, buf)
	switch {
	case err == nil:
		if entries, err = decodeACL(buf[:n]); err != nil {
			return fmt.Errorf("reading the ACL of %s: %w", path, err)
		}
	case errors.Is(err, syscall.ENODATA):
	default:
		return fmt.Errorf("reading the ACL of %s: %w", path, err)
	}
	entries = slices.DeleteFunc(entries, func(e aclEntry) bool {
		return e.tag == aclMask || (e.tag == aclUser && e.id == uint32(uid))
	})
	entries = append(entries, aclEntry{aclUser, 6, uint32(uid)})
	// The mask bounds the group class: every named entry and the owning group.
	var mask uint16
	for _, e := range entries {
		if e.tag == aclUser || e.tag == aclGroup || e.tag == aclGroupObj {
			mask |= e.perm
		}
	}
	entries = append(entries, aclEntry{aclMask, mask, aclNoID})
	slices.SortFunc(entries, func(a, b aclEntry) int {
		if a.tag != b.tag {
			return int(a.tag) - int(b.tag)
		}
		return int(int64(a.id) - int64(b.id))
	})
	if err := syscall.Setxattr(path, aclXattr, encodeACL(entries), 0); err != nil {
		return fmt.Errorf("granting uid %d access to %s through its ACL: %w", uid, path, err)
	}
	return nil
}

func decodeACL(b []byte) ([]aclEntry, error) {
	if len(b) < 4 || binary.LittleEndian.Uint32(b) != aclVersion || (len(b)-4)%aclEntrySize != 0 {
		return nil, fmt.Errorf("unexpected ACL encoding (%d bytes)", len(b))
	}
	var out []aclEntry
	for b = b[4:]; len(b) > 0; b = b[aclEntrySize:] {
		out = append(out, aclEntry{binary.LittleEndian.Uint16(b), binary.LittleEndian.Uint16(b[2:]), binary.LittleEndian.Uint32(b[4:])})
	}
	return out, nil
}

func encodeACL(entries []aclEntry) []byte {
	b := binary.LittleEndian.AppendUint32(nil, aclVersion)
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b
}

// checkReachable reports an error naming the first directory of dir or its
// parents that user uid (group gid) may not search: QEMU, running as that
// user, opens overlays by path. Mode bits only; an ACL granting search is
// not consulted.
func checkReachable(dir string, uid, gid int) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		perm := fi.Mode().Perm()
		var can bool
		switch {
		case uid == 0:
			can = true
		case int(st.Uid) == uid:
			can = perm&0o100 != 0
		case int(st.Gid) == gid:
			can = perm&0o010 != 0
		default:
			can = perm&0o001 != 0
		}
		if !can {
			return fmt.Errorf("QEMU's user (uid %d) cannot reach %s: %s has mode %v (give it o+x)", uid, dir, d, perm)
		}
		if parent := filepath.Dir(d); parent == d {
			return nil
		}
	}
}
