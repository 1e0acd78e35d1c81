// Package archive owns the backup tarball in Velero's layout: a gzipped
// tar whose items are JSON files at
// resources/<resource>.<group>/[<version>-preferredversion/]{namespaces/<ns>|cluster}/<name>.json,
// with metadata/version naming the format. Writer streams items in;
// Reader streams them out. Neither holds more than one item in memory.
package archive

import (
	"archive/tar"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/klauspost/compress/gzip"
)

// Layout constants, as in Velero (pkg/apis/velero/v1/constants.go).
const (
	// FormatVersion is the backup format Velero v1.18 writes and reads.
	FormatVersion       = "1.1.0"
	ResourcesDir        = "resources"
	MetadataDir         = "metadata"
	NamespaceScopedDir  = "namespaces"
	ClusterScopedDir    = "cluster"
	PreferredVersionDir = "-preferredversion"
)

// ItemPath is the file of an item: namespaced under namespaces/<ns>,
// cluster-scoped under cluster/. versionDir is "" for the unversioned
// copy, else e.g. "v1-preferredversion".
func ItemPath(groupResource, versionDir, namespace, name string) string {
	if namespace == "" {
		return path.Join(ResourcesDir, groupResource, versionDir, ClusterScopedDir, name+".json")
	}
	return path.Join(ResourcesDir, groupResource, versionDir, NamespaceScopedDir, namespace, name+".json")
}

// Writer writes a backup tarball.
type Writer struct {
	gz      *gzip.Writer
	tw      *tar.Writer
	modTime time.Time
}

// NewWriter starts a tarball on w and writes metadata/version.
func NewWriter(w io.Writer, modTime time.Time) (*Writer, error) {
	gz := gzip.NewWriter(w)
	a := &Writer{gz: gz, tw: tar.NewWriter(gz), modTime: modTime}
	if err := a.add(path.Join(MetadataDir, "version"), []byte(FormatVersion+"\n")); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Writer) add(name string, data []byte) error {
	if err := a.tw.WriteHeader(&tar.Header{
		Name: name, Size: int64(len(data)), Typeflag: tar.TypeReg, Mode: 0o755, ModTime: a.modTime,
	}); err != nil {
		return fmt.Errorf("archive: %s: %w", name, err)
	}
	if _, err := a.tw.Write(data); err != nil {
		return fmt.Errorf("archive: %s: %w", name, err)
	}
	return nil
}

// AddItem writes an item of the preferred version of its group twice, as
// Velero does: unversioned (for readers older than API group versions) and
// under <version>-preferredversion.
func (a *Writer) AddItem(groupResource, version, namespace, name string, data []byte) error {
	if err := a.add(ItemPath(groupResource, "", namespace, name), data); err != nil {
		return err
	}
	return a.add(ItemPath(groupResource, version+PreferredVersionDir, namespace, name), data)
}

// Copy writes an item read from another tarball at the path it had there
// (one copy: Reader returns the unversioned and each versioned copy
// apart).
func (a *Writer) Copy(item *Item) error {
	versionDir := item.Version
	if item.Preferred {
		versionDir += PreferredVersionDir
	}
	return a.add(ItemPath(item.GroupResource, versionDir, item.Namespace, item.Name), item.Data)
}

// Close finishes the tar and gzip streams (not the underlying writer).
func (a *Writer) Close() error {
	if err := a.tw.Close(); err != nil {
		return fmt.Errorf("archive: closing tar: %w", err)
	}
	if err := a.gz.Close(); err != nil {
		return fmt.Errorf("archive: closing gzip: %w", err)
	}
	return nil
}
