// Package queue decides which queued backups may start, per the concurrent
// backup processing design: at most a given number of backups are
// ReadyToStart or InProgress at once, and a queued backup may start only if
// its namespaces overlap neither a running backup nor any backup queued
// ahead of it. A backup without a namespace filter (or with "*") overlaps
// every other backup. "Ahead" is the queue's order, in which the owners
// take turns (a tenant's backups, the admin's): the design's creation
// order within each owner's backups, so that one tenant queuing a
// thousand delays another's, or the admin's backup of every namespace,
// by one of its own rather than by the thousand (inTurns).
//
// The package is pure logic: the queue engine feeds it the backups it
// reads, and writes the phase transitions it returns. Namespaces are
// interned to small integers when a backup enters the queue, so that
// picking the next backups works on a bitset rather than on string maps:
// with 10,000 queued backups a pick costs tens of microseconds
// (BenchmarkRunnable).
package queue

import "strings"

// Interner numbers namespace names. It is not safe for concurrent use: the
// queue engine owns one.
type Interner struct {
	// names are the namespaces by number.
	names []string
	ids   map[string]int
}

// NewInterner returns an empty interner.
func NewInterner() *Interner { return &Interner{ids: map[string]int{}} }

// Len is the number of namespaces numbered so far.
func (in *Interner) Len() int { return len(in.ids) }

// Entry is one backup as the queue sees it.
type Entry struct {
	Name string
	// All: the backup covers every namespace (no namespace filter, or "*").
	All bool
	// IDs are the interned included namespaces, each once.
	IDs []int
}

// Entry returns the entry of a backup whose spec.includedNamespaces is
// namespaces (duplicates allowed).
func (in *Interner) Entry(name string, namespaces []string) Entry {
	e := Entry{Name: name, All: len(namespaces) == 0}
	seen := make(map[int]struct{}, len(namespaces))
	for _, n := range namespaces {
		if n == "*" {
			e.All = true
		}
		id, ok := in.ids[n]
		if !ok {
			id = len(in.ids)
			in.ids[n] = id
			in.names = append(in.names, n)
		}
		if _, dup := seen[id]; !dup {
			seen[id] = struct{}{}
			e.IDs = append(e.IDs, id)
		}
	}
	if e.All {
		e.IDs = nil
	}
	return e
}

// claims is the set of namespaces held by running or earlier-queued backups.
type claims struct {
	all  bool
	any  bool
	bits []uint64
}

func newClaims(namespaces int) claims { return claims{bits: make([]uint64, (namespaces+63)/64)} }

// claim adds e's namespaces and reports whether e overlaps what was held.
func (c *claims) claim(e Entry) (overlapped bool) {
	overlapped = c.all
	if e.All {
		overlapped = overlapped || c.any
		c.all, c.any = true, true
		return overlapped
	}
	for _, id := range e.IDs {
		w, b := id/64, uint64(1)<<(id%64)
		if c.bits[w]&b != 0 {
			overlapped = true
		}
		c.bits[w] |= b
		c.any = true
	}
	return overlapped
}

// Overlap reports whether two backups (interned by in) may not run at the
// same time.
func Overlap(in *Interner, a, b Entry) bool {
	c := newClaims(in.Len())
	c.claim(a)
	return c.claim(b)
}

// Runnable returns, in queue order, the names of the queued backups that
// may start now. running are the backups ReadyToStart or InProgress;
// queued are the Queued backups in queue order (position 1 first); limit
// is the number of backups that may be ReadyToStart or InProgress at once;
// all entries come from in.
//
// A queued backup must not overlap a running backup nor one queued ahead of
// it, and one started by this call counts as running for those behind it:
// so every backup seen claims its namespaces, whether it starts or waits,
// and one set of claims serves both rules. The cost is linear in the
// namespaces seen, and the scan stops once nothing further can start.
func Runnable(in *Interner, running, queued []Entry, limit int) []string {
	slots := limit - len(running)
	if slots <= 0 {
		return nil
	}
	held := newClaims(in.Len())
	for _, r := range running {
		held.claim(r)
	}
	var start []string
	for _, q := range queued {
		if held.all {
			// A backup of every namespace runs or waits ahead: nothing
			// behind it may start.
			break
		}
		if held.claim(q) {
			continue
		}
		start = append(start, q.Name)
		if slots--; slots == 0 {
			break
		}
	}
	return start
}

// Blocker is a backup that keeps a queued backup from starting.
type Blocker struct {
	Backup string
	// Running: ReadyToStart or InProgress; otherwise queued ahead.
	Running bool
	// Namespaces are those the two share; nil when one of them covers
	// every namespace.
	Namespaces []string
}

// String is "<backup> (running|queued ahead): ns1,ns2" or "...: all namespaces".
func (b Blocker) String() string {
	state := "queued ahead"
	if b.Running {
		state = "running"
	}
	shared := "all namespaces"
	if b.Namespaces != nil {
		shared = strings.Join(b.Namespaces, ",")
	}
	return b.Backup + " (" + state + "): " + shared
}

// Blockers says why e may not start: the running backups and those queued
// ahead of it (ahead, in queue order) whose namespaces overlap e's. None
// means only the concurrency limit holds it back.
func Blockers(in *Interner, running, ahead []Entry, e Entry) []Blocker {
	var out []Blocker
	check := func(o Entry, isRunning bool) {
		if o.All || e.All {
			out = append(out, Blocker{Backup: o.Name, Running: isRunning})
			return
		}
		var shared []string
		for _, a := range e.IDs {
			for _, b := range o.IDs {
				if a == b {
					shared = append(shared, in.names[a])
				}
			}
		}
		if shared != nil {
			out = append(out, Blocker{Backup: o.Name, Running: isRunning, Namespaces: shared})
		}
	}
	for _, r := range running {
		check(r, true)
	}
	for _, q := range ahead {
		check(q, false)
	}
	return out
}
