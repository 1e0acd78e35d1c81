package queue

import (
	"fmt"
	"reflect"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

// in interns the namespaces of every test; e makes an entry.
var in = NewInterner()

func e(name string, ns ...string) Entry { return in.Entry(name, ns) }

func TestRunnable(t *testing.T) {
	cases := []struct {
		name    string
		running []Entry
		queued  []Entry
		limit   int
		want    []string
	}{
		{
			// The design document's scenario: backup2 overlaps the running
			// backup1; backup3 and backup4 overlap backup2, queued ahead of
			// them; backup5 runs.
			name:    "seed scenario",
			running: []Entry{e("backup1", "ns1", "ns2")},
			queued: []Entry{e("backup2", "ns2", "ns3", "ns5"), e("backup3", "ns4", "ns3"),
				e("backup4", "ns5", "ns6"), e("backup5", "ns8", "ns9")},
			limit: 2,
			want:  []string{"backup5"},
		},
		{
			// ... and once backup1 completes (backup5 still running), backup2 runs.
			name:    "seed scenario, backup1 done",
			running: []Entry{e("backup5", "ns8", "ns9")},
			queued:  []Entry{e("backup2", "ns2", "ns3", "ns5"), e("backup3", "ns4", "ns3"), e("backup4", "ns5", "ns6")},
			limit:   2,
			want:    []string{"backup2"},
		},
		{name: "limit reached", running: []Entry{e("a", "x")}, queued: []Entry{e("b", "y")}, limit: 1},
		{name: "several start at once", queued: []Entry{e("a", "x"), e("b", "y"), e("c", "z")}, limit: 2, want: []string{"a", "b"}},
		{name: "overlap among the queued", queued: []Entry{e("a", "x"), e("b", "x"), e("c", "y")}, limit: 3, want: []string{"a", "c"}},
		{name: "no namespace filter overlaps a running backup", running: []Entry{e("a", "x")}, queued: []Entry{e("all")}, limit: 3},
		{name: "a running backup of everything blocks all", running: []Entry{e("all")}, queued: []Entry{e("b", "y")}, limit: 3},
		{name: "star means everything", running: []Entry{e("all", "*")}, queued: []Entry{e("b", "y")}, limit: 3},
		{name: "everything queued ahead blocks what follows", running: []Entry{e("a", "x")}, queued: []Entry{e("all"), e("c", "y")}, limit: 3},
		{name: "everything alone runs", queued: []Entry{e("all"), e("c", "y")}, limit: 3, want: []string{"all"}},
		{name: "empty queue", running: []Entry{e("a", "x")}, limit: 3},
		{name: "a namespace listed twice does not block its own backup", queued: []Entry{e("a", "x", "x")}, limit: 1, want: []string{"a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Runnable(in, c.running, c.queued, c.limit); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Runnable = %v, want %v", got, c.want)
			}
		})
	}
}

func TestOverlap(t *testing.T) {
	for _, c := range []struct {
		a, b Entry
		want bool
	}{
		{e("a", "x", "y"), e("b", "y"), true},
		{e("a", "x"), e("b", "y"), false},
		{e("a"), e("b", "y"), true},
		{e("a", "x"), e("b", "*"), true},
		{e("a"), e("b"), true},
	} {
		if got := Overlap(in, c.a, c.b); got != c.want || Overlap(in, c.b, c.a) != c.want {
			t.Errorf("Overlap(%v, %v) = %v, want %v (both ways)", c.a, c.b, got, c.want)
		}
	}
}

// BenchmarkRunnable picks the next runnable backup among 10k queued ones
// whose first 9,999 all wait behind a running backup, each with a namespace
// of its own besides the shared one (the worst case: the whole queue is
// scanned, 20,000 namespace claims). Target: <= 1 ms per pick
// (docs/benchmarks.md).
func BenchmarkRunnable(b *testing.B) {
	// Entries are interned once, when backups enter the queue, not per pick.
	in := NewInterner()
	running := []Entry{in.Entry("running", []string{"shared"})}
	queued := make([]Entry, 10000)
	for i := range queued {
		queued[i] = in.Entry(fmt.Sprintf("q%05d", i), []string{"shared", fmt.Sprintf("ns%05d", i)})
	}
	queued[len(queued)-1] = in.Entry("last", []string{"free"})
	b.ReportAllocs()
	for b.Loop() {
		if got := Runnable(in, running, queued, 2); len(got) != 1 || got[0] != "last" {
			b.Fatalf("Runnable = %v", got)
		}
	}
}

