package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"k8s.io/klog/v2"
)

// Key layout inside the Pebble database (see the package documentation).
const (
	prefixCurrent = 'c' // c<key>          -> modRev(8) createRev(8) value
	prefixEvent   = 'e' // e<rev(8, BE)>   -> encoded logEvent
	prefixMeta    = 'm' // m<name>         -> meta values
	prefixExpiry  = 'x' // x<expireAt(8, BE)><key> -> "" (TTL index)
	recordHeader  = 24  // modRev, createRev, expireAt
)

// createdKey is written at revision 1. It sorts before every resource key.
const createdKey = "\x00backstop/created"

// compactedKey records each compaction. It sorts before every resource key.
const compactedKey = "\x00backstop/compacted"

var (
	metaRevKey     = []byte("mrev")
	metaCompactKey = []byte("mcompact")
	metaFormatKey  = []byte("mformat")
	formatVersion  = []byte("backstop-mvcc-v1")
)

var (
	// ErrCompacted is returned for reads and watches at a revision older than
	// the compacted revision.
	ErrCompacted = errors.New("mvcc: required revision has been compacted")
	// ErrFutureRev is returned for reads at a revision newer than the current one.
	ErrFutureRev = errors.New("mvcc: required revision is a future revision")
	// ErrClosed is returned by operations on a closed database.
	ErrClosed = errors.New("mvcc: database is closed")
)

type eventType uint8

const (
	eventPut    eventType = 1
	eventDelete eventType = 2
)

// keyValue is one stored object as the backend sees it: opaque bytes plus
// the revisions at which it was created and last modified.
type keyValue struct {
	key       string
	value     []byte
	createRev int64
	modRev    int64
	expireAt  int64 // unix nanoseconds; 0: no TTL
}

// logEvent is one entry of the revision log: the write made at rev.
// prev carries the value the key had before, so that old revisions can be
// reconstructed and delete events carry the deleted object.
type logEvent struct {
	rev       int64
	typ       eventType
	key       string
	value     []byte // put only
	createRev int64  // put only
	prev      *keyValue
}

func (e *logEvent) kv() *keyValue {
	if e.typ != eventPut {
		return nil
	}
	return &keyValue{key: e.key, value: e.value, createRev: e.createRev, modRev: e.rev}
}

// Options configures a DB.
type Options struct {
	// Dir is the directory of the Pebble database. Empty with InMemory set.
	Dir string
	// InMemory keeps the database in memory (tests only; nothing is durable).
	InMemory bool
	// RecentEvents is how many recent log events are kept in memory to serve
	// watchers without reading Pebble. Default 8192.
	RecentEvents int
	// PebbleOptions lets callers tune Pebble (cache size, FS for fault tests).
	PebbleOptions *pebble.Options
}

// DB is the revisioned key-value store shared by every resource of a server:
// one Pebble database, one revision counter, one revision log.
type DB struct {
	pdb      *pebble.DB
	recentSz int

	// writeMu serializes writers: read-check-write and revision assignment.
	writeMu sync.Mutex
	rev     atomic.Int64 // last applied revision

	mu         sync.Mutex
	durable    int64         // every revision <= durable is synced to the WAL
	compacted  int64         // revisions <= compacted are gone from the log
	progress   uint64        // bumped by RequestProgress
	changed    chan struct{} // closed and replaced whenever the fields above change
	recent     []*logEvent   // contiguous revisions recentStart .. recentStart+len-1
	recentHead int64         // revision of recent[0]
	closed     bool
	closedCh   chan struct{}
	failed     error // a WAL sync failed: the database refuses further work

	index      *keyIndex      // the keys that exist now, in memory
	inflight   sync.WaitGroup // writes applied but not yet synced
	writers    atomic.Int64   // writes in progress (group commit sizing)
	reaperWake chan struct{}  // a TTL was set: re-check the next expiry
	reaperDone chan struct{}
}

