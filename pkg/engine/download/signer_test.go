package download

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// verifyQuery checks a link's query string (from Sign) with s.
func verifyQuery(t *testing.T, s *Signer, path, query string, now time.Time) error {
	t.Helper()
	var expires, signature string
	for _, kv := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "expires":
			expires = v
		case "signature":
			signature = v
		}
	}
	return s.Verify(path, expires, signature, now)
}

func TestSignerFromFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pki", "download-signing.key")
	first, err := NewSignerFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatalf("the key file was not created: %v", err)
	}
	if info.Mode().Perm() != 0o600 || info.Size() != keySize {
		t.Errorf("key file: mode %v, %d bytes; want 0600, %d", info.Mode().Perm(), info.Size(), keySize)
	}
	now := time.Unix(1_800_000_000, 0)
	query := first.Sign("/download/backup/b1", now.Add(time.Minute))

	// A restart, or another replica given the file: the same key.
	again, err := NewSignerFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyQuery(t, again, "/download/backup/b1", query, now); err != nil {
		t.Errorf("a link minted before, verified with the key read again: %v", err)
	}
	// Another key file: another key.
	other, err := NewSignerFromFile(filepath.Join(dir, "other.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyQuery(t, other, "/download/backup/b1", query, now); err != ErrBadSignature {
		t.Errorf("a link verified with another key: %v, want ErrBadSignature", err)
	}
	// A key too short is refused.
	short := filepath.Join(dir, "short.key")
	if err := os.WriteFile(short, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewSignerFromFile(short); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("a 6-byte key: %v, want an error naming the 32 bytes", err)
	}
}

func TestSignerFromFileRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "download-signing.key")
	const replicas = 8
	signers := make([]*Signer, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			signers[i], errs[i] = NewSignerFromFile(path)
		}()
	}
	wg.Wait()
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if !bytes.Equal(signers[i].keys[0], signers[0].keys[0]) {
			t.Errorf("replica %d made its own key", i)
		}
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("files beside the key: %d, want the key alone", len(entries))
	}
}

// TestSignerKeyring: the admin rotates the key by rewriting the file, and
// nothing restarts: a new first key signs new links while the old one
// still opens its links; the old key removed, its links stop opening.
func TestSignerKeyring(t *testing.T) {
	path := filepath.Join(t.TempDir(), "download-signing.key")
	s, err := NewSignerFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	oldLink := s.Sign("/a", now.Add(time.Hour))
	oldKey, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	newKey := bytes.Repeat([]byte{7}, keySize)
	write := func(lines ...[]byte) {
		t.Helper()
		var out []string
		for _, l := range lines {
			out = append(out, hex.EncodeToString(l))
		}
		// A later modification time than the file had, whatever the
		// file system's resolution.
		if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		later := now.Add(time.Duration(len(lines)) * time.Minute)
		if err := os.Chtimes(path, later, later); err != nil {
			t.Fatal(err)
		}
	}
	write(newKey, oldKey)
	newLink := s.Sign("/a", now.Add(time.Hour))
	if newLink == oldLink {
		t.Fatal("the new first key does not sign")
	}
	for name, link := range map[string]string{"old": oldLink, "new": newLink} {
		if err := verifyQuery(t, s, "/a", link, now); err != nil {
			t.Errorf("%s link with both keys in the ring: %v", name, err)
		}
	}
	write(newKey)
	if err := verifyQuery(t, s, "/a", oldLink, now); !errors.Is(err, ErrBadSignature) {
		t.Errorf("old link after its key was removed: %v, want ErrBadSignature", err)
	}
	if err := verifyQuery(t, s, "/a", newLink, now); err != nil {
		t.Errorf("new link after the old key was removed: %v", err)
	}
	// A broken file keeps the keys read before.
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := verifyQuery(t, s, "/a", newLink, now); err != nil {
		t.Errorf("new link after the file broke: %v", err)
	}
}
