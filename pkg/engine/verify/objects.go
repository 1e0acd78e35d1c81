package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/archive"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// MaxManifestSize bounds the manifest read (a few hundred bytes an
// object).
const MaxManifestSize = 16 << 20

// Report is what a verification found.
type Report struct {
	// Objects and Bytes are the objects read back and their bytes.
	Objects int
	Bytes   int64
	// Items are the tarball's items decoded.
	Items int
	// VMDiskChains are the VM disk chains checked.
	VMDiskChains int
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
// of the name its path gives. Problems go into r; an error is returned
// only when the store could not be listed or ctx ended (the verification
// did not happen).
func Objects(ctx context.Context, store objectstore.Store, layout objectstore.Layout, backup string, r *Report) error {
	dir := layout.BackupDir(backup)
	keys, err := store.List(ctx, dir)
	if err != nil {
		return fmt.Errorf("listing backup %s: %w", backup, err)
	}
	manifest, err := objectstore.GetManifest(ctx, store, layout, backup, MaxManifestSize)
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
	tarball := backup + ".tar.gz"
	for _, o := range manifest.Objects {
		if strings.Contains(o.Name, "/") || o.Name == "" {
			r.Problem("%s: the manifest names an object outside the backup's directory", o.Name)
			continue
		}
		if err := checkObject(ctx, store, dir+o.Name, o, o.Name == tarball, r); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.Problem("%s: %v", o.Name, err)
		}
	}
	return nil
}

// checkObject reads one object whole, decoding it as a tarball when it is
// one, and compares its size and sha256 with the manifest's.
func checkObject(ctx context.Context, store objectstore.Store, key string, want objectstore.ManifestObject, tarball bool, r *Report) error {
	rc, err := store.Get(ctx, key)
	if errors.Is(err, objectstore.ErrNotFound) {
		return errors.New("missing")
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	counted := &countingReader{r: io.TeeReader(rc, h)}
	var decodeErr error
	if tarball {
		decodeErr = decodeItems(counted, r)
	}
	// The rest (all of it for other objects; a tarball's gzip trailer, or
	// what follows where decoding stopped) is hashed too.
	if _, err := io.Copy(io.Discard, counted); err != nil {
		return fmt.Errorf("reading: %w", err)
	}
	r.Objects++
	r.Bytes += counted.n
	sum := hex.EncodeToString(h.Sum(nil))
	switch {
	case counted.n != want.Size:
		return fmt.Errorf("%d bytes, the manifest says %d", counted.n, want.Size)
	case sum != want.SHA256:
		return fmt.Errorf("sha256 %s, the manifest says %s", sum, want.SHA256)
	case decodeErr != nil:
		return decodeErr
	}
	return nil
}

// decodeItems reads a tarball and decodes each item.
func decodeItems(in io.Reader, r *Report) error {
	tr, err := archive.NewReader(in)
	if err != nil {
		return err
	}
	defer tr.Close()
	var skipped []string
	tr.Skipped = func(name, why string) { skipped = append(skipped, fmt.Sprintf("%q (%s)", name, why)) }
	for {
		item, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if err := decodeItem(item); err != nil {
			return err
		}
		r.Items++
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

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