// Open opens (creating if needed) the database. A second process opening the
// same directory fails with a clear error because of Pebble's lock file.
func Open(opts Options) (*DB, error) {
	po := &pebble.Options{}
	if opts.PebbleOptions != nil {
		po = opts.PebbleOptions.Clone()
	}
	if po.CacheSize == 0 {
		// Keep the working set of a typical server (tens of thousands of
		// objects) in memory; Pebble's 8 MiB default makes lists read disk.
		po.CacheSize = 128 << 20
	}
	// Bloom filters make the existence check before each write (create,
	// update) skip sstables that cannot hold the key.
	for i := range po.Levels {
		if po.Levels[i].FilterPolicy == nil {
			po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		}
	}
	if po.MemTableSize == 0 {
		// Pebble's 4 MiB default flushes every ~1,500 writes of a typical
		// object (its current record and its log entry); fewer, larger
		// flushes mean fewer L0 files to compact. At most
		// MemTableStopWritesThreshold (2) memtables are held.
		po.MemTableSize = 32 << 20
	}
	if po.FormatMajorVersion == pebble.FormatDefault {
		// Newer formats (columnar blocks, blob files) on new databases;
		// existing ones are ratcheted up on open.
		po.FormatMajorVersion = pebble.FormatNewest
	}
	if po.Experimental.ValueSeparationPolicy == nil {
		// Objects (typically 1-10 KB) go to blob files at flush: compactions
		// then move references instead of rewriting the values, and scans
		// that need only keys (counting the rest of a paginated list) do not
		// read values.
		po.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
			return pebble.ValueSeparationPolicy{
				Enabled:               true,
				MinimumSize:           256,
				MaxBlobReferenceDepth: 10,
				RewriteMinimumAge:     5 * time.Minute,
				TargetGarbageRatio:    0.2,
			}
		}
	}
	if opts.InMemory {
		po.FS = vfs.NewMem()
	}
	d := &DB{
		recentSz:   opts.RecentEvents,
		index:      newKeyIndex(),
		changed:    make(chan struct{}),
		closedCh:   make(chan struct{}),
		reaperWake: make(chan struct{}, 1),
		reaperDone: make(chan struct{}),
	}
	if po.WALMinSyncInterval == nil {
		po.WALMinSyncInterval = d.walSyncInterval
	}
	po.EnsureDefaults()
	if !opts.InMemory {
		po.FS = newWALFillFS(po.FS)
	}
	if po.Logger == nil || po.Logger == pebble.DefaultLogger {
		po.Logger = quietLogger{}
	}
	dir := opts.Dir
	if opts.InMemory && dir == "" {
		dir = "mem"
	}
	pdb, err := pebble.Open(dir, po)
	if err != nil {
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("opening pebble database in %q: the directory is locked by another process (is another backstop server using this data directory?): %w", dir, err)
		}
		return nil, fmt.Errorf("opening pebble database in %q: %w", dir, err)
	}
	d.pdb = pdb
	if d.recentSz <= 0 {
		d.recentSz = 8192
	}
	if err := d.load(); err != nil {
		_ = pdb.Close()
		return nil, err
	}
	if d.rev.Load() == 0 {
		// Revision 1 records the creation of the database, so that resource
		// versions start at 1 like etcd's and every revision has a log entry.
		if _, err := d.write(context.Background(), createdKey, nil, false, -1); err != nil {
			_ = pdb.Close()
			return nil, fmt.Errorf("initializing the revision log: %w", err)
		}
	}
	go d.reapExpired()
	return d, nil
}

// walSyncInterval is Pebble's WALMinSyncInterval: how long the WAL waits
// after a sync before the next one. Alone, a writer syncs at once; with
// concurrent writers, a short wait lets the ones just released by a sync
// come back and share the next one, instead of a sync starting for the
// first writer back and the others waiting for the one after it.
func (d *DB) walSyncInterval() time.Duration {
	if d.writers.Load() > 1 {
		return groupCommitWait
	}
	return 0
}

var groupCommitWait = 150 * time.Microsecond