func TestBlockers(t *testing.T) {
	running := []Entry{e("backup1", "ns1", "ns2")}
	ahead := []Entry{e("backup2", "ns2", "ns3", "ns5"), e("everything")}
	cases := []struct {
		name    string
		running []Entry
		ahead   []Entry
		backup  Entry
		want    []string
	}{
		{"seed backup3 behind backup2", running, ahead[:1], e("backup3", "ns4", "ns3"), []string{"backup2 (queued ahead): ns3"}},
		{"shares with running and queued", running, ahead[:1], e("b", "ns2", "ns5", "ns7"), []string{"backup1 (running): ns2", "backup2 (queued ahead): ns2,ns5"}},
		{"behind a backup of every namespace", nil, ahead, e("c", "ns9"), []string{"everything (queued ahead): all namespaces"}},
		{"every namespace itself", running, nil, e("d", "*"), []string{"backup1 (running): all namespaces"}},
		{"only the limit", running, ahead[:1], e("free", "ns8"), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, b := range Blockers(in, c.running, c.ahead, c.backup) {
				got = append(got, b.String())
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Blockers = %q, want %q", got, c.want)
			}
		})
	}
}

// TestTenantsQueueFairly: a tenant's backups all take its own namespace
// (admission refuses any other), so they overlap one another and run one
// at a time; a tenant with a thousand queued never takes more than one
// slot, and another tenant's backup, or the admin's, behind them starts as
// soon as a slot is free.
func TestTenantsQueueFairly(t *testing.T) {
	var flood []Entry
	for i := range 1000 {
		flood = append(flood, e(fmt.Sprintf("a-%d", i), "tenant-a"))
	}
	queued := append(append([]Entry{}, flood...), e("b-1", "tenant-b"), e("admin-1", "shop"))
	t.Run("nothing running", func(t *testing.T) {
		if got, want := Runnable(in, nil, queued, 3), []string{"a-0", "b-1", "admin-1"}; !reflect.DeepEqual(got, want) {
			t.Errorf("Runnable = %v, want %v", got, want)
		}
	})
	t.Run("the flooding tenant's first runs", func(t *testing.T) {
		if got, want := Runnable(in, []Entry{e("a-0", "tenant-a")}, append(queued[1:1000:1000], queued[1000:]...), 2), []string{"b-1"}; !reflect.DeepEqual(got, want) {
			t.Errorf("Runnable = %v, want %v", got, want)
		}
	})
}

// TestQueueInTurns: the engine's order of the queued backups is the
// owners' turns (velerov1.QueueOwner), the order the registry's index
// numbers them in; with it, the admin's backup of every namespace, queued
// behind a tenant's thousand, starts once the tenant's first has run.
func TestQueueInTurns(t *testing.T) {
	backup := func(name, tenant string, seq int64) *velerov1.Backup {
		b := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			velerov1.QueueSequenceAnnotation: strconv.FormatInt(seq, 10)}}}
		if tenant != "" {
			b.Annotations[velerov1.TenantOriginNamespaceAnnotation] = tenant
			b.Spec.IncludedNamespaces = []string{tenant}
		}
		return b
	}
	var queued []*velerov1.Backup
	for i := range 1000 {
		queued = append(queued, backup(fmt.Sprintf("a-%03d", i), "tenant-a", int64(10+i)))
	}
	// Shuffled as a lister returns them.
	queued = append([]*velerov1.Backup{backup("admin-all", "", 5000), backup("b-0", "tenant-b", 5001)}, queued...)
	queued = append(queued, backup("admin-second", "", 4000), backup("b-1", "tenant-b", 6000))
	inTurns(queued)
	var names []string
	for _, b := range queued[:8] {
		names = append(names, b.Name)
	}
	// Turn 0: a-000 (10), admin-second (4000), b-0 (5001); turn 1: a-001,
	// admin-all (5000), b-1 (6000); turn 2: a-002, a-003...
	if want := []string{"a-000", "admin-second", "b-0", "a-001", "admin-all", "b-1", "a-002", "a-003"}; !reflect.DeepEqual(names, want) {
		t.Errorf("the queue's head: %v, want %v", names, want)
	}
	t.Run("the admin's backup of every namespace waits for one of the tenant's", func(t *testing.T) {
		in := NewInterner()
		var entries []Entry
		for _, b := range queued {
			entries = append(entries, in.Entry(b.Name, b.Spec.IncludedNamespaces))
		}
		// a-000, admin-second (every namespace) and b-0 ran, a-001
		// runs: admin-all is next, after it.
		running := []Entry{in.Entry("a-001", []string{"tenant-a"})}
		if got := Runnable(in, running, entries[4:], 2); got != nil {
			t.Errorf("Runnable = %v while a-001 runs, want nothing (admin-all covers it)", got)
		}
		if got, want := Runnable(in, nil, entries[4:], 2), []string{"admin-all"}; !reflect.DeepEqual(got, want) {
			t.Errorf("Runnable = %v once a-001 ran, want %v, not the tenant's 998 others first", got, want)
		}
	})
}
