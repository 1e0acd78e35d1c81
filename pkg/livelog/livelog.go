// Package livelog owns the logs of the runs in progress on this server (a
// backup's, a restore's), kept in memory so that the logs subresource can
// serve them while the runs go on: an engine writes a run's lines to its
// Tail as it logs them, readers follow the tail from a byte offset, and the
// tail goes when the run ends, its whole log then stored in its storage
// location (where the same offsets go on).
package livelog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultMaxBytes is what a tail keeps of a run's log by default: beyond
// it, the oldest lines go (the stored log has them all once the run ends).
const DefaultMaxBytes = 2 << 20

// Key names a run: the kind of its log, and its object.
type Key struct {
	// Kind is the download target kind of the log (BackupLog, RestoreLog).
	Kind      string
	Namespace string
	Name      string
}

// Registry holds the tails of the runs in progress. A nil Registry keeps
// nothing: Start returns a nil Tail, whose methods do nothing.
type Registry struct {
	maxBytes int
	mu       sync.Mutex
	tails    map[Key]*Tail
	// followers and inNamespace count the followed logs being served, by
	// user and by the namespace asked in, and total in all: each holds a
	// connection and a goroutine for up to a follow's length, and the
	// request is long-running (no seat of priority and fairness bounds
	// it).
	followers, inNamespace map[string]int
	total                  int
	// MaxFollowers, MaxFollowersPerUser and MaxFollowersPerNamespace
	// bound them (0: the defaults).
	MaxFollowers, MaxFollowersPerUser, MaxFollowersPerNamespace int
}

// The default bounds of followed logs: at once, in all, by one user and
// in one namespace (a tenant's users, its service accounts included, the
// admins in the admin namespace).
const (
	DefaultMaxFollowers             = 200
	DefaultMaxFollowersPerUser      = 10
	DefaultMaxFollowersPerNamespace = 40
)

// Followers is how many followed logs are being served.
func (r *Registry) Followers() int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// ErrTooManyFollowers is the error of a follow past the bounds.
var ErrTooManyFollowers = errors.New("too many logs followed at once")

// Follow counts a followed log of user, asked in namespace, until release
// is called; past the bounds it counts nothing and is
// ErrTooManyFollowers.
func (r *Registry) Follow(user, namespace string) (release func(), err error) {
	if r == nil {
		return func() {}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	maxAll, maxUser, maxNamespace := r.MaxFollowers, r.MaxFollowersPerUser, r.MaxFollowersPerNamespace
	if maxAll <= 0 {
		maxAll = DefaultMaxFollowers
	}
	if maxUser <= 0 {
		maxUser = DefaultMaxFollowersPerUser
	}
	if maxNamespace <= 0 {
		maxNamespace = DefaultMaxFollowersPerNamespace
	}
	if r.followers == nil {
		r.followers, r.inNamespace = map[string]int{}, map[string]int{}
	}
	switch {
	case r.followers[user] >= maxUser:
		return nil, fmt.Errorf("%w: %d by this user (at most %d)", ErrTooManyFollowers, r.followers[user], maxUser)
	case r.inNamespace[namespace] >= maxNamespace:
		return nil, fmt.Errorf("%w: %d in namespace %s (at most %d)", ErrTooManyFollowers, r.inNamespace[namespace], namespace, maxNamespace)
	case r.total >= maxAll:
		return nil, fmt.Errorf("%w: %d in all (at most %d)", ErrTooManyFollowers, r.total, maxAll)
	}
	r.followers[user]++
	r.inNamespace[namespace]++
	r.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.total--
			if r.followers[user]--; r.followers[user] <= 0 {
				delete(r.followers, user)
			}
			if r.inNamespace[namespace]--; r.inNamespace[namespace] <= 0 {
				delete(r.inNamespace, namespace)
			}
		})
	}, nil
}

// NewRegistry returns a registry whose tails keep at most maxBytes each
// (DefaultMaxBytes when 0).
func NewRegistry(maxBytes int) *Registry {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Registry{maxBytes: maxBytes, tails: map[Key]*Tail{}}
}

