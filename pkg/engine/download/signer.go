package download

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Signer signs and verifies download links with the keys kept in a file
// (NewSignerFromFile): links minted before a restart, or by another replica
// with the same file, open. The file is a keyring: its raw bytes are one
// key (what the server makes when there is no file), or it holds one key
// per line in hex, the first signing and every one verifying. The file is
// read again when it changes, so the admin rotates the key without a
// restart: put a new key first (new links use it, old ones still open),
// then remove the old one (its links stop opening).
type Signer struct {
	path string

	mu   sync.Mutex
	keys [][]byte
	// stamp is the file's size and modification time when read.
	stamp string
}

// keySize is the length of a signing key (HMAC-SHA256's block is larger;
// 32 random bytes are its security).
const keySize = 32

// NewSignerFromFile returns a signer with the key in path (its raw bytes,
// at least 32), creating the file with a random key when there is none.
// Replicas sharing the file at once agree on the key: it is made whole
// beside path and linked into place, and a replica that loses the race
// reads the winner's.
func NewSignerFromFile(path string) (*Signer, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if err := createKey(path); err != nil {
			return nil, err
		}
	}
	s := &Signer{path: path}
	if _, err := s.current(); err != nil {
		return nil, err
	}
	return s, nil
}

// current returns the keys, reading the file again when it changed since
// it was read; a file that cannot be read or holds no valid key keeps the
// keys read before (an error only when there are none).
func (s *Signer) current() ([][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, err := os.Stat(s.path)
	if err == nil {
		stamp := fmt.Sprintf("%d %d", fi.Size(), fi.ModTime().UnixNano())
		if stamp == s.stamp && s.keys != nil {
			return s.keys, nil
		}
		var keys [][]byte
		if keys, err = readKeys(s.path); err == nil {
			s.keys, s.stamp = keys, stamp
		}
	}
	if err != nil && s.keys == nil {
		return nil, err
	}
	return s.keys, nil
}

// readKeys reads a keyring file: hex keys one per line, or one raw key.
func readKeys(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the download signing key: %w", err)
	}
	var keys [][]byte
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		key, err := hex.DecodeString(strings.TrimSpace(line))
		if err != nil || len(key) < keySize {
			keys = nil
			break
		}
		keys = append(keys, key)
	}
	if keys == nil {
		if len(data) < keySize {
			return nil, fmt.Errorf("the download signing key %s has %d bytes, want at least %d", path, len(data), keySize)
		}
		keys = [][]byte{data}
	}
	return keys, nil
}

// createKey writes a random key to path unless a file is there.
func createKey(path string) error {
	key := make([]byte, keySize)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("generating the download signing key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating the download signing key's directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".download-signing-*")
	if err != nil {
		return fmt.Errorf("writing the download signing key: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(key)
	if err == nil {
		err = tmp.Sync()
	}
	if closeErr := tmp.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("writing the download signing key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("writing the download signing key: %w", err)
	}
	return nil
}

// ErrBadSignature is returned for a link the server did not issue.
var ErrBadSignature = errors.New("invalid download link signature")

// ErrExpired is returned for a link past its expiry.
var ErrExpired = errors.New("download link expired")

func mac(key []byte, path string, expires int64) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(path))
	h.Write([]byte{0})
	h.Write([]byte(strconv.FormatInt(expires, 10)))
	return h.Sum(nil)
}

// Sign returns the query string ("expires=...&signature=...") of a link to
// path, signed with the keyring's first key.
func (s *Signer) Sign(path string, expires time.Time) string {
	keys, err := s.current()
	if err != nil {
		// The keys were read at start: only a ring that never held one
		// gets here, and its links open nowhere.
		keys = [][]byte{nil}
	}
	e := expires.Unix()
	return "expires=" + strconv.FormatInt(e, 10) + "&signature=" + hex.EncodeToString(mac(keys[0], path, e))
}

// Verify checks the signature (by any key of the ring) and expiry of a
// link to path.
func (s *Signer) Verify(path, expires, signature string, now time.Time) error {
	e, err := strconv.ParseInt(expires, 10, 64)
	if err != nil {
		return ErrBadSignature
	}
	sig, err := hex.DecodeString(strings.TrimSpace(signature))
	if err != nil {
		return ErrBadSignature
	}
	keys, err := s.current()
	if err != nil {
		return ErrBadSignature
	}
	signed := false
	for _, key := range keys {
		signed = signed || hmac.Equal(sig, mac(key, path, e))
	}
	if !signed {
		return ErrBadSignature
	}
	if now.Unix() > e {
		return ErrExpired
	}
	return nil
}
