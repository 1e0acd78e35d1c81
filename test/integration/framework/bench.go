package framework

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