func (d *DB) load() error {
	format, err := d.getMeta(metaFormatKey)
	if err != nil {
		return err
	}
	if format == nil {
		if err := d.pdb.Set(metaFormatKey, formatVersion, pebble.Sync); err != nil {
			return fmt.Errorf("writing format marker: %w", err)
		}
	} else if !bytes.Equal(format, formatVersion) {
		return fmt.Errorf("unsupported database format %q (want %q)", format, formatVersion)
	}
	rev, err := d.getMetaInt(metaRevKey)
	if err != nil {
		return err
	}
	compacted, err := d.getMetaInt(metaCompactKey)
	if err != nil {
		return err
	}
	d.rev.Store(rev)
	d.durable = rev
	d.compacted = compacted
	d.recentHead = rev + 1
	return d.loadIndex(rev)
}

// loadIndex builds the key index from the current records.
func (d *DB) loadIndex(rev int64) error {
	iter, err := d.pdb.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixCurrent}, UpperBound: []byte{prefixCurrent + 1}})
	if err != nil {
		return fmt.Errorf("opening iterator to index keys: %w", err)
	}
	defer iter.Close()
	for valid := iter.First(); valid; valid = iter.Next() {
		key := string(iter.Key()[1:])
		raw, err := iter.ValueAndErr()
		if err != nil {
			return fmt.Errorf("reading key %q to index it: %w", key, err)
		}
		if len(raw) < recordHeader {
			return fmt.Errorf("corrupt record for key %q: %d bytes", key, len(raw))
		}
		d.index.tree.ReplaceOrInsert(indexEntry{key: key, modRev: int64(binary.BigEndian.Uint64(raw))})
	}
	if err := iter.Error(); err != nil {
		return fmt.Errorf("indexing keys: %w", err)
	}
	d.index.rev = rev
	return nil
}

func (d *DB) getMeta(key []byte) ([]byte, error) {
	v, closer, err := d.pdb.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", key, err)
	}
	defer closer.Close()
	return bytes.Clone(v), nil
}

func (d *DB) getMetaInt(key []byte) (int64, error) {
	v, err := d.getMeta(key)
	if err != nil || v == nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("corrupt meta key %s: %d bytes", key, len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// Close stops watchers and the TTL reaper, waits for writes in flight and
// closes Pebble.
func (d *DB) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	close(d.closedCh)
	d.broadcastLocked()
	d.mu.Unlock()
	<-d.reaperDone
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	d.inflight.Wait()
	return d.pdb.Close()
}

// Rev is the last applied revision.
func (d *DB) Rev() int64 { return d.rev.Load() }

// CompactedRev is the revision up to which the log has been compacted.
func (d *DB) CompactedRev() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.compacted
}

func (d *DB) broadcastLocked() {
	close(d.changed)
	d.changed = make(chan struct{})
}

func currentKey(key string) []byte {
	b := make([]byte, 1+len(key))
	b[0] = prefixCurrent
	copy(b[1:], key)
	return b
}

func eventKey(rev int64) []byte {
	b := make([]byte, 9)
	b[0] = prefixEvent
	binary.BigEndian.PutUint64(b[1:], uint64(rev))
	return b
}

func int64Bytes(v int64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, uint64(v))
	return b
}

func encodeCurrent(value []byte, modRev, createRev, expireAt int64) []byte {
	b := make([]byte, recordHeader+len(value))
	binary.BigEndian.PutUint64(b, uint64(modRev))
	binary.BigEndian.PutUint64(b[8:], uint64(createRev))
	binary.BigEndian.PutUint64(b[16:], uint64(expireAt))
	copy(b[recordHeader:], value)
	return b
}

func decodeCurrent(key string, raw []byte) (*keyValue, error) {
	return decodeCurrentInto(key, raw, nil)
}

// decodeCurrentInto decodes a current record, copying its value into a (nil:
// its own allocation).
func decodeCurrentInto(key string, raw []byte, a *arena) (*keyValue, error) {
	if len(raw) < recordHeader {
		return nil, fmt.Errorf("corrupt record for key %q: %d bytes", key, len(raw))
	}
	kv := &keyValue{
		key:       key,
		modRev:    int64(binary.BigEndian.Uint64(raw)),
		createRev: int64(binary.BigEndian.Uint64(raw[8:])),
		expireAt:  int64(binary.BigEndian.Uint64(raw[16:])),
	}
	if a == nil {
		kv.value = bytes.Clone(raw[recordHeader:])
	} else {
		kv.value = a.copy(raw[recordHeader:])
	}
	return kv, nil
}

