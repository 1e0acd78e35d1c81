package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
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
	readers    int        // reads of Pebble outside writeMu under way: Close waits for them
	readersEnd *sync.Cond // on mu: signalled when readers drops to 0
	failed     error      // a WAL sync failed: the database refuses further work

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
	d.readersEnd = sync.NewCond(&d.mu)
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

// Close stops watchers and the TTL reaper, waits for the reads and writes in
// flight and closes Pebble. Reads that start after it fail with ErrClosed.
func (d *DB) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	close(d.closedCh)
	d.broadcastLocked() // readers waiting for durability wake and see closed
	for d.readers > 0 {
		d.readersEnd.Wait()
	}
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

// RequestProgress asks every watcher to report its progress (a bookmark at the
// current revision) once it has delivered everything up to it.
func (d *DB) RequestProgress() {
	d.mu.Lock()
	d.progress++
	d.broadcastLocked()
	d.mu.Unlock()
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
