// Package vmchain removes a backup from a chain of VM disk backups (the
// directories VirtualMachineBackups write: qcow2 files and manifest.json)
// so that every remaining backup still restores bit-identically, and frees
// its space at once.
//
// An incremental's files hold only the clusters written since its parent;
// the files' backing chain supplies the rest. Removing the newest link
// removes its directory. Removing any other link D merges it into the link
// taken since it, N: N's files get the clusters they lack from D's files,
// and are rebased onto D's parent's files (`qemu-img rebase` semantics);
// when D is the full backup, N becomes the full one. Only D's allocated
// clusters are read (qemu's copy-on-read of exactly those ranges through a
// copy of N's file stacked on D's), so the merge costs O(D's changed data
// + N's file), never O(disk size). N's manifest then names D's parent (or
// says Full) and the new digests.
//
// Crash safety: the merged files are made beside N's as temporary files
// and synced; then a journal (merge.json in N's directory: the directory
// removed, the temporary files, N's new manifest) is written atomically.
// From then on the merge only rolls forward: the temporary files are
// renamed over N's, N's manifest is written, D's manifest and then its
// directory are removed, and the journal goes last. Recover, run before
// anything reads the chain again, finishes a merge whose journal exists and
// removes temporary files without one: a crash at any point leaves the old
// chain or the new one, never a broken one.
package vmchain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/atomicfile"
	"github.com/backstop-io/backstop/pkg/rootdir"
	"github.com/backstop-io/backstop/pkg/vmmanifest"
)

// JournalFile is the journal of a merge in progress, in the directory of
// the link merged into.
const JournalFile = "merge.json"

// tempSuffix ends the name of a merged file not yet renamed into place.
const tempSuffix = ".merging"

// Crash points of a merge (Options.Crash), in order.
const (
	CrashMerged    = "merged"    // temporary files written and synced, no journal
	CrashJournaled = "journaled" // journal written, nothing renamed
	CrashRenamed   = "renamed"   // the first file renamed into place
	CrashManifest  = "manifest"  // N's manifest written, D still there
	CrashRemoved   = "removed"   // D's directory removed, journal still there
)

// Options tune a removal.
type Options struct {
	// Crash, if set, is called at each crash point (tests kill the
	// process there).
	Crash func(point string)
}

func (o Options) hit(point string) {
	if o.Crash != nil {
		o.Crash(point)
	}
}

// journal is a merge that rolls forward.
type journal struct {
	// Removed is the directory of the link merged away.
	Removed string `json:"removed"`
	// Files are N's disk files (names in N's directory) and their merged
	// temporary files.
	Files []journalFile `json:"files"`
	// Manifest is N's manifest once merged.
	Manifest vmmanifest.Manifest `json:"manifest"`
}

type journalFile struct {
	File string `json:"file"`
	Temp string `json:"temp"`
}

// Remove removes the backup in dir from its chain. next is the directory
// of the backup taken since dir's checkpoint, "" when dir is the newest
// link of its chain.
func Remove(ctx context.Context, dir, next string, opts Options) error {
	if next == "" {
		return removeDir(dir)
	}
	d, err := vmmanifest.Read(dir)
	if err != nil {
		return err
	}
	n, err := vmmanifest.Read(next)
	if err != nil {
		return err
	}
	if n.Type != kv.Incremental || n.Parent != d.Checkpoint || d.Checkpoint == "" {
		return fmt.Errorf("%s (%s backup since checkpoint %q) was not taken since %s (checkpoint %q)", next, n.Type, n.Parent, dir, d.Checkpoint)
	}
	merged := n
	merged.Disks = append([]vmmanifest.Disk(nil), n.Disks...)
	merged.Parent = d.Parent
	if d.Type == kv.Full {
		merged.Type, merged.Parent = kv.Full, ""
	}
	j := journal{Removed: dir, Manifest: merged}
	for i, nd := range n.Disks {
		var dd *vmmanifest.Disk
		for k := range d.Disks {
			if d.Disks[k].Name == nd.Name {
				dd = &d.Disks[k]
			}
		}
		if dd == nil {
			return fmt.Errorf("%s has disk %q, %s has not", next, nd.Name, dir)
		}
		temp := nd.File + tempSuffix
		sum, err := mergeFile(ctx, filepath.Join(dir, dd.File), dd.Backing, filepath.Join(next, nd.File), filepath.Join(next, temp))
		if err != nil {
			removeTemps(next)
			return fmt.Errorf("merging %s into %s: %w", filepath.Join(dir, dd.File), filepath.Join(next, nd.File), err)
		}
		merged.Disks[i].Backing, merged.Disks[i].SHA256 = dd.Backing, sum
		j.Files = append(j.Files, journalFile{File: nd.File, Temp: temp})
	}
	opts.hit(CrashMerged)
	data, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the merge journal: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(next, JournalFile), data, 0o644); err != nil {
		removeTemps(next)
		return err
	}
	opts.hit(CrashJournaled)
	return finish(next, j, opts)
}

