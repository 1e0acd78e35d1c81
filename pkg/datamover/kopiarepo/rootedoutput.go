package kopiarepo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	kopiafs "github.com/kopia/kopia/fs"
	"github.com/kopia/kopia/snapshot"
	"github.com/kopia/kopia/snapshot/restore"
)

// A snapshot is read from a bucket, and whoever can write the bucket (a
// tenant, for its own storage location) can write a snapshot: its entry
// names, types, sizes, modes and symlink targets are input. kopia's own
// FilesystemOutput joins entry names to the target path unchecked (a name
// "../../x" writes outside it) and follows what it finds there. Restore
// writes through rootedOutput instead: every change goes through an
// os.Root opened on the target (nothing, not even a symlink the snapshot
// made a moment before, leads a write out of it), every entry name is
// checked as one path element, and an entry no real volume can hold ends
// the restore with ErrUnsafeEntry, which says which one.

// ErrUnsafeEntry is the error of a restore that met an entry no volume's
// file system can hold (a name that is not one path element, an entry of
// no known type, a file longer or shorter than its entry says): the
// snapshot was not made by an upload of a volume.
var ErrUnsafeEntry = errors.New("the snapshot holds an entry no volume can hold")

// maxSymlinkTarget is the longest symlink target restored (Linux's
// PATH_MAX).
const maxSymlinkTarget = 4096

// restoredModeBits are the mode bits a restore sets: the permissions, the
// sticky bit, and set-group-ID on directories (what fsGroup sets). A
// file's set-user-ID and set-group-ID bits are not restored (a forged
// snapshot would otherwise plant a set-user-ID program owned by root in a
// tenant's volume); Restore counts the files that had them.
func restoredModeBits(e kopiafs.Entry) os.FileMode {
	m := e.Mode() & (os.ModePerm | os.ModeSticky)
	if e.IsDir() {
		m |= e.Mode() & os.ModeSetgid
	}
	return m
}

// checkEntryName reports an error unless name can be one entry of a
// directory: not empty, ".", "..", no "/" or NUL, at most 255 bytes.
func checkEntryName(name string) error {
	switch {
	case name == "":
		return errors.New("an empty name")
	case name == "." || name == "..":
		return fmt.Errorf("the name %q", name)
	case len(name) > 255:
		return fmt.Errorf("a name of %d bytes (at most 255)", len(name))
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("the name %q, which holds a / or a NUL", name)
	}
	return nil
}

// unsafeEntry is the ErrUnsafeEntry of an entry at rel.
func unsafeEntry(rel, why string) error {
	return fmt.Errorf("%w: %q: %s", ErrUnsafeEntry, rel, why)
}

// rootedOutput is Restore's restore.Output: a snapshot's tree written
// under one directory through os.Root.
type rootedOutput struct {
	root *os.Root
	// rootBegun: the snapshot's root directory began (any later entry at
	// "" has an empty name).
	rootBegun atomic.Bool
	// privilegedFiles counts the files whose set-user-ID or set-group-ID
	// bits were not restored.
	privilegedFiles atomic.Int64
}

var _ restore.Output = (*rootedOutput)(nil)

// openRootedOutput opens target (a directory of the server's choosing,
// made when missing, as kopia's own output makes it) to restore into.
func openRootedOutput(target string) (*rootedOutput, error) {
	if err := os.MkdirAll(target, 0o700); err != nil {
		return nil, fmt.Errorf("making %s to restore into: %w", target, err)
	}
	root, err := os.OpenRoot(target)
	if err != nil {
		return nil, fmt.Errorf("opening %s to restore into: %w", target, err)
	}
	return &rootedOutput{root: root}, nil
}

// path returns the path under the root of the entry named name at rel
// (the path kopia's restore joined from the names of the entries above
// it and name; "" for the snapshot's root), checking name and rel.
func (o *rootedOutput) path(rel, name string) (string, error) {
	if rel == "" {
		return ".", nil
	}
	if err := checkEntryName(name); err != nil {
		return "", unsafeEntry(rel, err.Error())
	}
	// The parents' names were checked as their directories began (an
	// entry is written only after its directory's BeginDirectory): rel
	// must be the parent's path and this name.
	p := filepath.FromSlash(rel)
	if !filepath.IsLocal(p) || path.Base(rel) != name {
		return "", unsafeEntry(rel, "not a path under the volume")
	}
	return p, nil
}

func (o *rootedOutput) Parallelizable() bool { return true }

// BeginDirectory makes the directory (one already there, such as a new
// file system's lost+found, is kept).
func (o *rootedOutput) BeginDirectory(_ context.Context, rel string, e kopiafs.Directory) error {
	if rel == "" && !o.rootBegun.CompareAndSwap(false, true) {
		return unsafeEntry(rel, "an empty name")
	}
	p, err := o.path(rel, e.Name())
	if err != nil || p == "." {
		return err
	}
	err = o.root.Mkdir(p, 0o700)
	if errors.Is(err, fs.ErrExist) {
		st, serr := o.root.Lstat(p)
		if serr == nil && st.IsDir() {
			return nil
		}
		return fmt.Errorf("creating directory %q: something other than a directory is there", rel)
	}
	if err != nil {
		return fmt.Errorf("creating directory %q: %w", rel, err)
	}
	return nil
}

// FinishDirectory sets the directory's owner, mode and time once its
// entries are written.
func (o *rootedOutput) FinishDirectory(_ context.Context, rel string, e kopiafs.Directory) error {
	p, err := o.path(rel, e.Name())
	if err != nil {
		return err
	}
	return o.setAttributes(p, rel, e)
}

