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

// Reader reads a backup tarball entry by entry.
type Reader struct {
	gz *gzip.Reader
	tr *tar.Reader
	// FormatVersion is metadata/version once read ("" before).
	FormatVersion string
	maxItem       int64
}

// MaxItemSize bounds one item file (the API server's own limit on a
// request body is 3 MiB; this leaves room).
const MaxItemSize = 16 << 20

// NewReader opens a gzipped tarball.
func NewReader(r io.Reader) (*Reader, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("archive: not a gzip stream: %w", err)
	}
	return &Reader{gz: gz, tr: tar.NewReader(gz), maxItem: MaxItemSize}, nil
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
		if h.Typeflag != tar.TypeReg {
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
		item.Data = data
		return item, nil
	}
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
