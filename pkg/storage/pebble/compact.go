package pebble

// Compaction: the log's events up to a revision dropped.

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Compact drops log events at or below rev; reads and watches older than rev
// then fail with ErrCompacted. Compacting to an older revision than the
// current compaction is a no-op.
func (d *DB) Compact(rev int64) error {
	// Like etcd's compactor (which records compact_rev_key), a compaction is
	// itself a write: it takes a revision and appears in the log.
	if _, err := d.write(context.Background(), compactedKey, int64Bytes(rev), false, -1); err != nil {
		return fmt.Errorf("recording compaction to revision %d: %w", rev, err)
	}
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	if d.isClosed() {
		return ErrClosed
	}
	if rev > d.rev.Load() {
		return ErrFutureRev
	}
	d.mu.Lock()
	old := d.compacted
	d.mu.Unlock()
	if rev <= old {
		return nil
	}
	batch := d.pdb.NewBatch()
	defer batch.Close()
	_ = batch.DeleteRange(eventKey(0), eventKey(rev+1), nil)
	_ = batch.Set(metaCompactKey, int64Bytes(rev), nil)
	if err := batch.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("compacting to revision %d: %w", rev, err)
	}
	d.mu.Lock()
	d.compacted = rev
	d.broadcastLocked()
	d.mu.Unlock()
	return nil
}
