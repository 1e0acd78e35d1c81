package livelog

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTailRead(t *testing.T) {
	for _, tc := range []struct {
		name       string
		max        int
		writes     []string
		offset     int64
		wantOffset int64
		wantData   string
	}{
		{name: "from the start", max: 100, writes: []string{"a\n", "bb\n"}, offset: 0, wantOffset: 0, wantData: "a\nbb\n"},
		{name: "from an offset", max: 100, writes: []string{"a\n", "bb\n"}, offset: 2, wantOffset: 2, wantData: "bb\n"},
		{name: "at the end", max: 100, writes: []string{"a\n", "bb\n"}, offset: 5, wantOffset: 5, wantData: ""},
		{name: "past the end", max: 100, writes: []string{"a\n"}, offset: 50, wantOffset: 2, wantData: ""},
		{name: "nothing yet", max: 100, offset: 0, wantOffset: 0, wantData: ""},
		// 30 bytes in a tail of 20: the oldest lines go, at least half
		// the bound, up to a line's end.
		{name: "trimmed: the oldest lines gone", max: 20, writes: []string{"line-000\n", "line-001\n", "line-002\n", "line-003\n"},
			offset: 0, wantOffset: 18, wantData: "line-002\nline-003\n"},
		{name: "trimmed: an offset kept", max: 20, writes: []string{"line-000\n", "line-001\n", "line-002\n", "line-003\n"},
			offset: 27, wantOffset: 27, wantData: "line-003\n"},
		{name: "a line longer than the bound", max: 4, writes: []string{"0123456789\n", "ab\n"},
			offset: 0, wantOffset: 11, wantData: "ab\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tail := NewRegistry(tc.max).Start(Key{Kind: "BackupLog", Namespace: "ns", Name: "b"})
			for _, w := range tc.writes {
				if n, err := tail.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			c := tail.Read(tc.offset)
			if c.Offset != tc.wantOffset || string(c.Data) != tc.wantData || c.Done {
				t.Errorf("Read(%d) = offset %d, %q, done %v; want offset %d, %q", tc.offset, c.Offset, c.Data, c.Done, tc.wantOffset, tc.wantData)
			}
		})
	}
}

func TestRegistry(t *testing.T) {
	r := NewRegistry(0)
	k := Key{Kind: "BackupLog", Namespace: "ns", Name: "b"}
	first := r.Start(k)
	if r.Get(k) != first || r.Len() != 1 {
		t.Fatalf("a started tail is not found")
	}
	if r.Get(Key{Kind: "RestoreLog", Namespace: "ns", Name: "b"}) != nil {
		t.Error("a restore's log found under a backup's name")
	}
	second := r.Start(k) // the object made again under its name
	first.Close()
	if r.Get(k) != second {
		t.Error("the first run's end removed the second run's tail")
	}
	if _, err := first.Write([]byte("late\n")); err != nil || len(first.Read(0).Data) != 0 {
		t.Error("an ended tail took a write")
	}
	second.Close()
	if r.Get(k) != nil || r.Len() != 0 {
		t.Error("an ended run's tail is still registered")
	}

	var none *Registry
	tail := none.Start(k)
	if _, err := tail.Write([]byte("x\n")); err != nil || none.Get(k) != nil || none.Len() != 0 {
		t.Error("a nil registry keeps something")
	}
	tail.Close()
}