// arena hands out copies of byte slices from blocks that double in size up
// to arenaBlock: the values a range read returns cost a few allocations
// instead of one each, and a small read stays small.
type arena struct{ block []byte }

const arenaBlock = 256 << 10

func (a *arena) copy(b []byte) []byte {
	if len(b) > arenaBlock/4 {
		return bytes.Clone(b)
	}
	if cap(a.block)-len(a.block) < len(b) {
		size := min(max(2*cap(a.block), 4*len(b), 4096), arenaBlock)
		a.block = make([]byte, 0, size)
	}
	n := len(a.block)
	a.block = append(a.block, b...)
	return a.block[n:len(a.block):len(a.block)]
}

func expiryKey(expireAt int64, key string) []byte {
	b := make([]byte, 9+len(key))
	b[0] = prefixExpiry
	binary.BigEndian.PutUint64(b[1:], uint64(expireAt))
	copy(b[9:], key)
	return b
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func encodeEvent(e *logEvent) []byte {
	b := make([]byte, 0, 32+len(e.key)+len(e.value))
	b = append(b, byte(e.typ))
	b = appendBytes(b, []byte(e.key))
	b = appendBytes(b, e.value)
	b = binary.AppendVarint(b, e.createRev)
	if e.prev == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = appendBytes(b, e.prev.value)
		b = binary.AppendVarint(b, e.prev.createRev)
		b = binary.AppendVarint(b, e.prev.modRev)
	}
	return b
}

type eventReader struct {
	b   []byte
	err error
}

func (r *eventReader) bytes() []byte {
	if r.err != nil {
		return nil
	}
	n, l := binary.Uvarint(r.b)
	if l <= 0 || uint64(len(r.b)-l) < n {
		r.err = errors.New("truncated field")
		return nil
	}
	v := bytes.Clone(r.b[l : l+int(n)])
	r.b = r.b[l+int(n):]
	return v
}

func (r *eventReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, l := binary.Varint(r.b)
	if l <= 0 {
		r.err = errors.New("truncated varint")
		return 0
	}
	r.b = r.b[l:]
	return v
}

func (r *eventReader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.err = errors.New("truncated byte")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func decodeEvent(rev int64, raw []byte) (*logEvent, error) {
	r := &eventReader{b: raw}
	e := &logEvent{rev: rev}
	e.typ = eventType(r.byte())
	e.key = string(r.bytes())
	e.value = r.bytes()
	e.createRev = r.varint()
	if r.byte() == 1 {
		e.prev = &keyValue{key: e.key}
		e.prev.value = r.bytes()
		e.prev.createRev = r.varint()
		e.prev.modRev = r.varint()
	}
	if r.err == nil && e.typ != eventPut && e.typ != eventDelete {
		r.err = fmt.Errorf("unknown event type %d", e.typ)
	}
	if r.err != nil {
		return nil, fmt.Errorf("corrupt log event at revision %d: %w", rev, r.err)
	}
	return e, nil
}

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

// writeTTL is write with a time to live: a put with ttl > 0 is deleted (with
// a normal delete event) once ttl has passed, unless it is overwritten first.
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
			expireAt = time.Now().Add(ttl).UnixNano()
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
	if d.closed {
		return ErrClosed
	}
	if d.failed != nil {
		return fmt.Errorf("storage failed, restart the server to recover: %w", d.failed)
	}
	return nil
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

func (d *DB) getCurrent(r pebble.Reader, key string) (*keyValue, error) {
	raw, closer, err := r.Get(currentKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading key %q: %w", key, err)
	}
	defer closer.Close()
	return decodeCurrent(key, raw)
}

// view is a consistent point-in-time read of the database.
type view struct {
	db        *DB
	snap      *pebble.Snapshot
	rev       int64
	compacted int64
}

func (d *DB) openView(ctx context.Context) (*view, error) {
	if err := d.usable(); err != nil {
		return nil, err
	}
	snap := d.pdb.NewSnapshot()
	v := &view{db: d, snap: snap}
	var err error
	if v.rev, err = readMetaInt(snap, metaRevKey); err == nil {
		v.compacted, err = readMetaInt(snap, metaCompactKey)
	}
	if err != nil {
		_ = snap.Close()
		return nil, err
	}
	// Serve only durable data: wait for the sync of what this view sees.
	if err := d.waitDurable(ctx, v.rev); err != nil {
		_ = snap.Close()
		return nil, err
	}
	return v, nil
}

func (v *view) close() { _ = v.snap.Close() }

func readMetaInt(r pebble.Reader, key []byte) (int64, error) {
	raw, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", key, err)
	}
	defer closer.Close()
	if len(raw) != 8 {
		return 0, fmt.Errorf("corrupt meta key %s", key)
	}
	return int64(binary.BigEndian.Uint64(raw)), nil
}

