package pebble

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

func openDB(t *testing.T) *DB {
	t.Helper()
	d, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// valueAt reads key at rev (0: now); "" when it does not exist.
func valueAt(t *testing.T, d *DB, key string, rev int64) (string, error) {
	t.Helper()
	res, err := d.Range(context.Background(), key, "", rangeOptions{rev: rev})
	if err != nil || len(res.kvs) == 0 {
		return "", err
	}
	return string(res.kvs[0].value), nil
}

// TestWriteAndRead: conditional writes take one revision each and refuse a
// stale expectation with the current value; reads at older revisions see
// the values of then, deletes included.
func TestWriteAndRead(t *testing.T) {
	d, ctx := openDB(t), context.Background()
	created, err := d.write(ctx, "/a", []byte("1"), false, 0)
	if err != nil || !created.succeeded {
		t.Fatalf("create: %+v %v", created, err)
	}
	if again, err := d.write(ctx, "/a", []byte("x"), false, 0); err != nil || again.succeeded || again.current == nil || again.current.modRev != created.rev {
		t.Fatalf("second create of /a: %+v %v, want refused with the current value", again, err)
	}
	updated, err := d.write(ctx, "/a", []byte("2"), false, created.rev)
	if err != nil || !updated.succeeded || updated.rev <= created.rev {
		t.Fatalf("update: %+v %v", updated, err)
	}
	if stale, err := d.write(ctx, "/a", []byte("y"), false, created.rev); err != nil || stale.succeeded {
		t.Fatalf("update expecting an old revision: %+v %v, want refused", stale, err)
	}
	deleted, err := d.write(ctx, "/a", nil, true, updated.rev)
	if err != nil || !deleted.succeeded {
		t.Fatalf("delete: %+v %v", deleted, err)
	}
	for _, tc := range []struct {
		rev  int64
		want string
	}{{created.rev, "1"}, {updated.rev, "2"}, {deleted.rev, ""}, {0, ""}} {
		if got, err := valueAt(t, d, "/a", tc.rev); err != nil || got != tc.want {
			t.Errorf("/a at revision %d: %q %v, want %q", tc.rev, got, err, tc.want)
		}
	}
	if d.Rev() != deleted.rev {
		t.Errorf("Rev() = %d, want the last write's %d", d.Rev(), deleted.rev)
	}
}

// TestCompact: the log up to a revision goes; reads before it fail with
// ErrCompacted, a compaction to the future is refused and one to the past
// does nothing.
func TestCompact(t *testing.T) {
	d, ctx := openDB(t), context.Background()
	first, err := d.write(ctx, "/a", []byte("1"), false, 0)
	if err != nil {
		t.Fatal(err)
	}
	second, err := d.write(ctx, "/a", []byte("2"), false, first.rev)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Compact(second.rev); err != nil {
		t.Fatal(err)
	}
	if d.CompactedRev() != second.rev {
		t.Errorf("CompactedRev() = %d, want %d", d.CompactedRev(), second.rev)
	}
	if _, err := valueAt(t, d, "/a", first.rev); !errors.Is(err, ErrCompacted) {
		t.Errorf("read below the compaction: %v, want ErrCompacted", err)
	}
	if got, err := valueAt(t, d, "/a", 0); err != nil || got != "2" {
		t.Errorf("/a now: %q %v", got, err)
	}
	if err := d.Compact(d.Rev() + 100); !errors.Is(err, ErrFutureRev) {
		t.Errorf("compacting to the future: %v, want ErrFutureRev", err)
	}
	if err := d.Compact(first.rev); err != nil || d.CompactedRev() != second.rev {
		t.Errorf("compacting to the past: %v, compacted %d, want a no-op at %d", err, d.CompactedRev(), second.rev)
	}
}

// TestTTL: a key written with a time to live is deleted by the reaper once
// it expires (a write, in the log like any other); a ttl shorter than etcd's
// minimum lease is raised to it.
func TestTTL(t *testing.T) {
	d, ctx := openDB(t), context.Background()
	written := time.Now()
	if _, err := d.writeTTL(ctx, "/lease", []byte("v"), false, 0, time.Second, nil); err != nil {
		t.Fatal(err)
	}
	if next, err := d.nextExpiry(); err != nil || time.Unix(0, next).Sub(written) < MinTTL {
		t.Errorf("a ttl of 1 s expires at %v after the write (%v), want at least MinTTL (%v)", time.Unix(0, next).Sub(written), err, MinTTL)
	}
	if got, err := valueAt(t, d, "/lease", 0); err != nil || got != "v" {
		t.Fatalf("/lease before it expires: %q %v", got, err)
	}
	before := d.Rev()
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got, err := valueAt(t, d, "/lease", 0)
		return got == "" && err == nil, err
	}); err != nil {
		t.Fatalf("/lease not reaped: %v", err)
	}
	if d.Rev() <= before {
		t.Errorf("the reaper's delete took no revision (%d, then %d)", before, d.Rev())
	}
}

