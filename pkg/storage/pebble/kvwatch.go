package pebble

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// watchResponse is what a log watcher delivers: a batch of events in
// revision order, a progress notification, or a terminal error.
type watchResponse struct {
	events      []*logEvent
	progressRev int64
	err         error
}

// maxEventsPerResponse bounds one batch read from the log.
const maxEventsPerResponse = 1000

// watchLog streams every durable log event for key (or, with prefix, every key
// under it) with a revision >= startRev. Each watcher reads the log at its
// own pace from its own cursor, so a slow watcher blocks neither writers nor
// other watchers, and no event is lost or repeated. The channel is closed
// when ctx ends, after an error, or when the database closes.
func (d *DB) watchLog(ctx context.Context, key string, prefix bool, startRev int64, progressInterval time.Duration) <-chan watchResponse {
	out := make(chan watchResponse)
	go func() {
		defer close(out)
		send := func(r watchResponse) bool {
			select {
			case out <- r:
				return true
			case <-ctx.Done():
				return false
			case <-d.closedCh:
				return false
			}
		}
		var tick <-chan time.Time
		if progressInterval > 0 {
			t := time.NewTicker(progressInterval)
			defer t.Stop()
			tick = t.C
		}
		cursor := startRev - 1
		d.mu.Lock()
		lastProgress := d.progress
		d.mu.Unlock()
		progressDue := false
		for {
			d.mu.Lock()
			durable, compacted, progress, changed, closed, failed := d.durable, d.compacted, d.progress, d.changed, d.closed, d.failed
			d.mu.Unlock()
			if closed {
				return
			}
			if failed != nil && cursor >= durable {
				send(watchResponse{err: d.usable()})
				return
			}
			if cursor < compacted {
				send(watchResponse{err: ErrCompacted})
				return
			}
			if cursor < durable {
				evs, err := d.readEvents(cursor+1, durable, maxEventsPerResponse)
				if err != nil {
					send(watchResponse{err: err})
					return
				}
				if len(evs) == 0 || evs[0].rev != cursor+1 {
					// The log has a hole only if it was compacted under us.
					if d.CompactedRev() > cursor {
						send(watchResponse{err: ErrCompacted})
					} else {
						send(watchResponse{err: errLogGap(cursor + 1)})
					}
					return
				}
				var matched []*logEvent
				for _, ev := range evs {
					if ev.key == key || (prefix && strings.HasPrefix(ev.key, key)) {
						matched = append(matched, ev)
					}
				}
				cursor = evs[len(evs)-1].rev
				if len(matched) > 0 && !send(watchResponse{events: matched}) {
					return
				}
				continue
			}
			// Caught up with every durable revision.
			if progress != lastProgress || progressDue {
				lastProgress = progress
				progressDue = false
				rev := cursor
				if rev < durable {
					rev = durable
				}
				if !send(watchResponse{progressRev: rev}) {
					return
				}
				continue
			}
			select {
			case <-changed:
			case <-tick:
				progressDue = true
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

type errLogGap int64

func (e errLogGap) Error() string {
	return fmt.Sprintf("revision log is missing revision %d", int64(e))
}