// WriteDirEntry is for shallow restores, which Restore does not make.
func (o *rootedOutput) WriteDirEntry(_ context.Context, rel string, _ *snapshot.DirEntry, _ kopiafs.Directory) error {
	return fmt.Errorf("restoring %q: a shallow restore is not supported", rel)
}

// copyBuffers are WriteFile's buffers.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// writerOnly hides a file's ReadFrom, so that io.CopyBuffer uses the
// pooled buffer.
type writerOnly struct{ io.Writer }

// WriteFile writes a new file holding exactly the bytes its entry says:
// what was there (a run cut short wrote it) is replaced, never written
// through.
func (o *rootedOutput) WriteFile(ctx context.Context, rel string, e kopiafs.File, progress restore.FileWriteProgress) error {
	p, err := o.path(rel, e.Name())
	if err != nil {
		return err
	}
	if p == "." {
		return unsafeEntry(rel, "an empty name")
	}
	if e.Size() < 0 {
		return unsafeEntry(rel, fmt.Sprintf("a file of %d bytes", e.Size()))
	}
	r, err := e.Open(ctx)
	if err != nil {
		return fmt.Errorf("reading %q from the snapshot: %w", rel, err)
	}
	defer r.Close()
	if err := o.replace(p, rel); err != nil {
		return err
	}
	f, err := o.root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("creating %q: %w", rel, err)
	}
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	// One byte more than the entry says tells a longer object.
	n, err := io.CopyBuffer(writerOnly{f}, io.LimitReader(&progressReader{r: r, progress: progress}, e.Size()+1), *buf)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %q: %w", rel, err)
	}
	if n != e.Size() {
		return unsafeEntry(rel, fmt.Sprintf("its entry says %d bytes, its data holds %s", e.Size(), holds(n, e.Size())))
	}
	if e.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		o.privilegedFiles.Add(1)
	}
	return o.setAttributes(p, rel, e)
}

// replace removes what is at p that is not a directory (a file or a
// symlink a restore run before this one wrote, the run cut short): the
// symlink itself, never what it leads to. A directory there is not a
// file's to replace.
func (o *rootedOutput) replace(p, rel string) error {
	st, err := o.root.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("reading %q: %w", rel, err)
	case st.IsDir():
		return fmt.Errorf("writing %q: a directory is there", rel)
	}
	if err := o.root.Remove(p); err != nil {
		return fmt.Errorf("replacing %q: %w", rel, err)
	}
	return nil
}

// holds says how many bytes a file's data held, when it was not the
// entry's size.
func holds(n, size int64) string {
	if n > size {
		return "more"
	}
	return fmt.Sprintf("%d", n)
}

// progressReader reports the bytes read to a restore's progress.
type progressReader struct {
	r        io.Reader
	progress restore.FileWriteProgress
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 && p.progress != nil {
		p.progress(int64(n))
	}
	return n, err
}

// FileExists: a restore is never incremental.
func (o *rootedOutput) FileExists(context.Context, string, kopiafs.File) bool { return false }

// CreateSymlink makes the symlink as the snapshot holds it: its target is
// data, kept as written (an absolute target, or one that climbs out of
// the volume, is what a volume may hold, as PostgreSQL's pg_tblspc
// does); nothing the restore does afterwards follows it out of the root.
func (o *rootedOutput) CreateSymlink(ctx context.Context, rel string, e kopiafs.Symlink) error {
	p, err := o.path(rel, e.Name())
	if err != nil {
		return err
	}
	if p == "." {
		return unsafeEntry(rel, "an empty name")
	}
	target, err := e.Readlink(ctx)
	if err != nil {
		return fmt.Errorf("reading the target of symlink %q: %w", rel, err)
	}
	if target == "" || len(target) > maxSymlinkTarget || strings.ContainsRune(target, 0) {
		return unsafeEntry(rel, fmt.Sprintf("a symlink whose target of %d bytes is empty, too long or holds a NUL", len(target)))
	}
	if err := o.replace(p, rel); err != nil {
		return err
	}
	if err := o.root.Symlink(target, p); err != nil {
		return fmt.Errorf("creating symlink %q: %w", rel, err)
	}
	// A symlink's mode and times are not set (Linux keeps no mode of a
	// symlink, and os.Root sets times through it).
	return ignorePermission(o.root.Lchown(p, int(e.Owner().UserID), int(e.Owner().GroupID)), "changing the owner of %q", rel)
}

// SymlinkExists: a restore is never incremental.
func (o *rootedOutput) SymlinkExists(context.Context, string, kopiafs.Symlink) bool { return false }

// Close is called by kopia's restore once every entry is written; the
// root is closed by closeRoot.
func (o *rootedOutput) Close(context.Context) error { return nil }

// closeRoot closes the root.
func (o *rootedOutput) closeRoot() error { return o.root.Close() }

// setAttributes sets a file's or a directory's owner, mode and time, in
// that order (a chown clears set-ID bits), through the root.
func (o *rootedOutput) setAttributes(p, rel string, e kopiafs.Entry) error {
	owner := e.Owner()
	if err := ignorePermission(o.root.Lchown(p, int(owner.UserID), int(owner.GroupID)), "changing the owner of %q", rel); err != nil {
		return err
	}
	if err := ignorePermission(o.root.Chmod(p, restoredModeBits(e)), "changing the mode of %q", rel); err != nil {
		return err
	}
	t := e.ModTime()
	return ignorePermission(o.root.Chtimes(p, t, t), "changing the times of %q", rel)
}

// ignorePermission wraps err, unless it is a permission error (a server
// not running as root cannot give files to others; kopia's restore
// ignores these too).
func ignorePermission(err error, format, rel string) error {
	if err == nil || errors.Is(err, fs.ErrPermission) {
		return nil
	}
	return fmt.Errorf(format+": %w", rel, err)
}