// getLatest reads the current record of one key without a snapshot. The
// revision counter, written in every write's batch, is read before and
// after the key: when both agree, no write landed in between and the record
// is the state at that revision, served once it is durable. It does not answer (ok false) a record
// newer than that (a corrupt header): the snapshot read does.
func (d *DB) getLatest(ctx context.Context, key string, keysOnly bool) (res rangeResult, ok bool, err error) {
	if err := d.usable(); err != nil {
		return rangeResult{}, false, err
	}
	before, err := readMetaInt(d.pdb, metaRevKey)
	if err != nil {
		return res, false, err
	}
	kv, err := d.getCurrent(d.pdb, key)
	if err != nil {
		return res, false, err
	}
	if res.rev, err = readMetaInt(d.pdb, metaRevKey); err != nil {
		return res, false, err
	}
	if res.rev != before {
		// A write landed between the reads: what was read is not known to
		// be the state at either revision. The snapshot read answers.
		return res, false, nil
	}
	if kv != nil {
		if kv.modRev > res.rev {
			return res, false, nil
		}
		if keysOnly {
			kv.value = nil
		}
		res.kvs = []*keyValue{kv}
		res.count = 1
	}
	if err := d.waitDurable(ctx, res.rev); err != nil {
		return res, false, err
	}
	return res, true, nil
}

// rangeResult is the answer to a range read.
type rangeResult struct {
	kvs   []*keyValue
	count int64 // keys in [start,end) at the revision, whatever the limit
	more  bool
	rev   int64 // the revision the read was served at
}

// rangeOptions controls a range read.
type rangeOptions struct {
	rev       int64 // 0: current
	limit     int64 // 0: no limit
	countOnly bool
	keysOnly  bool
}

// Range reads keys in [start, end) (end "" means the single key start) at a
// revision. Old revisions are reconstructed from the current state by undoing
// the log events written after them.
func (d *DB) Range(ctx context.Context, start, end string, opts rangeOptions) (rangeResult, error) {
	if end == "" && opts.rev == 0 && !opts.countOnly {
		if res, ok, err := d.getLatest(ctx, start, opts.keysOnly); ok || err != nil {
			return res, err
		}
	}
	v, err := d.openView(ctx)
	if err != nil {
		return rangeResult{}, err
	}
	defer v.close()
	return v.rangeRead(start, end, opts)
}

