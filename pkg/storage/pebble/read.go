package pebble

// Reads: the current value of a key, ranges at a revision (the current
// records, with the log's events undone for an older one), the log's
// events for watches, and sizes.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/cockroachdb/pebble/v2"
	"k8s.io/klog/v2"
)

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
	release   func() // the database is held open until the view closes
	rev       int64
	compacted int64
}

func (d *DB) openView(ctx context.Context) (*view, error) {
	release, err := d.acquire()
	if err != nil {
		return nil, err
	}
	snap := d.pdb.NewSnapshot()
	v := &view{db: d, snap: snap, release: release}
	if v.rev, err = readMetaInt(snap, metaRevKey); err == nil {
		v.compacted, err = readMetaInt(snap, metaCompactKey)
	}
	if err != nil {
		v.close()
		return nil, err
	}
	// Serve only durable data: wait for the sync of what this view sees.
	if err := d.waitDurable(ctx, v.rev); err != nil {
		v.close()
		return nil, err
	}
	return v, nil
}

func (v *view) close() {
	_ = v.snap.Close()
	v.release()
}

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
	release, err := d.acquire()
	if err != nil {
		return rangeResult{}, false, err
	}
	defer release()
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
	release, err := d.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
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

// StoredValues reads the current records of keys (storage keys with the
// store's prefix, e.g. "/registry/velero.io/backups/ns/name"; any order,
// ascending is fastest: one iterator seeks forward) and calls each with a
// key's position in keys, its modification revision and its stored value,
// which is valid only during the call. Keys that do not exist are skipped.
// Each record is read as it is at that moment, without a snapshot: a
// caller that compares the revision with the resourceVersion of an object
// it already served reads exactly the bytes that object was decoded from
// (and so only what is durable), or learns that the key changed since.
func (d *DB) StoredValues(keys []string, each func(i int, modRev int64, value []byte) error) error {
	release, err := d.acquire()
	if err != nil {
		return err
	}
	defer release()
	iter, err := d.pdb.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixCurrent}, UpperBound: []byte{prefixCurrent + 1}})
	if err != nil {
		return fmt.Errorf("opening iterator: %w", err)
	}
	defer iter.Close()
	var seek []byte
	for i, key := range keys {
		seek = append(append(seek[:0], prefixCurrent), key...)
		if !iter.SeekGE(seek) || !bytes.Equal(iter.Key(), seek) {
			continue
		}
		raw, err := iter.ValueAndErr()
		if err != nil {
			return fmt.Errorf("reading key %q: %w", key, err)
		}
		if len(raw) < recordHeader {
			return fmt.Errorf("corrupt record for key %q: %d bytes", key, len(raw))
		}
		if err := each(i, int64(binary.BigEndian.Uint64(raw)), raw[recordHeader:]); err != nil {
			return err
		}
	}
	if err := iter.Error(); err != nil {
		return fmt.Errorf("iterating: %w", err)
	}
	return nil
}
