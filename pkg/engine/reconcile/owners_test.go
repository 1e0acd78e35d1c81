package reconcile

import (
	"errors"
	"testing"
)

// TestOwnerGate: one tenant's keys take one worker at a time, the tenants
// together all but one, the admin's keys always enter; a release (once,
// however often called) lets the next in.
func TestOwnerGate(t *testing.T) {
	g := NewOwnerGate(4)
	a, err := g.Enter("tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Enter("tenant-a"); !errors.Is(err, ErrOwnerBusy) {
		t.Errorf("tenant-a's second key: %v, want %v", err, ErrOwnerBusy)
	}
	for _, owner := range []string{"tenant-b", "tenant-c"} {
		if _, err := g.Enter(owner); err != nil {
			t.Fatalf("%s: %v", owner, err)
		}
	}
	if _, err := g.Enter("tenant-d"); !errors.Is(err, ErrOwnerBusy) {
		t.Errorf("a fourth tenant with three workers held by tenants: %v, want %v", err, ErrOwnerBusy)
	}
	for range 3 {
		if _, err := g.Enter(""); err != nil {
			t.Errorf("the admin's key: %v, want it admitted", err)
		}
	}
	a()
	a()
	if _, err := g.Enter("tenant-d"); err != nil {
		t.Errorf("a fourth tenant once tenant-a's key is done: %v", err)
	}
	if _, err := g.Enter("tenant-a"); !errors.Is(err, ErrOwnerBusy) {
		t.Errorf("tenant-a again, with three tenants in: %v, want %v (its release counted once)", err, ErrOwnerBusy)
	}
}
