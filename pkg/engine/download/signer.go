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
	"time"
)

// Signer signs and verifies download links with a key kept in a file
// (NewSignerFromFile): links minted before a restart, or by another replica
// with the same file, open.
type Signer struct {
	key []byte
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
	key, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := createKey(path); err != nil {
			return nil, err
		}
		key, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the download signing key: %w", err)
	}
	if len(key) < keySize {
		return nil, fmt.Errorf("the download signing key %s has %d bytes, want at least %d", path, len(key), keySize)
	}
	return &Signer{key: key}, nil
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

func (s *Signer) mac(path string, expires int64) []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte(path))
	h.Write([]byte{0})
	h.Write([]byte(strconv.FormatInt(expires, 10)))
	return h.Sum(nil)
}

// Sign returns the query string ("expires=...&signature=...") of a link to path.
func (s *Signer) Sign(path string, expires time.Time) string {
	e := expires.Unix()
	return "expires=" + strconv.FormatInt(e, 10) + "&signature=" + hex.EncodeToString(s.mac(path, e))
}

// Verify checks the signature and expiry of a link to path.
func (s *Signer) Verify(path, expires, signature string, now time.Time) error {
	e, err := strconv.ParseInt(expires, 10, 64)
	if err != nil {
		return ErrBadSignature
	}
	sig, err := hex.DecodeString(strings.TrimSpace(signature))
	if err != nil || !hmac.Equal(sig, s.mac(path, e)) {
		return ErrBadSignature
	}
	if now.Unix() > e {
		return ErrExpired
	}
	return nil
}
