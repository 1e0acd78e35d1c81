// Package archivetest builds backup tarballs entry by entry, as a hostile
// bucket would hold them: any name, any type, any size, in any order. The
// restore and archive tests restore them.
package archivetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"testing"
)

// Entry is one entry of a tarball.
type Entry struct {
	Name string
	// Type is the tar type flag (default a regular file).
	Type byte
	Data []byte
	// Zeros, when set, is the size of a regular file of zeros streamed
	// in place of Data (a gzip bomb compresses well).
	Zeros int64
	// Linkname is a link's target.
	Linkname string
}

// Item is the regular file of an item, its preferred version's copy:
// resources/<gr>/<version>-preferredversion/... (namespace "" for a
// cluster-scoped one).
func Item(groupResource, version, namespace, name string, data []byte) Entry {
	scope := "cluster"
	if namespace != "" {
		scope = "namespaces/" + namespace
	}
	return Entry{Name: "resources/" + groupResource + "/" + version + "-preferredversion/" + scope + "/" + name + ".json", Data: data}
}

// Build returns the gzipped tarball of entries.
func Build(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Typeflag: e.Type, Mode: 0o644, Linkname: e.Linkname, Format: tar.FormatPAX}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		var body io.Reader = bytes.NewReader(e.Data)
		size := int64(len(e.Data))
		if e.Zeros > 0 {
			body, size = io.LimitReader(zeros{}, e.Zeros), e.Zeros
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = size
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("tar header %q: %v", e.Name, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := io.Copy(tw, body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
