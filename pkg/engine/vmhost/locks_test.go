package vmhost

import "testing"

// TestLocks: a VM is held by one holder at a time, which may take it
// again; others learn who holds it; only the holder lets it go.
func TestLocks(t *testing.T) {
	l := NewLocks()
	backup := Holder{ID: "b", What: "backup b1", WaitReason: "WaitingForOtherBackup"}
	restore := Holder{ID: "r", What: "restore r1", WaitReason: "WaitingForRestore"}
	steps := []struct {
		name   string
		do     func() (Holder, bool)
		wantOK bool
		holder string
	}{
		{"the first takes it", func() (Holder, bool) { return l.TryLock("ns/vm", backup) }, true, "b"},
		{"another waits, told who holds it", func() (Holder, bool) { return l.TryLock("ns/vm", restore) }, false, "b"},
		{"the holder again", func() (Holder, bool) { return l.TryLock("ns/vm", backup) }, true, "b"},
		{"another VM is free", func() (Holder, bool) { return l.TryLock("ns/other", restore) }, true, "r"},
		{"an unlock by another does nothing", func() (Holder, bool) { l.Unlock("ns/vm", restore); return l.TryLock("ns/vm", restore) }, false, "b"},
		{"after the holder's unlock", func() (Holder, bool) { l.Unlock("ns/vm", backup); return l.TryLock("ns/vm", restore) }, true, "r"},
	}
	for _, s := range steps {
		h, ok := s.do()
		if ok != s.wantOK || h.ID != s.holder {
			t.Errorf("%s: got %v held by %q, want %v held by %q", s.name, ok, h.ID, s.wantOK, s.holder)
		}
	}
}
