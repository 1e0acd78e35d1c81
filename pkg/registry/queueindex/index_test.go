package queueindex

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

const ns = "backstop-system"

// object is a queued object of the test: waiting while labelled so.
func object(name string, seq int64, waiting bool) *metav1.ObjectMeta {
	o := &metav1.ObjectMeta{Name: name, Namespace: ns}
	if seq != 0 {
		SetSequence(o, seq)
	}
	if waiting {
		o.Labels = map[string]string{"waiting": "yes"}
	}
	return o
}

func newIndex(clock *time.Time) *Index[*metav1.ObjectMeta] {
	x := New(ns, func(o *metav1.ObjectMeta) bool { return o.Labels["waiting"] == "yes" })
	x.now = func() time.Time { return *clock }
	return x
}

func TestNextSequenceIsAHybridClock(t *testing.T) {
	clock := time.UnixMicro(1000)
	x := newIndex(&clock)
	steps := []struct {
		name string
		do   func()
		want int64
	}{
		{"the clock", func() {}, 1000},
		{"the clock has not moved: one more", func() {}, 1001},
		{"another replica numbered ahead of the clock", func() { x.observe(object("elsewhere", 5000, true)) }, 5001},
		{"the clock passed every sequence seen", func() { clock = time.UnixMicro(9000) }, 9000},
		{"the clock went back", func() { clock = time.UnixMicro(10) }, 9001},
	}
	for _, s := range steps {
		s.do()
		if got := x.NextSequence(); got != s.want {
			t.Errorf("%s: NextSequence %d, want %d", s.name, got, s.want)
		}
	}
}

func TestPositions(t *testing.T) {
	clock := time.UnixMicro(1)
	x := newIndex(&clock)
	for _, o := range []*metav1.ObjectMeta{
		object("a", 10, true), object("b", 10, true), object("c", 5, true),
		object("running", 1, false), object("unnumbered", 0, true),
	} {
		x.observe(o)
	}
	deleted := object("deleted", 2, true)
	deleted.DeletionTimestamp = &metav1.Time{}
	x.observe(deleted)

	positions := func() map[string]int {
		out := map[string]int{}
		for _, n := range []string{"a", "b", "c", "running", "unnumbered", "deleted"} {
			out[n] = x.Position(n)
		}
		return out
	}
	check := func(when string, want map[string]int) {
		t.Helper()
		got := positions()
		for n, p := range want {
			if got[n] != p {
				t.Errorf("%s: positions %v, want %v", when, got, want)
				return
			}
		}
	}
	// Equal sequences (two replicas numbering at once) by name.
	check("queued", map[string]int{"c": 1, "a": 2, "b": 3, "running": 0, "unnumbered": 0, "deleted": 0})
	if p := x.PositionOf(object("aa", 10, true)); p != 3 {
		t.Errorf("an object read before its watch event, between a and b: position %d, want 3", p)
	}
	if p := x.PositionOf(object("z", 10, false)); p != 0 {
		t.Errorf("an object not waiting: position %d, want 0", p)
	}
	x.observe(object("c", 5, false))
	check("c started", map[string]int{"c": 0, "a": 1, "b": 2})
	x.forget(cache.DeletedFinalStateUnknown{Key: ns + "/a", Obj: object("a", 10, true)})
	check("a deleted", map[string]int{"a": 0, "b": 1})
	x.observe(object("b", 10, true))
	check("b written again unchanged", map[string]int{"b": 1})
	other := object("other-namespace", 1, true)
	other.Namespace = "elsewhere"
	x.observe(other)
	check("another namespace's object ignored", map[string]int{"b": 1})
}
