package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"runtime"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/archive"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// MaxManifestSize bounds the manifest read.
const MaxManifestSize = objectstore.MaxManifestSize

// Report is what a verification found.
type Report struct {
	// Objects and Bytes are the objects read back and their bytes.
	Objects int
	Bytes   int64
	// Items are the tarball's items decoded.
	Items int
	// VMDiskChains are the VM disk chains checked.
	VMDiskChains int
	// NoManifest: the backup has no manifest; its objects were read and
	// its tarball decoded, but no byte could be checked against what was
	// written.
	NoManifest bool
	// Problems are the first problems (velerov1.MaxVerificationProblems);
	// ProblemCount counts them all.
	Problems     []string
	ProblemCount int
}

// Problem records one problem.
func (r *Report) Problem(format string, args ...any) {
	r.ProblemCount++
	if len(r.Problems) < velerov1.MaxVerificationProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// Objects reads back every object of a backup's directory in store and
// checks it against the backup's manifest (objectstore.Manifest): each
// object the manifest lists is there, of its size and sha256 (read through
// the store: an encrypted location's objects are decrypted, and a changed
// byte fails age's authentication); no other object is in the directory;
// the tarball is a gzipped tar whose every item decodes as a JSON object
// of the name its path gives. A backup without a manifest has its objects
// read and its tarball decoded (r.NoManifest). Problems go into r; an error is returned
// only when the store could not be listed or ctx ended (the verification
// did not happen).
func Objects(ctx context.Context, store objectstore.Store, layout objectstore.Layout, backup string, r *Report) error {
	dir := layout.BackupDir(backup)
	keys, err := store.List(ctx, dir)
	if err != nil {
		return fmt.Errorf("listing backup %s: %w", backup, err)
	}
	tarball := backup + ".tar.gz"
	manifest, err := objectstore.GetManifest(ctx, store, layout, backup, MaxManifestSize)
	if errors.Is(err, objectstore.ErrNoManifest) {
		// Made before Backstop wrote manifests, or by Velero: what can be
		// checked without one is.
		r.NoManifest = true
		for _, key := range keys {
			name := strings.TrimPrefix(key, dir)
			if strings.Contains(name, "/") {
				continue
			}
			if err := checkObject(ctx, store, key, nil, name == tarball, r); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				r.Problem("%s: %v", name, err)
			}
		}
		return nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.Problem("%s: %v", objectstore.ManifestFile, err)
		return nil
	}
	listed := map[string]objectstore.ManifestObject{}
	for _, o := range manifest.Objects {
		listed[o.Name] = o
	}
	for _, key := range keys {
		name := strings.TrimPrefix(key, dir)
		if _, ok := listed[name]; !ok && name != objectstore.ManifestFile && !strings.Contains(name, "/") {
			r.Problem("%s: not in the manifest (written after the backup completed, or not by Backstop)", name)
		}
	}
	for _, o := range manifest.Objects {
		if strings.Contains(o.Name, "/") || o.Name == "" {
			r.Problem("%s: the manifest names an object outside the backup's directory", o.Name)
			continue
		}
		if err := checkObject(ctx, store, dir+o.Name, &o, o.Name == tarball, r); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.Problem("%s: %v", o.Name, err)
		}
	}
	return nil
}

