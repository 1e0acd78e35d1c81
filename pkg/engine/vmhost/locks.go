package vmhost

import "sync"

// Locks are the VMs the engines of this process are working on: one
// backup, chain edit or disk restore of a VM at a time. The VM backup
// engine and the restore engine share them.
type Locks struct {
	mu   sync.Mutex
	held map[string]Holder
}

// Holder is who holds a VM: an ID (an object's UID), what it does ("backup
// b1", for the messages of those who wait) and the reason a VM backup
// waiting for it gives.
type Holder struct {
	ID, What, WaitReason string
}

// NewLocks returns locks none of which is held.
func NewLocks() *Locks { return &Locks{held: map[string]Holder{}} }

// TryLock takes the VM ("<namespace>/<name>") for h, unless another holder
// has it: then it returns that one and false. A holder may take a VM it
// holds again.
func (l *Locks) TryLock(vm string, h Holder) (Holder, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if other, ok := l.held[vm]; ok && other.ID != h.ID {
		return other, false
	}
	l.held[vm] = h
	return h, true
}

// Unlock lets the VM go, if h holds it.
func (l *Locks) Unlock(vm string, h Holder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[vm].ID == h.ID {
		delete(l.held, vm)
	}
}
