package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// replicaIdentity locks the data directory for this process (a second
// server on the same directory is refused: it would share this one's name
// in elections) and returns the replica's name in the engines' leader
// election: the host name and an ID kept in <data-dir>/replica-id, made at
// the first start. A replica started again keeps its name, and takes its
// own Lease back at once.
func replicaIdentity(dataDir string) (identity string, unlock func(), err error) {
	lock, err := os.OpenFile(filepath.Join(dataDir, "replica.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", nil, fmt.Errorf("locking the data directory: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return "", nil, fmt.Errorf("the data directory %s is locked by another process: each replica needs its own", dataDir)
		}
		return "", nil, fmt.Errorf("locking the data directory: %w", err)
	}
	unlock = func() { _ = lock.Close() }
	path := filepath.Join(dataDir, "replica-id")
	id, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		b := make([]byte, 8)
		if _, err := rand.Read(b); err != nil {
			unlock()
			return "", nil, fmt.Errorf("making the replica ID: %w", err)
		}
		id = []byte(hex.EncodeToString(b))
		err = os.WriteFile(path, id, 0o600)
	}
	if err != nil {
		unlock()
		return "", nil, fmt.Errorf("the replica ID: %w", err)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "backstop"
	}
	return host + "_" + strings.TrimSpace(string(id)), unlock, nil
}
