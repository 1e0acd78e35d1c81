// Package rootdir owns every file access the server makes under one of its
// own directories (the VM backup volumes, scratch space) by names that come
// from API objects: a namespace, a claim, a backup, a disk. Each name is one
// path element, checked by Name (never "", ".", "..", a separator, a NUL or
// a leading dot), so that a joined path cannot leave the directory
// lexically; and what changes the tree (MkdirAll, RemoveAll) goes through
// os.Root, so that not even a symlink planted inside can lead it out. A
// validation missed at admission still cannot reach the server's other
// files.
package rootdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// MaxName is the longest name accepted, in bytes: a file name on Linux.
const MaxName = 255

// Name checks that s can be one element of a path under a root: not empty,
// not "." or "..", no "/" or "\", no NUL or other control character, not
// starting with "." (the server's own entries, such as ".cbt", start with
// one), valid UTF-8, at most MaxName bytes.
func Name(s string) error {
	switch {
	case s == "":
		return errors.New("empty name")
	case len(s) > MaxName:
		return fmt.Errorf("name of %d bytes: at most %d", len(s), MaxName)
	case !utf8.ValidString(s):
		return fmt.Errorf("name %q is not UTF-8", s)
	case strings.HasPrefix(s, "."):
		return fmt.Errorf("name %q starts with a dot", s)
	case strings.ContainsAny(s, `/\`):
		return fmt.Errorf("name %q holds a path separator", s)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("name %q holds a control character", s)
		}
	}
	return nil
}

// Clean reports whether p is a path as filepath.Clean makes it, with no
// ".." element and no NUL: a path recorded in a file the server reads back
// (a manifest's backing file) that leads nowhere its text does not say.
func Clean(p string) bool {
	if p == "" || filepath.Clean(p) != p || strings.ContainsRune(p, 0) {
		return false
	}
	for _, e := range strings.Split(p, string(filepath.Separator)) {
		if e == ".." {
			return false
		}
	}
	return true
}

// Dir is a directory of the server, by its path.
type Dir string

// rel checks each element with Name and joins them.
func (d Dir) rel(elems []string) (string, error) {
	if d == "" {
		return "", errors.New("no root directory")
	}
	if len(elems) == 0 {
		return ".", nil
	}
	for _, e := range elems {
		if err := Name(e); err != nil {
			return "", fmt.Errorf("a path under %s: %w", d, err)
		}
	}
	return filepath.Join(elems...), nil
}

// Join returns the path of elems under d, for a program that takes a path
// (QEMU, qemu-img): each element is checked with Name, and the part of the
// path that exists must resolve inside d (a symlink leading out is
// refused).
func (d Dir) Join(elems ...string) (string, error) {
	rel, err := d.rel(elems)
	if err != nil {
		return "", err
	}
	if err := d.inside(rel); err != nil {
		return "", err
	}
	return filepath.Join(string(d), rel), nil
}

// inside reports an error when rel, as far as it exists, resolves outside d.
func (d Dir) inside(rel string) error {
	root, err := os.OpenRoot(string(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening %s: %w", d, err)
	}
	defer root.Close()
	// Walk down: the first missing element ends what can be checked.
	parts := strings.Split(rel, string(filepath.Separator))
	for i := range parts {
		p := filepath.Join(parts[:i+1]...)
		if _, err := root.Stat(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("%s under %s: %w", p, d, err)
		}
	}
	return nil
}

// MkdirAll creates elems under d (and d itself) with perm, through os.Root,
// and returns the path.
func (d Dir) MkdirAll(perm fs.FileMode, elems ...string) (string, error) {
	rel, err := d.rel(elems)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(string(d), perm); err != nil {
		return "", fmt.Errorf("creating %s: %w", d, err)
	}
	root, err := os.OpenRoot(string(d))
	if err != nil {
		return "", fmt.Errorf("opening %s: %w", d, err)
	}
	defer root.Close()
	if err := root.MkdirAll(rel, perm); err != nil {
		return "", fmt.Errorf("creating %s under %s: %w", rel, d, err)
	}
	return filepath.Join(string(d), rel), nil
}

// RemoveAll removes elems under d and what it holds, through os.Root: a
// symlink inside is removed, never followed. At least one element is
// required (d itself is never removed); a missing path is no error.
func (d Dir) RemoveAll(elems ...string) error {
	if len(elems) == 0 {
		return fmt.Errorf("removing %s itself: a path under it is required", d)
	}
	rel, err := d.rel(elems)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(string(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening %s: %w", d, err)
	}
	defer root.Close()
	if err := root.RemoveAll(rel); err != nil {
		return fmt.Errorf("removing %s under %s: %w", rel, d, err)
	}
	return nil
}

// ReadDir lists elems under d, through os.Root.
func (d Dir) ReadDir(elems ...string) ([]fs.DirEntry, error) {
	rel, err := d.rel(elems)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(string(d))
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", d, err)
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}
