package download

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Signer signs and verifies download links with a key that lives as long
// as the process: links are short-lived, so they need not survive restarts.
type Signer struct {
	key []byte
}

// NewSigner returns a signer with a random key.
func NewSigner() (*Signer, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generating the download signing key: %w", err)
	}
	return &Signer{key: key}, nil
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
