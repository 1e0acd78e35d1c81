package pebble

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestWALFill: a new WAL file is zero-filled a chunk ahead of its end, its
// records land where they would without it; other files are left alone.
func TestWALFill(t *testing.T) {
	dir := t.TempDir()
	fs := newWALFillFS(vfs.Default)
	wal := filepath.Join(dir, "000001.log")
	f, err := fs.Create(wal, walCategory)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i, n := range []int{100, walFillChunk - 100, 1, walFillChunk + 5, 7} {
		p := bytes.Repeat([]byte{byte(i + 1)}, n)
		if _, err := f.Write(p); err != nil {
			t.Fatal(err)
		}
		want = append(want, p...)
		fi, err := os.Stat(wal)
		if err != nil {
			t.Fatal(err)
		}
		// The file always ends on a chunk boundary at or past the data.
		if size := fi.Size(); size < int64(len(want)) || size%walFillChunk != 0 {
			t.Fatalf("after %d bytes the file is %d bytes, want the next multiple of %d", len(want), size, walFillChunk)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(wal)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:len(want)], want) {
		t.Fatal("the records were not written where they belong")
	}
	if tail := got[len(want):]; len(tail) == 0 || !bytes.Equal(tail, make([]byte, len(tail))) {
		t.Fatalf("the %d bytes after the records are not zeros", len(tail))
	}

	other := filepath.Join(dir, "000002.sst")
	g, err := fs.Create(other, "pebble-table")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Write([]byte("table")); err != nil {
		t.Fatal(err)
	}
	_ = g.Close()
	if fi, err := os.Stat(other); err != nil || fi.Size() != 5 {
		t.Errorf("a table file was changed: %v %v", fi, err)
	}
}