// checkObject reads one object whole, decoding it as a tarball when it is
// one, and compares its size and sha256 with the manifest's (want; nil
// without a manifest). The work is
// a pipeline, so that a verification runs at the pace of its slowest
// stage rather than of their sum: the object is read and hashed ahead
// (readAhead), the tarball is unpacked where it is consumed, and its items
// are decoded on another goroutine.
func checkObject(ctx context.Context, store objectstore.Store, key string, want *objectstore.ManifestObject, tarball bool, r *Report) error {
	rc, err := store.Get(ctx, key)
	if errors.Is(err, objectstore.ErrNotFound) {
		return errors.New("missing")
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	in := newReadAhead(rc)
	defer in.stop()
	var decodeErr error
	if tarball {
		decodeErr = decodeItems(in, r)
	}
	// The rest (all of it for other objects; a tarball's gzip trailer, or
	// what follows where decoding stopped) is hashed too.
	if _, err := io.Copy(io.Discard, in); err != nil {
		return fmt.Errorf("reading: %w", err)
	}
	n, sum := in.sum()
	r.Objects++
	r.Bytes += n
	switch {
	case want == nil:
		return decodeErr
	case n != want.Size:
		return fmt.Errorf("%d bytes, the manifest says %d", n, want.Size)
	case sum != want.SHA256:
		return fmt.Errorf("sha256 %s, the manifest says %s", sum, want.SHA256)
	case decodeErr != nil:
		return decodeErr
	}
	return nil
}

// maxInFlight bounds the bytes of the items read and not yet decoded.
const maxInFlight = 2 * archive.MaxItemSize

// weight is an item's share of maxInFlight.
func weight(item *archive.Item) int64 { return max(1, int64(len(item.Data))) }

// decoders is how many goroutines decode a tarball's items.
var decoders = max(1, runtime.GOMAXPROCS(0))

// decodeItems reads a tarball, its items decoded by other goroutines. Of
// the items that do not decode, the first in the tarball is the error,
// whichever goroutine saw it first.
func decodeItems(in io.Reader, r *Report) error {
	tr, err := archive.NewReader(in)
	if err != nil {
		return err
	}
	defer tr.Close()
	var skipped []string
	tr.Skipped = func(name, why string) { skipped = append(skipped, fmt.Sprintf("%q (%s)", name, why)) }
	// An item and its place in the tarball; a decoder's first failure and
	// the place of its item.
	type numbered struct {
		item  *archive.Item
		index int
	}
	type failure struct {
		err   error
		index int
	}
	items := make(chan numbered, 64)
	decoded := make(chan failure, decoders)
	var count atomic.Int64
	// The items in flight hold at most maxInFlight bytes (items up to
	// archive.MaxItemSize each: a tarball of large ones does not make a
	// verification hold 64 of them).
	inFlight := semaphore.NewWeighted(maxInFlight)
	for range decoders {
		go func() {
			// A decoder gets its items in the tarball's order: after its
			// first failure the rest of its items come later, and every
			// item before the earliest failure was decoded by one of them.
			var first failure
			for n := range items {
				if first.err == nil {
					if err := decodeItem(n.item); err != nil {
						first = failure{err: err, index: n.index}
					} else {
						count.Add(1)
					}
				}
				// Drained after an error, so that the reader never blocks.
				inFlight.Release(weight(n.item))
			}
			decoded <- first
		}()
	}
	wait := func() error {
		close(items)
		var earliest failure
		for range decoders {
			if f := <-decoded; f.err != nil && (earliest.err == nil || f.index < earliest.index) {
				earliest = f
			}
		}
		r.Items += int(count.Load())
		return earliest.err
	}
	for index := 0; ; index++ {
		item, err := tr.Next()
		if err != nil {
			if decodeErr := wait(); decodeErr != nil {
				return decodeErr
			}
			if err != io.EOF {
				return err
			}
			if err := tr.Finish(); err != nil {
				return err
			}
			break
		}
		if err := inFlight.Acquire(context.Background(), weight(item)); err != nil {
			return err
		}
		items <- numbered{item: item, index: index}
	}
	if len(skipped) > 0 {
		return fmt.Errorf("entries that are no items: %s", strings.Join(skipped, ", "))
	}
	if tr.FormatVersion == "" {
		return errors.New("no metadata/version: not a backup tarball")
	}
	return nil
}

// decodeItem checks that an item is a JSON object of the name and
// namespace its path gives.
func decodeItem(item *archive.Item) error {
	var obj struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	where := item.GroupResource + " " + item.Name
	if item.Namespace != "" {
		where = item.GroupResource + " " + item.Namespace + "/" + item.Name
	}
	if err := json.Unmarshal(item.Data, &obj); err != nil {
		return fmt.Errorf("item %s: %w", where, err)
	}
	switch {
	case obj.APIVersion == "" || obj.Kind == "":
		return fmt.Errorf("item %s: no apiVersion or kind", where)
	case obj.Metadata.Name != item.Name:
		return fmt.Errorf("item %s: its metadata names %q", where, obj.Metadata.Name)
	case item.Namespace != "" && obj.Metadata.Namespace != item.Namespace:
		return fmt.Errorf("item %s: its metadata's namespace is %q", where, obj.Metadata.Namespace)
	}
	return nil
}

// readAhead reads an object on its own goroutine, hashing and counting
// it, a few chunks ahead of its consumer.
type readAhead struct {
	chunks <-chan []byte
	free   chan []byte
	done   chan struct{}
	// cur is what is left of chunk, the chunk being consumed.
	cur, chunk []byte
	// Set by the reading goroutine before chunks is closed.
	err error
	n   int64
	h   hash.Hash
}

const (
	readAheadChunk  = 256 << 10
	readAheadChunks = 8
)

func newReadAhead(src io.Reader) *readAhead {
	chunks := make(chan []byte, readAheadChunks)
	a := &readAhead{chunks: chunks, free: make(chan []byte, readAheadChunks+2), done: make(chan struct{}), h: sha256.New()}
	for range readAheadChunks + 2 {
		a.free <- make([]byte, readAheadChunk)
	}
	go func() {
		defer close(chunks)
		for {
			var buf []byte
			select {
			case buf = <-a.free:
			case <-a.done:
				return
			}
			n, err := io.ReadFull(src, buf)
			if n > 0 {
				a.h.Write(buf[:n])
				a.n += int64(n)
				select {
				case chunks <- buf[:n]:
				case <-a.done:
					return
				}
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return
			}
			if err != nil {
				a.err = err
				return
			}
		}
	}()
	return a
}

func (a *readAhead) Read(p []byte) (int, error) {
	for len(a.cur) == 0 {
		if a.chunk != nil {
			a.free <- a.chunk[:cap(a.chunk)]
			a.chunk = nil
		}
		chunk, ok := <-a.chunks
		if !ok {
			if a.err != nil {
				return 0, a.err
			}
			return 0, io.EOF
		}
		a.cur, a.chunk = chunk, chunk
	}
	n := copy(p, a.cur)
	a.cur = a.cur[n:]
	return n, nil
}

// sum is the size and sha256 of what was read; only once Read has
// returned io.EOF.
func (a *readAhead) sum() (int64, string) { return a.n, hex.EncodeToString(a.h.Sum(nil)) }

// stop ends the reading goroutine (the object was not read to its end).
func (a *readAhead) stop() {
	close(a.done)
	for range a.chunks {
	}
}
