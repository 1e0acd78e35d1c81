//go:build bench

package storagebench

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/apis/example"
	"k8s.io/apiserver/pkg/storage"
)

var (
	workers     = flag.Int("storagebench.workers", 16, "concurrent clients of the concurrent Create, Get and Update benchmarks")
	objects     = flag.Int("storagebench.objects", 1000, "objects the Get and Update benchmarks read and update")
	listObjects = flag.Int("storagebench.list-objects", 10000, "objects the List benchmark lists")
	listPage    = flag.Int("storagebench.list-page", 500, "page size (limit) of the paginated List benchmark")
	watchers    = flag.Int("storagebench.watchers", 100, "concurrent watchers of the Watch benchmark")
	codecFormat = flag.String("storagebench.codec", "protobuf", "storage encoding of both backends: protobuf or json")
)

const watchEventTimeout = 30 * time.Second

// BenchmarkStorage runs every benchmark on every backend:
// BenchmarkStorage/<op>/backend=<pebble|etcd3>/<variant>.
func BenchmarkStorage(b *testing.B) {
	// Fail before any benchmark runs if etcd is missing.
	if _, err := EtcdBinary(); err != nil {
		b.Fatal(err)
	}
	b.Run("Create", benchCreate)
	b.Run("Get", benchGet)
	b.Run("Update", benchUpdate)
	b.Run("List", benchList)
	b.Run("Watch", benchWatch)
}

// concurrencies are the client counts of the point-operation benchmarks:
// one client, and the concurrent clients an API server has.
func concurrencies() []int {
	if *workers <= 1 {
		return []int{1}
	}
	return []int{1, *workers}
}

// benchCreate: b.N creates of new pods, by one client and by -storagebench.workers.
func benchCreate(b *testing.B) {
	forEachBackend(b, func(b *testing.B, s storage.Interface) {
		next := 0 // pod names stay distinct across the runs of the sub-benchmarks
		for _, w := range concurrencies() {
			b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
				base := next
				next += b.N
				pods := make([]*example.Pod, b.N)
				for i := range pods {
					pods[i] = newPod(base + i)
				}
				ctx := b.Context()
				b.ResetTimer()
				err := runOps(b.N, w, func(i int) error {
					_, _, key := podKey(base + i)
					if err := s.Create(ctx, key, pods[i], &example.Pod{}, 0); err != nil {
						return fmt.Errorf("creating %s: %w", key, err)
					}
					return nil
				})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				reportThroughput(b)
			})
		}
	})
}

// benchGet: b.N gets of existing pods (quorum reads: no resource version).
func benchGet(b *testing.B) {
	forEachBackend(b, func(b *testing.B, s storage.Interface) {
		n := *objects
		populate(b, s, n)
		for _, w := range concurrencies() {
			b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
				ctx := b.Context()
				b.ResetTimer()
				err := runOps(b.N, w, func(i int) error {
					_, name, key := podKey(i % n)
					out := &example.Pod{}
					if err := s.Get(ctx, key, storage.GetOptions{}, out); err != nil {
						return fmt.Errorf("getting %s: %w", key, err)
					}
					if out.Name != name {
						return fmt.Errorf("getting %s: got pod %q", key, out.Name)
					}
					return nil
				})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				reportThroughput(b)
			})
		}
	})
}

// benchUpdate: b.N GuaranteedUpdates, each changing an annotation of an
// existing pod (no cached object: each reads, then writes conditionally).
func benchUpdate(b *testing.B) {
	forEachBackend(b, func(b *testing.B, s storage.Interface) {
		n := *objects
		populate(b, s, n)
		var seq atomic.Int64 // annotation values stay distinct across runs
		for _, w := range concurrencies() {
			b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
				ctx := b.Context()
				b.ResetTimer()
				err := runOps(b.N, w, func(i int) error {
					_, _, key := podKey(i % n)
					value := strconv.FormatInt(seq.Add(1), 10)
					err := s.GuaranteedUpdate(ctx, key, &example.Pod{}, false, nil,
						func(input runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
							pod := input.(*example.Pod).DeepCopy()
							pod.Annotations["example.com/generation"] = value
							return pod, nil, nil
						}, nil)
					if err != nil {
						return fmt.Errorf("updating %s: %w", key, err)
					}
					return nil
				})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				reportThroughput(b)
			})
		}
	})
}

