package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/backstop-io/backstop/pkg/archive"
	"github.com/backstop-io/backstop/pkg/engine/items"
)

func resource(group, name string) items.Resource {
	return items.Resource{GVR: schema.GroupVersionResource{Group: group, Version: "v1", Resource: name}}
}

// TestRestoreOrder: Velero's priorities first (names resolved against the
// target's resources, the core group's first), the rest alphabetically,
// the low priorities last; only what the backup holds.
func TestRestoreOrder(t *testing.T) {
	served := []items.Resource{
		resource("metrics.k8s.io", "pods"), resource("", "pods"), resource("", "services"), resource("", "configmaps"),
		resource("rbac.authorization.k8s.io", "rolebindings"), resource("rbac.authorization.k8s.io", "roles"),
		resource("apps", "deployments"), resource("apps", "replicasets"), resource("batch", "jobs"),
		resource("cluster.x-k8s.io", "clusters"), resource("example.com", "widgets"),
	}
	present := map[string]bool{}
	for _, gr := range []string{"widgets.example.com", "services", "jobs.batch", "clusters.cluster.x-k8s.io", "pods", "deployments.apps",
		"rolebindings.rbac.authorization.k8s.io", "roles.rbac.authorization.k8s.io", "configmaps", "replicasets.apps", "gone.example.org"} {
		present[gr] = true
	}
	want := []string{
		"roles.rbac.authorization.k8s.io", "rolebindings.rbac.authorization.k8s.io", "configmaps", "pods", "replicasets.apps", "services",
		"deployments.apps", "gone.example.org", "jobs.batch", "widgets.example.com",
		"clusters.cluster.x-k8s.io",
	}
	if got := restoreOrder(served, present); !slices.Equal(got, want) {
		t.Errorf("restore order\n got %v\nwant %v", got, want)
	}
}