func TestTailFollow(t *testing.T) {
	k := Key{Kind: "BackupLog", Namespace: "ns", Name: "b"}
	t.Run("until the run ends", func(t *testing.T) {
		tail := NewRegistry(0).Start(k)
		tail.Write([]byte("one\n"))
		got := make(chan string)
		var began int64 = -1
		go func() {
			var b strings.Builder
			end, err := tail.Follow(context.Background(), 0, time.Hour, func(o int64) { began = o }, func(p []byte) error {
				b.Write(p)
				if b.String() == "one\n" {
					// Written while the reader waits.
					go func() { tail.Write([]byte("two\n")); tail.Close() }()
				}
				return nil
			})
			if err != nil || end != 8 {
				b.WriteString("(ended at the wrong offset or with an error)")
			}
			got <- b.String()
		}()
		if s := <-got; s != "one\ntwo\n" || began != 0 {
			t.Errorf("followed %q from %d, want the whole log from 0", s, began)
		}
	})
	t.Run("at most maxWait", func(t *testing.T) {
		tail := NewRegistry(0).Start(k)
		tail.Write([]byte("one\n"))
		end, err := tail.Follow(context.Background(), 2, time.Millisecond, func(int64) {}, func([]byte) error { return nil })
		if err != nil || end != 4 {
			t.Errorf("Follow ended at %d, %v; want 4", end, err)
		}
	})
	t.Run("until its context ends", func(t *testing.T) {
		tail := NewRegistry(0).Start(k)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if end, err := tail.Follow(ctx, 0, time.Hour, func(int64) {}, func([]byte) error { return nil }); err != nil || end != 0 {
			t.Errorf("Follow ended at %d, %v", end, err)
		}
	})
	t.Run("from lines no longer kept", func(t *testing.T) {
		tail := NewRegistry(10).Start(k)
		tail.Write([]byte("line-0\nline-1\nline-2\n"))
		tail.Close()
		var began int64
		var b strings.Builder
		if _, err := tail.Follow(context.Background(), 0, time.Hour, func(o int64) { began = o }, func(p []byte) error { b.Write(p); return nil }); err != nil {
			t.Fatal(err)
		}
		if began != 14 || b.String() != "line-2\n" {
			t.Errorf("followed %q from %d, want the kept line from 14", b.String(), began)
		}
	})
}

// TestFollowerBounds: followed logs are counted by user, by the namespace
// they are asked in (a tenant's many service accounts are one namespace)
// and in all; each bound refuses past it, saying which, and a release
// frees the place once.
func TestFollowerBounds(t *testing.T) {
	r := NewRegistry(0)
	r.MaxFollowers, r.MaxFollowersPerUser, r.MaxFollowersPerNamespace = 6, 2, 3
	follow := func(user, namespace string) (func(), error) { return r.Follow(user, namespace) }
	var held []func()
	for _, f := range []struct{ user, namespace string }{{"sa-1", "tenant-a"}, {"sa-2", "tenant-a"}, {"sa-3", "tenant-a"}} {
		release, err := follow(f.user, f.namespace)
		if err != nil {
			t.Fatalf("%s in %s: %v", f.user, f.namespace, err)
		}
		held = append(held, release)
	}
	if _, err := follow("sa-4", "tenant-a"); !errors.Is(err, ErrTooManyFollowers) || !strings.Contains(err.Error(), "in namespace tenant-a (at most 3)") {
		t.Errorf("a fourth account of the same tenant: %v, want refused by the namespace's bound", err)
	}
	bob1, err := follow("bob", "tenant-b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := follow("bob", "tenant-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := follow("bob", "tenant-c"); !errors.Is(err, ErrTooManyFollowers) || !strings.Contains(err.Error(), "by this user (at most 2)") {
		t.Errorf("a user's third: %v, want refused by the user's bound", err)
	}
	if _, err := follow("carol", "tenant-c"); err != nil {
		t.Fatal(err)
	}
	if _, err := follow("dave", "tenant-d"); !errors.Is(err, ErrTooManyFollowers) || !strings.Contains(err.Error(), "in all (at most 6)") {
		t.Errorf("the seventh in all: %v, want refused by the bound in all", err)
	}
	held[0]()
	held[0]()
	bob1()
	if got := r.Followers(); got != 4 {
		t.Errorf("%d followers after two releases (one released twice), want 4", got)
	}
	if release, err := follow("sa-4", "tenant-a"); err != nil {
		t.Errorf("the tenant's fourth account once one of its three left: %v", err)
	} else {
		release()
	}
}