// benchList: b.N recursive lists of all -storagebench.list-objects pods of
// the resource prefix (quorum reads), in one response and paged.
func benchList(b *testing.B) {
	forEachBackend(b, func(b *testing.B, s storage.Interface) {
		n := *listObjects
		populate(b, s, n)
		for _, limit := range []int{0, *listPage} {
			name := "limit=none"
			if limit > 0 {
				name = fmt.Sprintf("limit=%d", limit)
			}
			b.Run(name, func(b *testing.B) {
				ctx := b.Context()
				b.ResetTimer()
				for range b.N {
					got, err := listAll(ctx, s, int64(limit))
					if err != nil {
						b.Fatal(err)
					}
					if got != n {
						b.Fatalf("listing %s: got %d pods, want %d", resourcePrefix, got, n)
					}
				}
				b.StopTimer()
				reportThroughput(b)
			})
		}
	})
}

// listAll lists the resource prefix, following continue tokens when limit
// is set, and returns how many pods it got.
func listAll(ctx context.Context, s storage.Interface, limit int64) (int, error) {
	total, pages := 0, 0
	pred := storage.Everything
	pred.Limit = limit
	for {
		list := &example.PodList{}
		opts := storage.ListOptions{Predicate: pred, Recursive: true}
		if err := s.GetList(ctx, resourcePrefix, opts, list); err != nil {
			return total, fmt.Errorf("listing %s (page %d, limit %d): %w", resourcePrefix, pages+1, limit, err)
		}
		total += len(list.Items)
		pages++
		if list.Continue == "" {
			return total, nil
		}
		if limit == 0 {
			return total, fmt.Errorf("listing %s without limit returned a continue token", resourcePrefix)
		}
		pred.Continue = list.Continue
	}
}

