package kopiarepo

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/kopia/kopia/repo/object"
)

// TestPlanBlocks: which blocks an upload reads and which it takes from
// its base.
func TestPlanBlocks(t *testing.T) {
	const B = BlockSize
	id := func(s string) object.ID {
		t.Helper()
		oid, err := object.ParseID(s)
		if err != nil {
			t.Fatal(err)
		}
		return oid
	}
	a, b, c := id("Dabcdef0123456789abcdef0123456781"), id("Dabcdef0123456789abcdef0123456782"), id("Dabcdef0123456789abcdef0123456783")
	threeBlocks := []object.IndirectObjectEntry{{Start: 0, Length: B, Object: a}, {Start: B, Length: B, Object: b}, {Start: 2 * B, Length: B / 2, Object: c}}
	for _, tc := range []struct {
		name        string
		size        int64
		base        []object.IndirectObjectEntry
		changed     []Range
		incremental bool
		wantRead    []int64 // the blocks read, by start
	}{
		{name: "no base reads every block", size: 2*B + B/2, base: threeBlocks, wantRead: []int64{0, B, 2 * B}},
		{name: "nothing changed reads nothing", size: 2*B + B/2, base: threeBlocks, incremental: true},
		{name: "a change inside one block reads it", size: 2*B + B/2, base: threeBlocks, incremental: true,
			changed: []Range{{Offset: B + 4096, Length: 4096}}, wantRead: []int64{B}},
		{name: "a change across a boundary reads both blocks", size: 2*B + B/2, base: threeBlocks, incremental: true,
			changed: []Range{{Offset: B - 4096, Length: 8192}}, wantRead: []int64{0, B}},
		{name: "a grown volume reads its new blocks and the old short one", size: 4 * B, base: threeBlocks, incremental: true,
			wantRead: []int64{2 * B, 3 * B}},
		{name: "ranges past the end or empty are ignored", size: 2*B + B/2, base: threeBlocks, incremental: true,
			changed: []Range{{Offset: 10 * B, Length: B}, {Offset: 0, Length: 0}}},
		{name: "a base of another layout is read whole", size: 2 * B, incremental: true,
			base:     []object.IndirectObjectEntry{{Start: 0, Length: 1234567, Object: a}, {Start: 1234567, Length: 2*B - 1234567, Object: b}},
			wantRead: []int64{0, B}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := planBlocks(tc.size, tc.base, tc.changed, tc.incremental)
			var read []int64
			var total int64
			for i, p := range plan {
				if p.Start != int64(i)*B {
					t.Errorf("block %d starts at %d", i, p.Start)
				}
				total += p.Length
				if !p.reuse {
					read = append(read, p.Start)
				} else if p.Object != tc.base[i].Object {
					t.Errorf("block %d reuses %v, want the base's %v", i, p.Object, tc.base[i].Object)
				}
			}
			if total != tc.size {
				t.Errorf("the blocks hold %d bytes, want %d", total, tc.size)
			}
			if !equalInts(read, tc.wantRead) {
				t.Errorf("read blocks at %v, want %v", read, tc.wantRead)
			}
		})
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestBlockVolume: a block volume's device uploaded whole, changed in
// three places and uploaded by its changed ranges (only the blocks they
// touch read, the rest taken from the first snapshot), each snapshot
// restored byte for byte; a base that is no block volume's is read in
// full, with the reason; a cancelled upload saves nothing.
func TestBlockVolume(t *testing.T) {
	ctx := context.Background()
	r := newRepository(t, filepath.Join(t.TempDir(), Prefix("", "shop")))
	var err error
	dir := t.TempDir()
	device := filepath.Join(dir, "device")
	const size = 16*BlockSize + 12345
	first := make([]byte, size)
	if _, err := rand.Read(first); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(device, first, 0o600); err != nil {
		t.Fatal(err)
	}
	source := SourcePath("shop", "disk")

	var full BlockResult
	t.Run("first upload reads the whole device", func(t *testing.T) {
		full, err = r.UploadBlock(ctx, BlockUpload{Device: device, Source: source, Tags: map[string]string{"backup": "b1"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if full.TotalBytes != size || full.HashedBytes != size || full.ReusedBytes != 0 {
			t.Errorf("total %d, read %d, reused %d; want %d, %d, 0", full.TotalBytes, full.HashedBytes, full.ReusedBytes, size, size)
		}
		if full.UploadedBytes < size {
			t.Errorf("%d bytes written to the storage, fewer than the volume's %d random bytes", full.UploadedBytes, size)
		}
		tags, err := r.TagsOf(ctx, full.SnapshotID)
		if err != nil || tags["backup"] != "b1" || tags[RequesterTag] != Requester {
			t.Errorf("tags %v (%v)", tags, err)
		}
	})

	second := bytes.Clone(first)
	changed := []Range{{Offset: 100, Length: 4096}, {Offset: 5*BlockSize + 7, Length: 10}, {Offset: size - 20, Length: 20}}
	for _, c := range changed {
		if _, err := rand.Read(second[c.Offset : c.Offset+c.Length]); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(device, second, 0o600); err != nil {
		t.Fatal(err)
	}
	var incr BlockResult
	t.Run("an upload by changed ranges reads only their blocks", func(t *testing.T) {
		incr, err = r.UploadBlock(ctx, BlockUpload{Device: device, Source: source, Base: full.SnapshotID, Changed: changed}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Blocks 0, 5 and the short last one.
		wantRead := int64(2*BlockSize + 12345)
		if incr.HashedBytes != wantRead || incr.ReusedBytes != size-wantRead || incr.FullReadReason != "" {
			t.Errorf("read %d, reused %d (%q); want %d, %d", incr.HashedBytes, incr.ReusedBytes, incr.FullReadReason, wantRead, size-wantRead)
		}
		if incr.UploadedBytes > wantRead+64<<10 {
			t.Errorf("%d bytes written to the storage for %d bytes read", incr.UploadedBytes, wantRead)
		}
	})

	t.Run("each snapshot restores byte for byte", func(t *testing.T) {
		for _, tc := range []struct {
			id   string
			want []byte
		}{{full.SnapshotID, first}, {incr.SnapshotID, second}} {
			target := filepath.Join(t.TempDir(), "target")
			if err := os.WriteFile(target, make([]byte, size), 0o600); err != nil {
				t.Fatal(err)
			}
			n, err := r.RestoreBlock(ctx, tc.id, target, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(target)
			if err != nil {
				t.Fatal(err)
			}
			if n != size || !bytes.Equal(got, tc.want) {
				t.Errorf("snapshot %s: wrote %d bytes, equal %v", tc.id, n, bytes.Equal(got, tc.want))
			}
		}
	})

	t.Run("a base that is no block volume's is read in full", func(t *testing.T) {
		files := t.TempDir()
		writeTree(t, files, map[string][]byte{"a.txt": []byte("not a block volume")})
		other, err := r.Upload(ctx, files, source, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.UploadBlock(ctx, BlockUpload{Device: device, Source: source, Base: other.SnapshotID, Changed: changed}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.HashedBytes != size || got.FullReadReason == "" {
			t.Errorf("read %d bytes (%q), want the whole %d with a reason", got.HashedBytes, got.FullReadReason, size)
		}
		t.Logf("reason: %s", got.FullReadReason)
	})

	t.Run("a cancelled upload saves nothing", func(t *testing.T) {
		before, err := r.Snapshots(ctx, source)
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		_, err = r.UploadBlock(cctx, BlockUpload{Device: device, Source: source}, func(done, _ int64) {
			if done > 0 {
				cancel()
			}
		})
		cancel()
		if !errors.Is(err, ErrCanceled) {
			t.Fatalf("err = %v, want ErrCanceled", err)
		}
		after, err := r.Snapshots(ctx, source)
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != len(before) {
			t.Errorf("%d snapshots after the cancelled upload, %d before", len(after), len(before))
		}
	})
}
