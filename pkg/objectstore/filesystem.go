package objectstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Filesystem is a Store in a directory: the key "a/b" is the file <root>/a/b.
type Filesystem struct {
	root string
}

var _ Store = &Filesystem{}

// NewFilesystem returns the store rooted at dir, which must be absolute.
func NewFilesystem(dir string) (*Filesystem, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("filesystem store: %q is not an absolute directory", dir)
	}
	return &Filesystem{root: filepath.Clean(dir)}, nil
}

// path maps a key to a file, refusing keys that leave the root.
func (f *Filesystem) path(key string) (string, error) {
	clean := path.Clean("/" + key)
	if key == "" || strings.HasSuffix(key, "/") || clean != "/"+key {
		return "", fmt.Errorf("invalid object key %q", key)
	}
	return filepath.Join(f.root, filepath.FromSlash(clean)), nil
}

// Get opens the object's file.
func (f *Filesystem) Get(_ context.Context, key string) (io.ReadCloser, error) {
	p, err := f.path(key)
	if err != nil {
		return nil, err
	}
	file, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", key, err)
	}
	return file, nil
}

// Put writes a temporary file beside the object, syncs it and renames it
// into place.
func (f *Filesystem) Put(_ context.Context, key string, r io.Reader) (err error) {
	p, err := f.path(key)
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".put-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", key, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = io.Copy(tmp, r); err != nil {
		return fmt.Errorf("writing %s: %w", key, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", key, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", key, err)
	}
	if err = os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("publishing %s: %w", key, err)
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// Delete removes the object's file.
func (f *Filesystem) Delete(_ context.Context, key string) error {
	p, err := f.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("deleting %s: %w", key, err)
	}
	return nil
}

// List walks the directory under prefix.
func (f *Filesystem) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	if err := f.Walk(ctx, prefix, func(key string) error { keys = append(keys, key); return nil }); err != nil {
		return nil, err
	}
	sort.Strings(keys)
	return keys, nil
}

// Walk calls fn with the keys under prefix, in lexical order (the
// temporary files of Puts left out).
func (f *Filesystem) Walk(ctx context.Context, prefix string, fn func(key string) error) error {
	if err := f.walk(ctx, prefix, func(key string, _ fs.DirEntry) error { return fn(key) }); err != nil {
		return fmt.Errorf("listing %s: %w", prefix, err)
	}
	return nil
}

// walk calls fn with the key and entry of each file under prefix, in
// lexical order (the temporary files of Puts left out).
func (f *Filesystem) walk(ctx context.Context, prefix string, fn func(key string, d fs.DirEntry) error) error {
	return filepath.WalkDir(f.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), ".put-") {
			return nil
		}
		rel, err := filepath.Rel(f.root, p)
		if err != nil {
			return err
		}
		if key := filepath.ToSlash(rel); strings.HasPrefix(key, prefix) {
			return fn(key, d)
		}
		return nil
	})
}

// removeIncomplete removes the temporary files of Puts a crash
// interrupted under prefix (List does not show them). Only the directory
// the prefix names (or lies in) is walked, not the whole location.
func (f *Filesystem) removeIncomplete(prefix string) error {
	start := filepath.Join(f.root, filepath.FromSlash(path.Clean("/"+prefix)))
	if !strings.HasSuffix(prefix, "/") {
		start = filepath.Dir(start)
	}
	return filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasPrefix(d.Name(), ".put-") {
			return nil
		}
		rel, err := filepath.Rel(f.root, p)
		if err != nil {
			return err
		}
		if strings.HasPrefix(filepath.ToSlash(rel), prefix) {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("removing an interrupted upload: %w", err)
			}
		}
		return nil
	})
}

// Probe creates the directory if needed and writes, reads back and removes
// a small file in it.
func (f *Filesystem) Probe(ctx context.Context) error {
	if err := os.MkdirAll(f.root, 0o700); err != nil {
		return fmt.Errorf("creating the directory %s: %w", f.root, err)
	}
	const key = ".backstop-probe"
	if err := f.Put(ctx, key, strings.NewReader("probe")); err != nil {
		return err
	}
	r, err := f.Get(ctx, key)
	if err != nil {
		return err
	}
	_ = r.Close()
	return f.Delete(ctx, key)
}
