package pebble

import (
	"fmt"
	"sync"

	"github.com/google/btree"
)

// keyIndex is the in-memory index of the keys that currently exist, with the
// revision each was last modified at (etcd keeps the same in its treeIndex).
// Writers consult it instead of reading Pebble to check that a key is absent
// or unchanged, and ranges are counted from it instead of scanning Pebble
// (remainingItemCount of a paginated list, object counts). It is rebuilt
// from the current records when the database opens.
//
// Only writers mutate it, under DB.writeMu, right after their batch is
// applied; mu guards the tree against a concurrent snapshot. A snapshot is
// a copy-on-write clone taken in O(1), with the revision it reflects.
type keyIndex struct {
	mu   sync.Mutex
	tree *btree.BTreeG[indexEntry]
	rev  int64 // the revision the tree reflects
}

// indexEntry is one existing key and its modification revision.
type indexEntry struct {
	key    string
	modRev int64
}

func lessEntry(a, b indexEntry) bool { return a.key < b.key }

func newKeyIndex() *keyIndex {
	return &keyIndex{tree: btree.NewG(32, lessEntry)}
}

// modRev returns the modification revision of key, 0 if it does not exist.
// Callers hold DB.writeMu (no concurrent mutation).
func (x *keyIndex) modRev(key string) int64 {
	e, ok := x.tree.Get(indexEntry{key: key})
	if !ok {
		return 0
	}
	return e.modRev
}

// put records that key was written (created or updated) at rev.
func (x *keyIndex) put(key string, rev int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.tree.ReplaceOrInsert(indexEntry{key: key, modRev: rev})
	x.rev = rev
}

// remove records that key was deleted at rev.
func (x *keyIndex) remove(key string, rev int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.tree.Delete(indexEntry{key: key})
	x.rev = rev
}

// snapshot returns an immutable copy of the index and its revision.
func (x *keyIndex) snapshot() (*btree.BTreeG[indexEntry], int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.tree.Clone(), x.rev
}

// countRange counts the keys of tree in [start, end).
func countRange(tree *btree.BTreeG[indexEntry], start, end string) int64 {
	var n int64
	tree.AscendRange(indexEntry{key: start}, indexEntry{key: end}, func(indexEntry) bool {
		n++
		return true
	})
	return n
}

// countAt counts the keys in [start, end) that exist at revision rev: the
// index's count, corrected by the log events between the index's revision
// and rev (at most the writes applied while the caller took its view).
func (d *DB) countAt(start, end string, rev int64) (int64, error) {
	tree, idxRev := d.index.snapshot()
	return d.countFrom(tree, idxRev, start, end, rev)
}

// countFrom counts the keys in [start, end) at revision rev from an index
// snapshot taken at idxRev, older or newer.
func (d *DB) countFrom(tree *btree.BTreeG[indexEntry], idxRev int64, start, end string, rev int64) (int64, error) {
	n := countRange(tree, start, end)
	if idxRev == rev {
		return n, nil
	}
	lo, hi := min(idxRev, rev), max(idxRev, rev)
	events, err := d.readEvents(lo+1, hi, int(hi-lo))
	if err != nil {
		return 0, err
	}
	if int64(len(events)) != hi-lo {
		return 0, fmt.Errorf("counting keys at revision %d: %d log events between %d and %d, want %d", rev, len(events), lo, hi, hi-lo)
	}
	// existsAtRev: for each key in range written between the two revisions,
	// whether it exists at rev.
	existsAtRev := map[string]bool{}
	for _, ev := range events {
		if ev.key < start || ev.key >= end {
			continue
		}
		if idxRev > rev {
			// The index is newer: the first event after rev tells whether
			// the key existed before it.
			if _, seen := existsAtRev[ev.key]; !seen {
				existsAtRev[ev.key] = ev.prev != nil
			}
		} else {
			// The index is older: the last event up to rev decides.
			existsAtRev[ev.key] = ev.typ == eventPut
		}
	}
	for key, exists := range existsAtRev {
		inIndex := tree.Has(indexEntry{key: key})
		switch {
		case exists && !inIndex:
			n++
		case !exists && inIndex:
			n--
		}
	}
	return n, nil
}
