package objectstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"sort"
	"strings"
	"sync"
)

// ManifestFile is the name of a backup's manifest in its directory: the
// list of its other objects with their sizes and sha256, written last
// (after velero-backup.json), when the backup completes. Velero's tools
// ignore it.
const ManifestFile = "backstop-manifest.json"

// Manifest is a backup's manifest.
type Manifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Backup     string `json:"backup"`
	// Objects are the backup's other objects, by name in its directory,
	// sorted: the size and sha256 of their content as Backstop wrote it
	// (of the plaintext, for a location that requires encryption).
	Objects []ManifestObject `json:"objects"`
	// ObjectsSHA256 is the sha256 of Objects as JSON (objectsSum): a
	// changed byte of the manifest itself is found, and named as its own.
	ObjectsSHA256 string `json:"objectsSHA256"`
}

// objectsSum is the sha256 of a manifest's objects as JSON.
func objectsSum(objects []ManifestObject) (string, error) {
	data, err := json.Marshal(objects)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// ManifestObject is one object of a manifest.
type ManifestObject struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Size is what the manifest's objects hold, summed (0 for no manifest).
func (m *Manifest) Size() int64 {
	if m == nil {
		return 0
	}
	var n int64
	for _, o := range m.Objects {
		n += o.Size
	}
	return n
}

// The manifest's apiVersion and kind.
const (
	ManifestAPIVersion = "backstop.io/v1"
	ManifestKind       = "BackupManifest"
)

// ManifestKey is the key of a backup's manifest.
func (l Layout) ManifestKey(backup string) string {
	return path.Join(l.BackupDir(backup), ManifestFile)
}

// Hashing is a store that records the size and sha256 of what is written
// through it, as it is written, so that a backup's manifest costs no second
// read of its objects.
type Hashing struct {
	Store
	mu   sync.Mutex
	sums map[string]ManifestObject
}

// NewHashing returns a store over s that records what is written.
func NewHashing(s Store) *Hashing {
	return &Hashing{Store: s, sums: map[string]ManifestObject{}}
}

// Put writes r into key, and records it once written whole.
func (h *Hashing) Put(ctx context.Context, key string, r io.Reader) error {
	hr := &hashingReader{r: r, h: sha256.New()}
	h.forget(key)
	if err := h.Store.Put(ctx, key, hr); err != nil {
		return err
	}
	if !hr.eof {
		// The store stopped reading before the end: the object is not
		// what was given; the manifest reads it back.
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sums[key] = ManifestObject{Size: hr.n, SHA256: hex.EncodeToString(hr.h.Sum(nil))}
	return nil
}

// Unwrap is the store the objects are in.
func (h *Hashing) Unwrap() Store { return h.Store }

// Delete removes key and its record.
func (h *Hashing) Delete(ctx context.Context, key string) error {
	h.forget(key)
	return h.Store.Delete(ctx, key)
}

func (h *Hashing) forget(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.sums, key)
}

// MakeManifest lists the objects under dir (a backup's directory, its
// manifest aside) with their sizes and sha256: when store is a Hashing,
// what was written through it as recorded, the others (written before the
// server restarted) read back.
func MakeManifest(ctx context.Context, store Store, dir, backup string) (*Manifest, error) {
	h, ok := store.(*Hashing)
	if !ok {
		h = NewHashing(store)
	}
	keys, err := h.Store.List(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	m := &Manifest{APIVersion: ManifestAPIVersion, Kind: ManifestKind, Backup: backup, Objects: []ManifestObject{}}
	for _, key := range keys {
		name := strings.TrimPrefix(key, dir)
		if name == ManifestFile || strings.Contains(name, "/") {
			continue
		}
		h.mu.Lock()
		o, ok := h.sums[key]
		h.mu.Unlock()
		if !ok {
			if o, err = Sum(ctx, h.Store, key); err != nil {
				return nil, err
			}
		}
		o.Name = name
		m.Objects = append(m.Objects, o)
	}
	sort.Slice(m.Objects, func(i, j int) bool { return m.Objects[i].Name < m.Objects[j].Name })
	return m, nil
}

// PutManifest writes a backup's manifest.
func PutManifest(ctx context.Context, store Store, layout Layout, m *Manifest) error {
	sum, err := objectsSum(m.Objects)
	if err != nil {
		return fmt.Errorf("encoding the manifest of backup %s: %w", m.Backup, err)
	}
	m.ObjectsSHA256 = sum
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding the manifest of backup %s: %w", m.Backup, err)
	}
	if err := store.Put(ctx, layout.ManifestKey(m.Backup), bytes.NewReader(data)); err != nil {
		return fmt.Errorf("uploading the manifest of backup %s: %w", m.Backup, err)
	}
	return nil
}

// ErrNoManifest is returned for a backup without a manifest (made before
// Backstop wrote them, or not completed).
var ErrNoManifest = errors.New("the backup has no manifest")

// MaxManifestSize bounds a manifest read (a few hundred bytes an object).
const MaxManifestSize = 16 << 20

// GetManifest reads a backup's manifest, at most max bytes of it.
func GetManifest(ctx context.Context, store Store, layout Layout, backup string, max int64) (*Manifest, error) {
	rc, err := store.Get(ctx, layout.ManifestKey(backup))
	if errors.Is(err, ErrNotFound) {
		return nil, ErrNoManifest
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, max+1))
	if err != nil {
		return nil, fmt.Errorf("reading the manifest of backup %s: %w", backup, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("the manifest of backup %s is over %d bytes", backup, max)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("decoding the manifest of backup %s: %w", backup, err)
	}
	if m.APIVersion != ManifestAPIVersion || m.Kind != ManifestKind || m.Backup != backup {
		return nil, fmt.Errorf("the manifest of backup %s is a %s %s of backup %q", backup, m.APIVersion, m.Kind, m.Backup)
	}
	// Written by json.Marshal: any other bytes (a key's case changed,
	// which decoding forgives) were not written so.
	if again, err := json.Marshal(&m); err != nil || !bytes.Equal(again, data) {
		return nil, fmt.Errorf("the manifest of backup %s is not as Backstop writes one: it changed after it was written", backup)
	}
	if sum, err := objectsSum(m.Objects); err != nil || sum != m.ObjectsSHA256 {
		return nil, fmt.Errorf("the manifest of backup %s does not match its own sha256 (%s): it changed after it was written", backup, m.ObjectsSHA256)
	}
	return &m, nil
}

// Sum reads an object whole and returns its size and sha256.
func Sum(ctx context.Context, store Store, key string) (ManifestObject, error) {
	rc, err := store.Get(ctx, key)
	if err != nil {
		return ManifestObject{}, err
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, rc)
	if err != nil {
		return ManifestObject{}, fmt.Errorf("reading %s: %w", key, err)
	}
	return ManifestObject{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// hashingReader hashes what is read through it.
type hashingReader struct {
	r   io.Reader
	h   hash.Hash
	n   int64
	eof bool
}

func (r *hashingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.h.Write(p[:n])
	r.n += int64(n)
	if err == io.EOF {
		r.eof = true
	}
	return n, err
}