// TestSpoolReplay: items come back whole, by group resource in the order
// given, in their tarball order within one, and the spool leaves nothing.
func TestSpoolReplay(t *testing.T) {
	dir := t.TempDir()
	s, err := newSpool(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := []archive.Item{
		{GroupResource: "services", Namespace: "a", Name: "s1", Version: "v1", Preferred: true, Data: []byte(`{"s":1}`)},
		{GroupResource: "configmaps", Namespace: "a", Name: "c1", Version: "v1", Preferred: true, Data: []byte(`{"c":1}`)},
		{GroupResource: "services", Namespace: "b", Name: "s2", Version: "v1", Preferred: true, Data: []byte(`{"s":2}`)},
	}
	for i := range in {
		if err := s.add(&in[i]); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	if err := s.replay(context.Background(), []string{"configmaps", "services"}, 1, func(it *archive.Item) error {
		got = append(got, it.Namespace+"/"+it.Name+"="+string(it.Data))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{`a/c1={"c":1}`, `a/s1={"s":1}`, `b/s2={"s":2}`}; !slices.Equal(got, want) {
		t.Errorf("replayed %v, want %v", got, want)
	}
	s.close()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the spool left %d entries", len(entries))
	}
}

// TestSpoolReplayParallel: with workers, the items of one group resource
// are written that many at a time, and every one of them is done before
// the next group resource starts; the first error stops the replay.
func TestSpoolReplayParallel(t *testing.T) {
	const workers, configMaps = 4, 10
	s, err := newSpool(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	for i := range configMaps {
		if err := s.add(&archive.Item{GroupResource: "configmaps", Namespace: "a", Name: fmt.Sprint("c", i), Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if err := s.add(&archive.Item{GroupResource: "services", Namespace: "a", Name: fmt.Sprint("s", i), Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu                    sync.Mutex
		inFlight, maxInFlight int
		configMapsDone        int
		servicesEarly         bool
		arrived               = make(chan struct{}, configMaps)
	)
	err = s.replay(context.Background(), []string{"configmaps", "services"}, workers, func(it *archive.Item) error {
		mu.Lock()
		inFlight++
		maxInFlight = max(maxInFlight, inFlight)
		if it.GroupResource == "services" && configMapsDone < configMaps {
			servicesEarly = true
		}
		mu.Unlock()
		if it.GroupResource == "configmaps" && it.Name < "c4" {
			// The first four wait for one another: they only all
			// arrive if they run at once.
			arrived <- struct{}{}
			deadline := time.After(30 * time.Second)
			for {
				mu.Lock()
				n := len(arrived)
				mu.Unlock()
				if n >= workers {
					break
				}
				select {
				case <-deadline:
					return fmt.Errorf("%s waited in vain for %d items at once (%d arrived)", it.Name, workers, n)
				case <-time.After(time.Millisecond):
				}
			}
		}
		mu.Lock()
		inFlight--
		if it.GroupResource == "configmaps" {
			configMapsDone++
		}
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if maxInFlight != workers || servicesEarly || configMapsDone != configMaps {
		t.Errorf("max in flight %d (want %d), services started before the configmaps were done: %v, configmaps done %d of %d",
			maxInFlight, workers, servicesEarly, configMapsDone, configMaps)
	}

	failing, err := newSpool(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer failing.close()
	for i := range 20 {
		if err := failing.add(&archive.Item{GroupResource: "configmaps", Name: fmt.Sprint("c", i), Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	var calls atomic.Int32
	boom := errors.New("boom")
	err = failing.replay(context.Background(), []string{"configmaps", "services"}, 1, func(it *archive.Item) error {
		calls.Add(1)
		return boom
	})
	if !errors.Is(err, boom) || calls.Load() != 1 {
		t.Errorf("replay after a failing item: %v with %d calls, want boom after 1", err, calls.Load())
	}
}

// TestSpoolScratchSpace: a restore spools nothing onto a scratch disk
// already at its reserve, and stops with a clear failure before its items
// would take the reserve, whatever its --restore-max-scratch-bytes.
func TestSpoolScratchSpace(t *testing.T) {
	const total = 100 << 30 // a 100 GiB disk: its reserve is 2 GiB
	reserve := uint64(total / 50)
	t.Run("a disk at its reserve takes no restore", func(t *testing.T) {
		s := &spool{dir: t.TempDir(), items: map[string][]spooled{}, space: func() (uint64, uint64, error) { return reserve - 1, total, nil }}
		if err := s.checkSpace(0); !errors.Is(err, errScratchFull) || !strings.Contains(err.Error(), "--restore-scratch-dir") {
			t.Errorf("checkSpace: %v, want %v naming --restore-scratch-dir", err, errScratchFull)
		}
	})
	t.Run("items stop before the reserve", func(t *testing.T) {
		free := reserve + 20<<20 // room for 20 MiB
		s := &spool{dir: t.TempDir(), items: map[string][]spooled{}, space: func() (uint64, uint64, error) { return free, total, nil }}
		data := bytes.Repeat([]byte("x"), 1<<20)
		var err error
		written := 0
		for i := 0; i < 64 && err == nil; i++ {
			if err = s.add(&archive.Item{GroupResource: "configmaps", Namespace: "ns", Name: fmt.Sprintf("cm-%d", i), Data: data}); err == nil {
				written++
				free -= uint64(len(data))
			}
		}
		if !errors.Is(err, errScratchFull) {
			t.Fatalf("spooling 64 MiB onto 20 MiB above the reserve: %v after %d items, want %v", err, written, errScratchFull)
		}
		if free < reserve {
			t.Errorf("the spool took the reserve: %d bytes free, the reserve %d", free, reserve)
		}
	})
}

// TestScratchBudget: the restores and previews running at once share
// --restore-scratch-size: one spool's items are refused once they would
// take the spools past nine tenths of it together, with a clear failure,
// and the space a spool held is given back when it closes.
func TestScratchBudget(t *testing.T) {
	budget := NewScratchBudget(10 << 20) // 9 MiB for the spools
	data := bytes.Repeat([]byte("x"), 1<<20)
	spoolOf := func(t *testing.T) *spool {
		t.Helper()
		s, err := newSpool(t.TempDir(), budget)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	fill := func(s *spool, n int) (int, error) {
		for i := range n {
			if err := s.add(&archive.Item{GroupResource: "configmaps", Namespace: "ns", Name: fmt.Sprintf("cm-%d", i), Data: data}); err != nil {
				return i, err
			}
		}
		return n, nil
	}
	first, second := spoolOf(t), spoolOf(t)
	if n, err := fill(first, 5); err != nil {
		t.Fatalf("the first restore's 5 MiB: %v after %d", err, n)
	}
	n, err := fill(second, 5)
	if !errors.Is(err, errScratchFull) || !strings.Contains(err.Error(), "--restore-scratch-size") || n != 4 {
		t.Errorf("a second restore's 5 MiB beside the first's: %v after %d MiB, want %v naming --restore-scratch-size after 4", err, n, errScratchFull)
	}
	first.close()
	second.close()
	if used := budget.used.Load(); used != 0 {
		t.Errorf("%d bytes of the budget held once both spools closed, want 0", used)
	}
	third := spoolOf(t)
	defer third.close()
	if n, err := fill(third, 9); err != nil {
		t.Errorf("a restore alone, once the others closed: %v after %d MiB, want its 9 MiB spooled", err, n)
	}
}
