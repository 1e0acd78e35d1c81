package archive

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// Item is one resource file of a tarball.
type Item struct {
	// GroupResource is "<resource>.<group>", or "<resource>" for the core group.
	GroupResource string
	// Version is the API version of a versioned copy ("v1"), "" for the
	// unversioned one.
	Version   string
	Preferred bool
	Namespace string // "" for cluster-scoped items
	Name      string
	Data      []byte
}

// Reader reads a backup tarball entry by entry. A tarball is input from a
// bucket, which others than the server may write: entries that are not
// regular files, names that are absolute or hold "..", "." or NUL, and an
// item path seen before are skipped and reported (Skipped); Limits bound
// what one read may cost.
type Reader struct {
	gz *gzip.Reader
	tr *tar.Reader
	// FormatVersion is metadata/version once read ("" before).
	FormatVersion string
	maxItem       int64
	// Limits bound the read (zero fields: no bound).
	Limits Limits
	// Skipped, when set, is told of each entry skipped and why.
	Skipped func(name, why string)

	entries, bytes int64
	seen           map[string]bool
}

// Limits bound one read of a tarball.
type Limits struct {
	// Entries is the most entries (files, directories, anything).
	Entries int64
	// Bytes is the most bytes of entries, uncompressed: a gzip bomb ends
	// here.
	Bytes int64
}

// ErrLimit is the error of a tarball past its Limits.
var ErrLimit = errors.New("archive: past its limit")

// MaxItemSize bounds one item file (the API server's own limit on a
// request body is 3 MiB; this leaves room).
const MaxItemSize = 16 << 20

// NewReader opens a gzipped tarball.
func NewReader(r io.Reader) (*Reader, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("archive: not a gzip stream: %w", err)
	}
	return &Reader{gz: gz, tr: tar.NewReader(gz), maxItem: MaxItemSize, seen: map[string]bool{}}, nil
}

func (r *Reader) skip(name, why string) {
	if r.Skipped != nil {
		r.Skipped(name, why)
	}
}

// badName says why an entry's name cannot be an item's, "" when it can.
func badName(name string) string {
	switch {
	case strings.ContainsRune(name, 0):
		return "a NUL in its name"
	case strings.HasPrefix(name, "/"):
		return "an absolute name"
	}
	for _, part := range strings.Split(strings.TrimPrefix(name, "./"), "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Sprintf("a name with an element %q", part)
		}
	}
	return ""
}

// Next returns the next item; io.EOF at the end. Files other than items
// (metadata) are consumed on the way.
func (r *Reader) Next() (*Item, error) {
	for {
		h, err := r.tr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("archive: %w", err)
		}
		r.entries++
		if r.Limits.Entries > 0 && r.entries > r.Limits.Entries {
			return nil, fmt.Errorf("%w: more than %d entries", ErrLimit, r.Limits.Entries)
		}
		if h.Size > 0 {
			r.bytes += h.Size
		}
		if r.Limits.Bytes > 0 && r.bytes > r.Limits.Bytes {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrLimit, r.Limits.Bytes)
		}
		if h.Typeflag == tar.TypeDir {
			continue
		}
		if h.Typeflag != tar.TypeReg {
			r.skip(h.Name, fmt.Sprintf("not a regular file (type %q)", string(h.Typeflag)))
			continue
		}
		if why := badName(h.Name); why != "" {
			r.skip(h.Name, why)
			continue
		}
		if h.Size > r.maxItem {
			return nil, fmt.Errorf("archive: %s is %d bytes, more than the %d an item may have", h.Name, h.Size, r.maxItem)
		}
		data, err := io.ReadAll(io.LimitReader(r.tr, h.Size))
		if err != nil {
			return nil, fmt.Errorf("archive: reading %s: %w", h.Name, err)
		}
		if h.Name == MetadataDir+"/version" {
			r.FormatVersion = strings.TrimSpace(string(data))
			continue
		}
		item, ok := ParseItemPath(h.Name)
		if !ok {
			continue
		}
		if key := strings.TrimPrefix(h.Name, "./"); r.seen[key] {
			r.skip(h.Name, "an item seen before in the tarball")
			continue
		} else {
			r.seen[key] = true
		}
		item.Data = data
		return item, nil
	}
}

// Finish reads what follows the tar stream to the gzip stream's end, where
// gzip checks its CRC-32 and size: a tarball read whole by Next and then
// Finish was read as it was written.
func (r *Reader) Finish() error {
	if _, err := io.Copy(io.Discard, r.gz); err != nil {
		return fmt.Errorf("archive: after the last entry: %w", err)
	}
	return nil
}

// Close releases the gzip stream (not the underlying reader).
func (r *Reader) Close() error { return r.gz.Close() }

// ParseItemPath splits an item file name; false for other files.
func ParseItemPath(p string) (*Item, bool) {
	parts := strings.Split(strings.TrimPrefix(p, "./"), "/")
	if len(parts) < 4 || parts[0] != ResourcesDir || !strings.HasSuffix(parts[len(parts)-1], ".json") {
		return nil, false
	}
	item := &Item{GroupResource: parts[1], Name: strings.TrimSuffix(parts[len(parts)-1], ".json")}
	rest := parts[2 : len(parts)-1]
	if len(rest) > 0 && rest[0] != NamespaceScopedDir && rest[0] != ClusterScopedDir {
		item.Version = rest[0]
		if strings.HasSuffix(item.Version, PreferredVersionDir) {
			item.Version = strings.TrimSuffix(item.Version, PreferredVersionDir)
			item.Preferred = true
		}
		rest = rest[1:]
	}
	switch {
	case len(rest) == 1 && rest[0] == ClusterScopedDir:
	case len(rest) == 2 && rest[0] == NamespaceScopedDir:
		item.Namespace = rest[1]
	default:
		return nil, false
	}
	if item.Name == "" || item.GroupResource == "" {
		return nil, false
	}
	return item, true
}