// mergeFile writes to temp N's file (next) with the clusters it lacks from
// D's file (removed), backed by D's backing file (backing, "" for none),
// synced; it returns temp's sha256.
func mergeFile(ctx context.Context, removed, backing, next, temp string) (string, error) {
	for _, f := range []string{removed, next} {
		if err := vmmanifest.CheckImage(ctx, f); err != nil {
			return "", err
		}
	}
	if err := copyFile(next, temp); err != nil {
		return "", err
	}
	ranges, err := allocated(ctx, removed)
	if err != nil {
		return "", err
	}
	if len(ranges) > 0 {
		// temp stacked on D alone: reading D's own ranges through temp
		// copies into temp (copy-on-read) the clusters temp lacks.
		spec := "json:" + nodeJSON(temp, nodeJSON(removed, "null"))
		args := []string{"-C", spec}
		for _, r := range ranges {
			args = append(args, "-c", fmt.Sprintf("read -q %d %d", r.start, r.length))
		}
		if out, err := exec.CommandContext(ctx, "qemu-io", args...).CombinedOutput(); err != nil || strings.Contains(string(out), "failed") {
			return "", fmt.Errorf("qemu-io copy-on-read: %v: %s", err, strings.TrimSpace(string(out)))
		}
	}
	rebase := []string{"rebase", "-u", "-f", "qcow2", "-b", backing}
	if backing != "" {
		rebase = append(rebase, "-F", "qcow2")
	}
	if out, err := exec.CommandContext(ctx, "qemu-img", append(rebase, temp)...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("qemu-img rebase -u: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if err := atomicfile.Sync(temp); err != nil {
		return "", err
	}
	return vmmanifest.FileSHA256(temp)
}

// finish rolls a journaled merge forward.
func finish(next string, j journal, opts Options) error {
	for i, f := range j.Files {
		temp := filepath.Join(next, f.Temp)
		if _, err := os.Stat(temp); errors.Is(err, os.ErrNotExist) {
			continue // renamed before a crash
		}
		if err := os.Rename(temp, filepath.Join(next, f.File)); err != nil {
			return fmt.Errorf("renaming the merged %s into place: %w", temp, err)
		}
		atomicfile.SyncDir(next)
		if i == 0 {
			opts.hit(CrashRenamed)
		}
	}
	if err := vmmanifest.Write(next, j.Manifest); err != nil {
		return err
	}
	opts.hit(CrashManifest)
	if err := removeDir(j.Removed); err != nil {
		return err
	}
	opts.hit(CrashRemoved)
	if err := os.Remove(filepath.Join(next, JournalFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the merge journal: %w", err)
	}
	atomicfile.SyncDir(next)
	return nil
}

// Recover finishes the merge into the backup in dir that a crash
// interrupted (its journal exists), or removes the temporary files of one
// that had not been journaled; it does nothing to a backup without either.
func Recover(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, JournalFile))
	if errors.Is(err, os.ErrNotExist) {
		removeTemps(dir)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the merge journal of %s: %w", dir, err)
	}
	var j journal
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, JournalFile), err)
	}
	if err := j.check(dir); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, JournalFile), err)
	}
	return finish(dir, j, Options{})
}

