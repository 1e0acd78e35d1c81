package pebble

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
)

// TestKeyIndexCounts checks counts from the key index against counts made by
// scanning the database, at the index's own revision and, corrected by the
// log, at older and newer revisions than an index snapshot.
func TestKeyIndexCounts(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	ctx := context.Background()
	rng := rand.New(rand.NewSource(1))
	key := func(i int) string { return fmt.Sprintf("/registry/things/ns-%d/thing-%03d", i%3, i) }
	ranges := [][2]string{
		{"/registry/things/", prefixEnd("/registry/things/")},
		{"/registry/things/ns-1/", prefixEnd("/registry/things/ns-1/")},
		{"/registry/things/ns-2/thing-050", prefixEnd("/registry/things/")},
		{"/registry/other/", prefixEnd("/registry/other/")},
	}
	// scanCount counts by reading the database at rev (the overlay path).
	scanCount := func(start, end string, rev int64) int64 {
		t.Helper()
		res, err := db.Range(ctx, start, end, rangeOptions{rev: rev, keysOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		return int64(len(res.kvs))
	}
	// step makes 40 random writes: creates, updates, deletes.
	step := func() {
		t.Helper()
		for range 40 {
			k := key(rng.Intn(120))
			cur, err := db.getCurrent(db.pdb, k)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case cur == nil:
				_, err = db.write(ctx, k, []byte("v"), false, 0)
			case rng.Intn(2) == 0:
				_, err = db.write(ctx, k, nil, true, cur.modRev)
			default:
				_, err = db.write(ctx, k, []byte(fmt.Sprint(rng.Int())), false, cur.modRev)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	for round := range 10 {
		step()
		oldTree, oldRev := db.index.snapshot()
		step()
		newTree, newRev := db.index.snapshot()
		if newRev != db.Rev() {
			t.Fatalf("round %d: index at revision %d, database at %d", round, newRev, db.Rev())
		}
		for _, r := range ranges {
			checks := []struct {
				name     string
				got      func() (int64, error)
				wantAtRv int64
			}{
				{"index now", func() (int64, error) { return db.countAt(r[0], r[1], newRev) }, newRev},
				{"newer index, older revision", func() (int64, error) { return db.countFrom(newTree, newRev, r[0], r[1], oldRev) }, oldRev},
				{"older index, newer revision", func() (int64, error) { return db.countFrom(oldTree, oldRev, r[0], r[1], newRev) }, newRev},
			}
			for _, c := range checks {
				got, err := c.got()
				if err != nil {
					t.Fatalf("round %d, %s, range %q: %v", round, c.name, r[0], err)
				}
				if want := scanCount(r[0], r[1], c.wantAtRv); got != want {
					t.Errorf("round %d, %s, range %q at revision %d: counted %d, the database has %d", round, c.name, r[0], c.wantAtRv, got, want)
				}
			}
		}
	}

	// The index is rebuilt when the database is opened again.
	before, beforeRev := db.index.snapshot()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	after, afterRev := db.index.snapshot()
	if afterRev != beforeRev || after.Len() != before.Len() {
		t.Fatalf("reopened index: %d keys at revision %d, want %d keys at %d", after.Len(), afterRev, before.Len(), beforeRev)
	}
	before.Ascend(func(e indexEntry) bool {
		if got, ok := after.Get(e); !ok || got.modRev != e.modRev {
			t.Errorf("reopened index: key %q at revision %d (present: %v), want %d", e.key, got.modRev, ok, e.modRev)
		}
		return true
	})
}