// benchWatch: -storagebench.watchers watches on the resource prefix; b.N
// times, create a pod and wait until every watcher has received its ADDED
// event. Reports the latency from just before the write to the last
// watcher's receipt (p50, p99) and the event rate.
func benchWatch(b *testing.B) {
	forEachBackend(b, func(b *testing.B, s storage.Interface) {
		next := 0
		b.Run(fmt.Sprintf("watchers=%d", *watchers), func(b *testing.B) {
			// Pod base is the warm-up event, base+1..base+b.N the timed ones.
			base := next
			next += b.N + 1
			pods := make([]*example.Pod, b.N+1)
			for i := range pods {
				pods[i] = newPod(base + i)
			}
			ctx, cancel := context.WithCancel(b.Context())
			defer cancel()
			recv, stop, err := startWatchers(ctx, s, *watchers)
			if err != nil {
				b.Fatal(err)
			}
			defer stop()

			timeout := time.NewTimer(watchEventTimeout)
			defer timeout.Stop()
			// event creates pod i and waits until every watcher has it.
			event := func(i int) error {
				_, name, key := podKey(base + i)
				timeout.Reset(watchEventTimeout)
				if err := s.Create(ctx, key, pods[i], &example.Pod{}, 0); err != nil {
					return fmt.Errorf("creating %s: %w", key, err)
				}
				for w := range *watchers {
					select {
					case r := <-recv:
						if r.err != nil {
							return r.err
						}
						if r.name != name {
							return fmt.Errorf("a watcher got pod %q, want %q", r.name, name)
						}
					case <-timeout.C:
						return fmt.Errorf("event for %s: only %d of %d watchers got it within %s", key, w, *watchers, watchEventTimeout)
					}
				}
				return nil
			}
			// Untimed: a first event once every watch is established, so
			// that no timed event waits for a watch to be set up.
			if err := event(0); err != nil {
				b.Fatalf("warm-up event: %v", err)
			}

			latencies := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 1; i <= b.N; i++ {
				start := time.Now()
				if err := event(i); err != nil {
					b.Fatal(err)
				}
				latencies = append(latencies, time.Since(start))
			}
			b.StopTimer()
			reportThroughput(b)
			slices.Sort(latencies)
			b.ReportMetric(float64(percentile(latencies, 0.50).Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(percentile(latencies, 0.99).Nanoseconds()), "p99-ns")
		})
	})
}

// watchResult is one event a watcher received: the pod's name, or why the
// event was not the ADDED event expected.
type watchResult struct {
	name string
	err  error
}

// startWatchers opens n recursive watches on the resource prefix from the
// current resource version; every event they receive is sent on the
// returned channel. stop ends the watches and waits for their goroutines.
func startWatchers(ctx context.Context, s storage.Interface, n int) (<-chan watchResult, func(), error) {
	rv, err := s.GetCurrentResourceVersion(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("getting the current resource version: %w", err)
	}
	opts := storage.ListOptions{
		ResourceVersion: strconv.FormatUint(rv, 10),
		Predicate:       storage.Everything,
		Recursive:       true,
	}
	recv := make(chan watchResult, n)
	var wg sync.WaitGroup
	var ws []watch.Interface
	stop := func() {
		for _, w := range ws {
			w.Stop()
		}
		wg.Wait()
	}
	for i := range n {
		w, err := s.Watch(ctx, resourcePrefix, opts)
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("starting watcher %d at resource version %d: %w", i, rv, err)
		}
		ws = append(ws, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range w.ResultChan() {
				var r watchResult
				switch ev.Type {
				case watch.Added:
					obj := ev.Object
					if wrapped, ok := obj.(interface{ GetObject() runtime.Object }); ok {
						// The watch cache sends objects wrapped for
						// encoding once per event (cacher.cachingObject).
						obj = wrapped.GetObject()
					}
					if pod, ok := obj.(*example.Pod); ok {
						r.name = pod.Name
					} else {
						r.err = fmt.Errorf("watcher %d: ADDED event of a %T", i, obj)
					}
				case watch.Error:
					r.err = fmt.Errorf("watcher %d: %w", i, apierrors.FromObject(ev.Object))
				default:
					r.err = fmt.Errorf("watcher %d: unexpected %s event", i, ev.Type)
				}
				select {
				case recv <- r:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	return recv, stop, nil
}

// percentile is the nearest-rank percentile p (0..1] of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p*float64(len(sorted))+0.999999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// reportThroughput reports operations per second of the timed part.
func reportThroughput(b *testing.B) {
	if secs := b.Elapsed().Seconds(); secs > 0 {
		b.ReportMetric(float64(b.N)/secs, "ops/s")
	}
}

// populate creates pods 0..n-1 with -storagebench.workers clients, untimed.
func populate(b *testing.B, s storage.Interface, n int) {
	b.Helper()
	ctx := b.Context()
	err := runOps(n, max(*workers, 1), func(i int) error {
		_, _, key := podKey(i)
		if err := s.Create(ctx, key, newPod(i), &example.Pod{}, 0); err != nil {
			return fmt.Errorf("creating %s: %w", key, err)
		}
		return nil
	})
	if err != nil {
		b.Fatalf("populating %d pods: %v", n, err)
	}
}

// runOps calls op(0..n-1) from `workers` goroutines, each taking the next
// index when it is done with one, and returns the first error (the other
// workers stop at their next operation).
func runOps(n, workers int, op func(i int) error) error {
	var (
		next     atomic.Int64
		failed   atomic.Bool
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
	)
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := op(i); err != nil {
					errOnce.Do(func() { firstErr = err })
					failed.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}
