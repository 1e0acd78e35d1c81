package pki

import (
	"fmt"
	"io/fs"
	"os"
)

const (
	dirMode  fs.FileMode = 0o700
	keyMode  fs.FileMode = 0o600
	certMode fs.FileMode = 0o644
)

// ensureDir creates dir (and its parents) with mode 0700 if it is missing.
func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("creating directory %s: %w", dir, err)
	}
	return nil
}