// Start registers the tail of a run that begins. A tail of the same key
// still registered (a run of an object deleted and made again under its
// name) is replaced: readers find the new run.
func (r *Registry) Start(k Key) *Tail {
	if r == nil {
		return nil
	}
	t := &Tail{registry: r, key: k, maxBytes: r.maxBytes, changed: make(chan struct{})}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tails[k] = t
	return t
}

// Get returns the tail of a run in progress on this server, nil if none.
func (r *Registry) Get(k Key) *Tail {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tails[k]
}

// Len is how many runs have a tail.
func (r *Registry) Len() int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.tails)
}

// Tail is the log of one run in progress: the bytes from offset start on,
// at most maxBytes of them.
type Tail struct {
	registry *Registry
	key      Key
	maxBytes int

	mu      sync.Mutex
	buf     []byte
	start   int64
	done    bool
	changed chan struct{} // closed, and replaced, at each change
}

// Write appends lines to the tail (an io.Writer for the engine's log).
// When the tail grows past its bound, its oldest lines go.
func (t *Tail) Write(p []byte) (int, error) {
	if t == nil {
		return len(p), nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return len(p), nil
	}
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.maxBytes; over > 0 {
		// Drop at least half the bound, up to the end of a line, so
		// that trimming is rare and the tail starts with a whole line.
		cut := max(over, t.maxBytes/2)
		if i := bytes.IndexByte(t.buf[cut:], '\n'); i >= 0 {
			cut += i + 1
		} else {
			cut = len(t.buf)
		}
		t.start += int64(cut)
		t.buf = append([]byte(nil), t.buf[cut:]...)
	}
	t.signal()
	return len(p), nil
}

// Close ends the tail: its readers get what is left and end, and the
// registry forgets it (unless a newer run of its key replaced it).
func (t *Tail) Close() {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.done = true
	t.signal()
	t.mu.Unlock()
	t.registry.mu.Lock()
	defer t.registry.mu.Unlock()
	if t.registry.tails[t.key] == t {
		delete(t.registry.tails, t.key)
	}
}

func (t *Tail) signal() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// Chunk is what a read of a tail returns.
type Chunk struct {
	// Offset is where Data starts in the run's log: the offset asked
	// for, or the tail's start when the bytes asked for are no longer
	// kept.
	Offset int64
	Data   []byte
	// Done: the run ended; nothing follows Data.
	Done bool
	// Changed is closed when the tail changes next.
	Changed <-chan struct{}
}

// Read returns what the tail has from offset on (a copy).
func (t *Tail) Read(offset int64) Chunk {
	t.mu.Lock()
	defer t.mu.Unlock()
	offset = max(offset, t.start)
	end := t.start + int64(len(t.buf))
	var data []byte
	if offset < end {
		data = append([]byte(nil), t.buf[offset-t.start:]...)
	} else {
		offset = end
	}
	return Chunk{Offset: offset, Data: data, Done: t.done, Changed: t.changed}
}

// Follow writes what the tail has from offset on to w, then what it gets,
// until the run ends, ctx ends, or for at most maxWait (a stream that
// stays below the request timeouts of the servers and proxies on its way:
// its reader asks again from where it got to). begin is called once, with
// the offset the stream starts at, before the first write; flush after
// each write. It returns the offset it got to.
func (t *Tail) Follow(ctx context.Context, offset int64, maxWait time.Duration, begin func(offset int64), w func([]byte) error) (int64, error) {
	timer := time.NewTimer(maxWait)
	defer timer.Stop()
	first := true
	for {
		c := t.Read(offset)
		if first {
			begin(c.Offset)
			first = false
		}
		offset = c.Offset + int64(len(c.Data))
		if len(c.Data) > 0 {
			if err := w(c.Data); err != nil {
				return offset, err
			}
		}
		if c.Done {
			return offset, nil
		}
		select {
		case <-c.Changed:
		case <-ctx.Done():
			return offset, nil
		case <-timer.C:
			return offset, nil
		}
	}
}
