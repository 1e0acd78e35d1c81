package vmchain

import (
	"fmt"
	"os"
	"path/filepath"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/vmmanifest"
)

// Link is one backup of a chain: its directory and manifest.
type Link struct {
	Dir      string
	Manifest vmmanifest.Manifest
}

// Links lists the backups of a libvirt domain in the volumes of one
// namespace (nsDir/<volume>/<backup>/, those with a manifest).
func Links(nsDir, domain string) ([]Link, error) {
	manifests, err := filepath.Glob(filepath.Join(nsDir, "*", "*", vmmanifest.File))
	if err != nil {
		return nil, err
	}
	var out []Link
	for _, f := range manifests {
		dir := filepath.Dir(f)
		// The volumes are their namespace's to write: a backup reached
		// through a symlink (another namespace's, say) is none of this
		// namespace's links.
		if !realDir(filepath.Dir(dir)) || !realDir(dir) {
			continue
		}
		if st, err := os.Lstat(f); err != nil || !st.Mode().IsRegular() {
			continue
		}
		m, err := vmmanifest.Read(dir)
		if err != nil || m.Domain != domain {
			continue
		}
		out = append(out, Link{Dir: dir, Manifest: m})
	}
	return out, nil
}

// realDir reports whether p is a directory, not a symlink to one.
func realDir(p string) bool {
	st, err := os.Lstat(p)
	return err == nil && st.IsDir()
}

// Next is the link taken since checkpoint (the incremental whose parent it
// is), if any.
func Next(links []Link, checkpoint string) (Link, bool, error) {
	var next *Link
	if checkpoint == "" {
		return Link{}, false, nil // no checkpoint: nothing was taken since
	}
	for i, l := range links {
		if l.Manifest.Type != kv.Incremental || l.Manifest.Parent != checkpoint {
			continue
		}
		if next != nil {
			return Link{}, false, fmt.Errorf("two backups were taken since checkpoint %s: %s and %s", checkpoint, next.Dir, l.Dir)
		}
		next = &links[i]
	}
	if next == nil {
		return Link{}, false, nil
	}
	return *next, true, nil
}

// Incrementals counts the incremental links of the chain ending at the
// link of checkpoint, back to its full backup; found is false when that
// link, or one on the way, is missing.
func Incrementals(links []Link, checkpoint string) (n int, found bool) {
	byCheckpoint := map[string]Link{}
	for _, l := range links {
		if l.Manifest.Checkpoint != "" {
			byCheckpoint[l.Manifest.Checkpoint] = l
		}
	}
	for seen := 0; seen <= len(links); seen++ {
		l, ok := byCheckpoint[checkpoint]
		if !ok {
			return n, false
		}
		if l.Manifest.Type == kv.Full {
			return n, true
		}
		n++
		checkpoint = l.Manifest.Parent
	}
	return n, false // a loop: no chain
}

// Chain is the chain a backup restores from: the directories of its full
// backup and of every incremental up to it, oldest first, found among
// links by their checkpoints. A missing link is an error naming it.
func Chain(links []Link, dir string) ([]string, error) {
	byCheckpoint := map[string]Link{}
	var last *Link
	for i, l := range links {
		if l.Manifest.Checkpoint != "" {
			byCheckpoint[l.Manifest.Checkpoint] = l
		}
		if filepath.Clean(l.Dir) == filepath.Clean(dir) {
			last = &links[i]
		}
	}
	if last == nil {
		return nil, fmt.Errorf("%s is not a VM backup of the chain", dir)
	}
	out := []string{last.Dir}
	for l := *last; l.Manifest.Type != kv.Full; {
		if len(out) > len(links) {
			return nil, fmt.Errorf("the chain of %s loops", dir)
		}
		parent, ok := byCheckpoint[l.Manifest.Parent]
		if !ok {
			return nil, fmt.Errorf("broken chain: %s was taken since checkpoint %q, and no backup of the domain ends at it", l.Dir, l.Manifest.Parent)
		}
		out = append(out, parent.Dir)
		l = parent
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}
