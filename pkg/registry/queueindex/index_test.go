package queueindex

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
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

// TestTurns: with owners, the index's positions are the order in which
// the owners take turns: a tenant's many waiting objects come after every
// other owner's first, each owner's in sequence. Checked against the
// order sorted the long way, object by object, as objects come and go.
func TestTurns(t *testing.T) {
	clock := time.UnixMicro(1)
	x := NewFair(ns, func(o *metav1.ObjectMeta) bool { return o.Labels["waiting"] == "yes" },
		func(o *metav1.ObjectMeta) string { return o.Labels["owner"] })
	x.now = func() time.Time { return clock }
	owned := func(name, owner string, seq int64) *metav1.ObjectMeta {
		o := object(name, seq, true)
		o.Labels["owner"] = owner
		return o
	}
	waiting := map[string]*metav1.ObjectMeta{}
	add := func(o *metav1.ObjectMeta) { waiting[o.Name] = o; x.observe(o) }
	// want is the order sorted the long way: each object's turn is the
	// number of its owner's with an earlier (sequence, name).
	want := func() map[string]int {
		type placed struct {
			turn int
			e    entry
		}
		var all []placed
		for _, o := range waiting {
			seq, _ := strconv.ParseInt(o.Annotations["backstop.io/queue-sequence"], 10, 64)
			e := entry{seq, o.Name}
			turn := 0
			for _, p := range waiting {
				ps, _ := strconv.ParseInt(p.Annotations["backstop.io/queue-sequence"], 10, 64)
				if p.Labels["owner"] == o.Labels["owner"] && (entry{ps, p.Name}).before(e) {
					turn++
				}
			}
			all = append(all, placed{turn, e})
		}
		sort.Slice(all, func(i, j int) bool {
			if all[i].turn != all[j].turn {
				return all[i].turn < all[j].turn
			}
			return all[i].e.before(all[j].e)
		})
		out := map[string]int{}
		for i, p := range all {
			out[p.e.name] = i + 1
		}
		return out
	}
	check := func(t *testing.T) {
		t.Helper()
		w := want()
		for name, p := range w {
			if got := x.Position(name); got != p {
				t.Errorf("%s: position %d, want %d (of %v)", name, got, p, w)
			}
		}
	}
	t.Run("a tenant's flood, then another tenant and the admin", func(t *testing.T) {
		for i := range 20 {
			add(owned(fmt.Sprintf("a-%02d", i), "tenant-a", int64(10+i)))
		}
		add(owned("b-0", "tenant-b", 100))
		add(owned("admin-0", "", 101))
		add(owned("admin-1", "", 102))
		check(t)
		for name, p := range map[string]int{"a-00": 1, "b-0": 2, "admin-0": 3, "a-01": 4, "admin-1": 5, "a-02": 6, "a-19": 23} {
			if got := x.Position(name); got != p {
				t.Errorf("%s: position %d, want %d", name, got, p)
			}
		}
		if p := x.PositionOf(owned("admin-2", "", 103)); p != 7 {
			t.Errorf("the admin's third, read before its watch event: position %d, want 7 (after a-02)", p)
		}
	})
	t.Run("objects start and go", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		owners := []string{"", "tenant-a", "tenant-b", "tenant-c"}
		for i := range 300 {
			if len(waiting) > 0 && rng.IntN(3) == 0 {
				names := make([]string, 0, len(waiting))
				for n := range waiting {
					names = append(names, n)
				}
				sort.Strings(names)
				n := names[rng.IntN(len(names))]
				o := waiting[n]
				delete(waiting, n)
				done := object(n, 1, false)
				done.Annotations = o.Annotations
				x.observe(done)
			} else {
				add(owned(fmt.Sprintf("r-%03d", i), owners[rng.IntN(len(owners))], int64(200+rng.IntN(50))))
			}
			check(t)
			if t.Failed() {
				t.Fatalf("after step %d", i)
			}
		}
	})
}
