package pebble

// Keys with a time to live: the expiry index, and the reaper that deletes
// what has expired.

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"k8s.io/klog/v2"
)

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
		if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, pebble.ErrClosed) {
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