func (v *view) rangeRead(start, end string, opts rangeOptions) (rangeResult, error) {
	if end == "" {
		end = start + "\x00"
	}
	res := rangeResult{rev: v.rev}
	if opts.rev > v.rev {
		return res, ErrFutureRev
	}
	if opts.rev > 0 && opts.rev < v.compacted {
		return res, ErrCompacted
	}
	var overlay map[string]*keyValue
	var overlayKeys []string
	if opts.rev > 0 && opts.rev < v.rev {
		res.rev = opts.rev
		var err error
		overlay, err = v.undoOverlay(start, end, opts.rev)
		if err != nil {
			return res, err
		}
		overlayKeys = make([]string, 0, len(overlay))
		for k := range overlay {
			overlayKeys = append(overlayKeys, k)
		}
		sort.Strings(overlayKeys)
	}
	iter, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: currentKey(start), UpperBound: currentKey(end)})
	if err != nil {
		return res, fmt.Errorf("opening iterator: %w", err)
	}
	defer iter.Close()

	emit := func(kv *keyValue) {
		res.count++
		if opts.countOnly {
			return
		}
		if opts.limit > 0 && int64(len(res.kvs)) >= opts.limit {
			res.more = true
			return
		}
		res.kvs = append(res.kvs, kv)
	}
	scanCount := overlay != nil
	var values arena
	oi := 0
	valid := iter.First()
	for valid || oi < len(overlayKeys) {
		var curKey string
		if valid {
			curKey = string(iter.Key()[1:])
		}
		if oi < len(overlayKeys) && (!valid || overlayKeys[oi] <= curKey) {
			k := overlayKeys[oi]
			oi++
			if kv := overlay[k]; kv != nil {
				emit(kv)
			}
			if valid && k == curKey {
				valid = iter.Next()
			}
			continue
		}
		if opts.countOnly || (opts.limit > 0 && int64(len(res.kvs)) >= opts.limit) {
			res.more = res.more || !opts.countOnly
			if !scanCount {
				// The rest is only counted: from the key index, without
				// reading it. (At an older revision, the scan below counts.)
				n, err := v.db.countAt(start, end, v.rev)
				if err == nil {
					res.count = n
					return res, nil
				}
				klog.V(4).InfoS("Counting keys from the index failed, scanning", "start", start, "revision", v.rev, "err", err)
				scanCount = true
			}
			res.count++
			valid = iter.Next()
			continue
		}
		raw, err := iter.ValueAndErr()
		if err != nil {
			return res, fmt.Errorf("reading key %q: %w", curKey, err)
		}
		kv, err := decodeCurrentInto(curKey, raw, &values)
		if err != nil {
			return res, err
		}
		if opts.keysOnly {
			kv.value = nil
		}
		emit(kv)
		valid = iter.Next()
	}
	if err := iter.Error(); err != nil {
		return res, fmt.Errorf("iterating: %w", err)
	}
	return res, nil
}

// undoOverlay returns, for every key in [start,end) written after rev, the
// value it had at rev (nil: absent).
func (v *view) undoOverlay(start, end string, rev int64) (map[string]*keyValue, error) {
	overlay := map[string]*keyValue{}
	iter, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: eventKey(rev + 1), UpperBound: eventKey(v.rev + 1)})
	if err != nil {
		return nil, fmt.Errorf("opening log iterator: %w", err)
	}
	defer iter.Close()
	for valid := iter.First(); valid; valid = iter.Next() {
		evRev := int64(binary.BigEndian.Uint64(iter.Key()[1:]))
		raw, err := iter.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("reading log event %d: %w", evRev, err)
		}
		ev, err := decodeEvent(evRev, raw)
		if err != nil {
			return nil, err
		}
		if ev.key < start || ev.key >= end {
			continue
		}
		if _, seen := overlay[ev.key]; !seen {
			overlay[ev.key] = ev.prev
		}
	}
	return overlay, iter.Error()
}

