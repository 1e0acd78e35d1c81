package pebble

// Writes: one transaction per write, in revision order, durable before it
// is acknowledged (group commit), and what a failed write leaves.

import (
	"context"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// txnResult is the outcome of a conditional write.
type txnResult struct {
	succeeded bool
	rev       int64     // revision of the write, or current revision if it failed
	current   *keyValue // on failure: the current value of the key (nil if absent)
}

// write applies one conditional put or delete. expectedModRev is the
// modification revision the key must have (0: the key must not exist);
// a negative value means unconditional. The write is acknowledged (returns)
// only after its WAL record is synced.
func (d *DB) write(ctx context.Context, key string, value []byte, del bool, expectedModRev int64) (txnResult, error) {
	return d.writeTTL(ctx, key, value, del, expectedModRev, 0, nil)
}

// MinTTL is the shortest time to live a key gets, as etcd grants no lease
// shorter than its minimum (1.5 times the election timeout, rounded up to
// whole seconds: 2 s with etcd's defaults, so a ttl of 1 s lives 2 s there).
// Clients written against etcd (kube's storage conformance suite among them)
// count on a key written with a ttl of 1 s still being there a moment later.
const MinTTL = 2 * time.Second

// writeTTL is write with a time to live: a put with ttl > 0 is deleted (with
// a normal delete event) once max(ttl, MinTTL) has passed, unless it is
// overwritten first.
// read, if not nil, is the key's record as the caller read it (at its
// modRev): when that is still the current one, it is not read again.
func (d *DB) writeTTL(ctx context.Context, key string, value []byte, del bool, expectedModRev int64, ttl time.Duration, read *keyValue) (txnResult, error) {
	d.writers.Add(1)
	defer d.writers.Add(-1)
	d.writeMu.Lock()
	if err := d.usable(); err != nil {
		d.writeMu.Unlock()
		return txnResult{}, err
	}
	// The index answers whether the key exists and at which revision; the
	// record itself is read only when it exists (the log entry carries it).
	curRev := d.index.modRev(key)
	var cur *keyValue
	if read != nil && read.key == key && read.modRev == curRev && curRev != 0 {
		// Revisions are unique: the record read at curRev is the current one.
		cur = read
	} else if curRev != 0 {
		var err error
		if cur, err = d.getCurrent(d.pdb, key); err == nil && (cur == nil || cur.modRev != curRev) {
			err = fmt.Errorf("key %q: the key index says revision %d, the database %v", key, curRev, cur)
		}
		if err != nil {
			d.writeMu.Unlock()
			return txnResult{}, err
		}
	}
	if expectedModRev >= 0 && curRev != expectedModRev {
		rev := d.rev.Load()
		d.writeMu.Unlock()
		if err := d.waitDurable(ctx, rev); err != nil {
			return txnResult{}, err
		}
		return txnResult{succeeded: false, rev: rev, current: cur}, nil
	}
	if del && cur == nil {
		// Unconditional delete of an absent key: nothing to do.
		rev := d.rev.Load()
		d.writeMu.Unlock()
		return txnResult{succeeded: false, rev: rev}, nil
	}
	d.inflight.Add(1)
	defer d.inflight.Done()
	newRev := d.rev.Load() + 1
	ev := &logEvent{rev: newRev, key: key, prev: cur}
	batch := d.pdb.NewBatch()
	if cur != nil && cur.expireAt != 0 {
		_ = batch.Delete(expiryKey(cur.expireAt, key), nil)
	}
	if del {
		ev.typ = eventDelete
		_ = batch.Delete(currentKey(key), nil)
	} else {
		ev.typ = eventPut
		ev.value = value
		ev.createRev = newRev
		if cur != nil {
			ev.createRev = cur.createRev
		}
		var expireAt int64
		if ttl > 0 {
			expireAt = time.Now().Add(max(ttl, MinTTL)).UnixNano()
			_ = batch.Set(expiryKey(expireAt, key), nil, nil)
			d.wakeReaper()
		}
		_ = batch.Set(currentKey(key), encodeCurrent(value, newRev, ev.createRev, expireAt), nil)
	}
	_ = batch.Set(eventKey(newRev), encodeEvent(ev), nil)
	_ = batch.Set(metaRevKey, int64Bytes(newRev), nil)
	if err := d.pdb.ApplyNoSyncWait(batch, pebble.Sync); err != nil {
		d.writeMu.Unlock()
		// The batch was not applied; nothing is half-written.
		_ = batch.Close()
		return txnResult{}, fmt.Errorf("writing revision %d: %w", newRev, err)
	}
	d.rev.Store(newRev)
	d.appendRecent(ev)
	if del {
		d.index.remove(key, newRev)
	} else {
		d.index.put(key, newRev)
	}
	d.writeMu.Unlock()

	if err := batch.SyncWait(); err != nil {
		// The record may or may not be on disk; it is never reported as
		// written, and since nothing after it can be made durable either,
		// the database stops serving until it is reopened (which replays
		// exactly the records that reached the disk).
		err = fmt.Errorf("syncing revision %d to the write-ahead log: %w", newRev, err)
		d.fail(err)
		return txnResult{}, err
	}
	_ = batch.Close()
	d.markDurable(newRev)
	return txnResult{succeeded: true, rev: newRev}, nil
}

func (d *DB) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failed == nil {
		d.failed = err
		d.broadcastLocked()
	}
}

// usable returns why the database cannot serve, if it cannot.
func (d *DB) usable() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.usableLocked()
}

func (d *DB) usableLocked() error {
	if d.closed {
		return ErrClosed
	}
	if d.failed != nil {
		return fmt.Errorf("storage failed, restart the server to recover: %w", d.failed)
	}
	return nil
}

// acquire holds the database open for a read of Pebble that does not hold
// writeMu: Close waits until release is called. Acquiring while holding it is
// allowed (it fails once Close has begun, never waits).
func (d *DB) acquire() (release func(), err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usableLocked(); err != nil {
		return nil, err
	}
	d.readers++
	return d.release, nil
}

func (d *DB) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.readers--
	if d.readers == 0 {
		d.readersEnd.Broadcast()
	}
}

func (d *DB) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

func (d *DB) appendRecent(ev *logEvent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.recent) == 0 {
		d.recentHead = ev.rev
	}
	if len(d.recent) >= d.recentSz {
		drop := len(d.recent) - d.recentSz + 1
		clear(d.recent[:drop])
		d.recent = d.recent[drop:]
		d.recentHead += int64(drop)
	}
	d.recent = append(d.recent, ev)
}

func (d *DB) markDurable(rev int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if rev > d.durable {
		d.durable = rev
		d.broadcastLocked()
	}
}

// waitDurable blocks until every revision <= rev is synced. Writers sync
// their own batches; a reader that observed a not-yet-synced revision waits
// for that writer (at most one WAL sync).
func (d *DB) waitDurable(ctx context.Context, rev int64) error {
	for {
		d.mu.Lock()
		durable, ch := d.durable, d.changed
		d.mu.Unlock()
		if durable >= rev {
			return nil
		}
		if err := d.usable(); err != nil {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
