package reconcile

import (
	"errors"
	"sync"
	"time"
)

// OwnerGate shares a loop's workers between the owners of its keys, where
// a key's work waits on an endpoint its owner chose (a tenant's storage
// location, answering slowly): one owner's keys hold at most PerOwner
// workers at once, and all tenants' together at most Tenants, so that
// keys of other tenants, and the admin's (owner ""), always find one. A
// sync whose key may not enter now returns at once and adds it again
// after OwnerRetry, holding no worker meanwhile.
type OwnerGate struct {
	PerOwner, Tenants int

	mu       sync.Mutex
	inFlight map[string]int
	tenants  int
}

// NewOwnerGate returns the gate of a loop run by workers: one worker per
// tenant, and one worker kept for the admin.
func NewOwnerGate(workers int) *OwnerGate {
	return &OwnerGate{PerOwner: 1, Tenants: max(1, workers-1)}
}

// ErrOwnerBusy says why a key did not enter: its owner, or the tenants
// together, hold their share of the workers.
var ErrOwnerBusy = errors.New("its owner's share of the workers is in use")

// OwnerRetry is when a key that did not enter is tried again.
const OwnerRetry = 2 * time.Second

// Enter admits a key of owner ("": the admin's, always admitted) and
// returns the release of its place; ErrOwnerBusy when it may not enter
// now.
func (g *OwnerGate) Enter(owner string) (release func(), err error) {
	if owner == "" {
		return func() {}, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inFlight == nil {
		g.inFlight = map[string]int{}
	}
	if g.inFlight[owner] >= g.PerOwner || g.tenants >= g.Tenants {
		return nil, ErrOwnerBusy
	}
	g.inFlight[owner]++
	g.tenants++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.tenants--
			if g.inFlight[owner]--; g.inFlight[owner] <= 0 {
				delete(g.inFlight, owner)
			}
		})
	}, nil
}