// TestReadsRacingClose: reads of every kind that run while the database
// closes end with ErrClosed (or their answer), never a read of a closed
// Pebble, which panics.
func TestReadsRacingClose(t *testing.T) {
	reads := map[string]func(ctx context.Context, d *DB) error{
		"get": func(ctx context.Context, d *DB) error {
			_, err := d.Range(ctx, "/k/1", "", rangeOptions{})
			return err
		},
		"range": func(ctx context.Context, d *DB) error {
			_, err := d.Range(ctx, "/k/", "/k0", rangeOptions{})
			return err
		},
		"range at an old revision": func(ctx context.Context, d *DB) error {
			_, err := d.Range(ctx, "/k/", "/k0", rangeOptions{rev: 2})
			return err
		},
		"count": func(ctx context.Context, d *DB) error {
			_, err := d.Range(ctx, "/k/", "/k0", rangeOptions{countOnly: true})
			return err
		},
		"log events": func(ctx context.Context, d *DB) error {
			_, err := d.readEvents(1, d.Rev(), 100)
			return err
		},
	}
	for name, read := range reads {
		t.Run(name, func(t *testing.T) {
			for round := 0; round < 20; round++ {
				// RecentEvents 1: the log is read from Pebble, not memory.
				d, err := Open(Options{Dir: t.TempDir(), RecentEvents: 1})
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				for i := 0; i < 10; i++ {
					if _, err := d.write(ctx, fmt.Sprintf("/k/%d", i), []byte("v"), false, -1); err != nil {
						t.Fatal(err)
					}
				}
				var wg sync.WaitGroup
				errs := make(chan error, 4*200)
				for g := 0; g < 4; g++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := 0; i < 200; i++ {
							if err := read(ctx, d); err != nil {
								errs <- err
								return
							}
						}
					}()
				}
				if err := d.Close(); err != nil {
					t.Fatal(err)
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if !errors.Is(err, ErrClosed) {
						t.Fatalf("round %d: a read racing Close: %v, want ErrClosed", round, err)
					}
				}
			}
		})
	}
}

// TestStoredValues: the current record of each key asked for, with its
// modification revision, in the order asked; keys that do not exist, or
// no longer do, are skipped; a key's prefix is not the key.
func TestStoredValues(t *testing.T) {
	d, ctx := openDB(t), context.Background()
	revs := map[string]int64{}
	for _, k := range []string{"/r/a", "/r/b", "/r/c", "/r/bb"} {
		res, err := d.write(ctx, k, []byte("v"+k), false, 0)
		if err != nil || !res.succeeded {
			t.Fatalf("create %s: %+v %v", k, res, err)
		}
		revs[k] = res.rev
	}
	updated, err := d.write(ctx, "/r/a", []byte("v2"), false, revs["/r/a"])
	if err != nil || !updated.succeeded {
		t.Fatalf("update: %+v %v", updated, err)
	}
	if res, err := d.write(ctx, "/r/c", nil, true, revs["/r/c"]); err != nil || !res.succeeded {
		t.Fatalf("delete: %+v %v", res, err)
	}
	var got []string
	keys := []string{"/r/bb", "/r/a", "/r/c", "/r/b", "/r/missing", "/r/"}
	err = d.StoredValues(keys, func(i int, modRev int64, value []byte) error {
		got = append(got, fmt.Sprintf("%s@%d=%s", keys[i], modRev, value))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("/r/bb@%d=v/r/bb", revs["/r/bb"]),
		fmt.Sprintf("/r/a@%d=v2", updated.rev),
		fmt.Sprintf("/r/b@%d=v/r/b", revs["/r/b"]),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("read %v, want %v", got, want)
	}
	stop := errors.New("stop")
	if err := d.StoredValues(keys, func(int, int64, []byte) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("an error of the callback: %v, want it returned", err)
	}
}