// check refuses a journal that names files outside the merge: the directory
// removed is another backup of the same namespace's volumes (a sibling of
// next's volume directory's siblings), every file one name in next.
func (j journal) check(next string) error {
	nsDir := filepath.Dir(filepath.Dir(next))
	removed := j.Removed
	if !rootdir.Clean(removed) || filepath.Dir(filepath.Dir(removed)) != nsDir || removed == next {
		return fmt.Errorf("the directory it removes, %q, is not another backup in %s", j.Removed, nsDir)
	}
	for _, f := range j.Files {
		if err := rootdir.Name(f.File); err != nil {
			return err
		}
		if err := rootdir.Name(f.Temp); err != nil || !strings.HasSuffix(f.Temp, tempSuffix) {
			return fmt.Errorf("temporary file %q is not a merge's", f.Temp)
		}
	}
	return nil
}

// removeDir removes a backup directory: its manifest first (a directory
// without one is no backup), then the rest.
func removeDir(dir string) error {
	if err := os.Remove(filepath.Join(dir, vmmanifest.File)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the manifest of %s: %w", dir, err)
	}
	atomicfile.SyncDir(dir)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	atomicfile.SyncDir(filepath.Dir(dir))
	return nil
}

// removeTemps removes the temporary files of a merge into dir.
func removeTemps(dir string) {
	temps, _ := filepath.Glob(filepath.Join(dir, "*"+tempSuffix))
	for _, t := range temps {
		_ = os.Remove(t)
	}
}

// span is a byte range of an image.
type span struct{ start, length int64 }

// mapEntry is one range of `qemu-img map --output=json`.
type mapEntry struct {
	Start   int64 `json:"start"`
	Length  int64 `json:"length"`
	Depth   int   `json:"depth"`
	Present bool  `json:"present"`
	Data    bool  `json:"data"`
}

// ownMap maps the ranges of a qcow2 file read alone (its backing file
// ignored).
func ownMap(ctx context.Context, file string) ([]mapEntry, error) {
	out, err := exec.CommandContext(ctx, "qemu-img", "map", "--output=json", "json:"+nodeJSON(file, "null")).Output()
	if err != nil {
		return nil, fmt.Errorf("qemu-img map %s: %w", file, err)
	}
	var entries []mapEntry
	if err := json.Unmarshal(out, &entries); err != nil {
		return nil, fmt.Errorf("qemu-img map %s: %w", file, err)
	}
	return entries, nil
}

// allocated lists the ranges a qcow2 file holds itself (data or zero
// clusters), not through a backing file.
func allocated(ctx context.Context, file string) ([]span, error) {
	entries, err := ownMap(ctx, file)
	if err != nil {
		return nil, err
	}
	var spans []span
	for _, e := range entries {
		if e.Depth == 0 && e.Present {
			spans = append(spans, span{e.Start, e.Length})
		}
	}
	return spans, nil
}

// OwnData is the data a qcow2 file holds itself: its data clusters (zero
// clusters take no space), not what its backing files hold.
func OwnData(ctx context.Context, file string) (int64, error) {
	entries, err := ownMap(ctx, file)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range entries {
		if e.Depth == 0 && e.Data {
			n += e.Length
		}
	}
	return n, nil
}

// nodeJSON is a qemu block node reading a qcow2 file over backing (a
// node's JSON, or "null").
func nodeJSON(file, backing string) string {
	name, _ := json.Marshal(file) // a string always encodes
	return `{"driver":"qcow2","file":{"driver":"file","filename":` + string(name) + `},"backing":` + backing + `}`
}

// copyFile copies src to dst (created anew).
func copyFile(src, dst string) error {
	// Neither is followed through a symlink: the volume is its
	// namespace's to write. A temp left by an earlier merge is replaced.
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.Remove(dst); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	return out.Close()
}