// readEvents returns log events with revisions in [from, to], at most max.
func (d *DB) readEvents(from, to int64, max int) ([]*logEvent, error) {
	d.mu.Lock()
	if from >= d.recentHead && len(d.recent) > 0 {
		out := make([]*logEvent, 0, min(max, int(to-from+1)))
		for r := from; r <= to && len(out) < max; r++ {
			idx := r - d.recentHead
			if idx >= int64(len(d.recent)) {
				break
			}
			out = append(out, d.recent[idx])
		}
		d.mu.Unlock()
		return out, nil
	}
	d.mu.Unlock()
	iter, err := d.pdb.NewIter(&pebble.IterOptions{LowerBound: eventKey(from), UpperBound: eventKey(to + 1)})
	if err != nil {
		return nil, err
	}
	defer iter.Close()
	var out []*logEvent
	for valid := iter.First(); valid && len(out) < max; valid = iter.Next() {
		rev := int64(binary.BigEndian.Uint64(iter.Key()[1:]))
		raw, err := iter.ValueAndErr()
		if err != nil {
			return nil, err
		}
		ev, err := decodeEvent(rev, raw)
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, iter.Error()
}

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

// RequestProgress asks every watcher to report its progress (a bookmark at the
// current revision) once it has delivered everything up to it.
func (d *DB) RequestProgress() {
	d.mu.Lock()
	d.progress++
	d.broadcastLocked()
	d.mu.Unlock()
}

// sizeOf counts the keys in [start,end) and sums their stored value sizes.
func (d *DB) sizeOf(ctx context.Context, start, end string) (count, size int64, err error) {
	v, err := d.openView(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer v.close()
	iter, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: currentKey(start), UpperBound: currentKey(end)})
	if err != nil {
		return 0, 0, err
	}
	defer iter.Close()
	for valid := iter.First(); valid; valid = iter.Next() {
		count++
		size += int64(len(iter.Value())) - recordHeader
	}
	return count, size, iter.Error()
}

// quietLogger routes Pebble's informational logs to klog at high verbosity
// and keeps errors visible.
type quietLogger struct{}

func (quietLogger) Infof(format string, args ...interface{}) {
	klog.V(6).Infof("pebble: "+format, args...)
}
func (quietLogger) Errorf(format string, args ...interface{}) {
	klog.Errorf("pebble: "+format, args...)
}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	klog.Fatalf("pebble: "+format, args...)
}

func (d *DB) wakeReaper() {
	select {
	case d.reaperWake <- struct{}{}:
	default:
	}
}

// reapExpired deletes keys whose TTL has passed, as ordinary delete events.
func (d *DB) reapExpired() {
	defer close(d.reaperDone)
	for {
		wait := time.Second
		next, err := d.nextExpiry()
		if err != nil && !errors.Is(err, pebble.ErrClosed) {
			klog.ErrorS(err, "Reading the TTL index failed")
		}
		if next != 0 {
			if until := time.Until(time.Unix(0, next)); until <= 0 {
				if err := d.reapDue(); err != nil && !errors.Is(err, ErrClosed) {
					klog.ErrorS(err, "Deleting expired keys failed")
				} else {
					continue
				}
			} else if until < wait {
				wait = until
			}
		}
		timer := time.NewTimer(wait)
		select {
		case <-d.closedCh:
			timer.Stop()
			return
		case <-d.reaperWake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

func (d *DB) nextExpiry() (int64, error) {
	if d.isClosed() {
		return 0, ErrClosed
	}
	iter, err := d.pdb.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixExpiry}, UpperBound: []byte{prefixExpiry + 1}})
	if err != nil {
		return 0, err
	}
	defer iter.Close()
	if !iter.First() {
		return 0, iter.Error()
	}
	return int64(binary.BigEndian.Uint64(iter.Key()[1:9])), nil
}

func (d *DB) reapDue() error {
	type due struct {
		key      string
		expireAt int64
	}
	now := time.Now().UnixNano()
	iter, err := d.pdb.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixExpiry}, UpperBound: expiryKey(now+1, "")})
	if err != nil {
		return err
	}
	var todo []due
	for valid := iter.First(); valid && len(todo) < 1000; valid = iter.Next() {
		k := iter.Key()
		todo = append(todo, due{key: string(k[9:]), expireAt: int64(binary.BigEndian.Uint64(k[1:9]))})
	}
	if err := iter.Close(); err != nil {
		return err
	}
	ctx := context.Background()
	for _, e := range todo {
		cur, err := d.getCurrent(d.pdb, e.key)
		if err != nil {
			return err
		}
		if cur == nil || cur.expireAt != e.expireAt {
			// A stale index entry (cannot happen with atomic batches, but
			// never loop on one).
			if err := d.pdb.Delete(expiryKey(e.expireAt, e.key), pebble.Sync); err != nil {
				return err
			}
			continue
		}
		// Conditional on the revision read: a concurrent overwrite wins.
		if _, err := d.write(ctx, e.key, nil, true, cur.modRev); err != nil {
			return err
		}
	}
	return nil
}
