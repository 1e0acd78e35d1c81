package framework

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"
)

// Parallel runs do(i) for every i in [0, n) on k goroutines, and fails tb
// with the errors do returned (a goroutine stops at its first).
func Parallel(tb testing.TB, k, n int, do func(i int) error) {
	tb.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, k)
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
}

// Percentiles returns the p50 and p99 of ds (sorted in place; ds must not
// be empty).
func Percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)*99/100]
}

// FanOut is a watch fan-out: Watchers watches, each made by Watch(w)
// from now on, see the creates Create(i) makes for i in [0, Events).
type FanOut struct {
	Watchers, Events int
	// Watch starts watcher w's watch; it sees the created objects (and
	// may see others, which are not counted).
	Watch func(ctx context.Context, w int) (watch.Interface, error)
	// Create makes the object named FanOutName(i).
	Create func(ctx context.Context, i int) error
}

// FanOutName is the name of the fan-out's i-th object.
func FanOutName(i int) string { return fmt.Sprintf("fanout-%d", i) }

// Run starts the watchers, then makes the creates one after the other,
// and returns the p50 and p99 of the time from each create's sending to
// each watcher's Added event of it. A watcher that ends early or misses
// an event within five minutes fails tb.
func (f FanOut) Run(tb testing.TB) (p50, p99 time.Duration) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sent := make([]atomic.Int64, f.Events)
	var (
		mu        sync.Mutex
		latencies []time.Duration
		all       sync.WaitGroup
		ready     sync.WaitGroup
	)
	for w := range f.Watchers {
		ready.Add(1)
		all.Add(1)
		go func() {
			defer all.Done()
			wi, err := f.Watch(ctx, w)
			ready.Done()
			if err != nil {
				tb.Error(err)
				return
			}
			defer wi.Stop()
			var mine []time.Duration
			deadline := time.After(5 * time.Minute)
			for len(mine) < f.Events {
				select {
				case e, open := <-wi.ResultChan():
					if !open {
						tb.Errorf("watcher %d ended after %d events", w, len(mine))
						return
					}
					if e.Type != watch.Added {
						continue
					}
					m, err := meta.Accessor(e.Object)
					if err != nil {
						continue
					}
					var i int
					if _, err := fmt.Sscanf(m.GetName(), "fanout-%d", &i); err == nil && i < f.Events {
						mine = append(mine, time.Since(time.Unix(0, sent[i].Load())))
					}
				case <-deadline:
					tb.Errorf("watcher %d saw %d of %d events", w, len(mine), f.Events)
					return
				}
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		}()
	}
	ready.Wait()
	for i := range f.Events {
		sent[i].Store(time.Now().UnixNano())
		if err := f.Create(ctx, i); err != nil {
			cancel()
			all.Wait()
			tb.Fatalf("fan-out create %d: %v", i, err)
		}
	}
	all.Wait()
	if len(latencies) == 0 {
		tb.Fatal("no watch event arrived")
	}
	return Percentiles(latencies)
}
