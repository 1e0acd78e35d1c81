// Package vmmanifest owns the on-disk format of a VM disk backup: the
// manifest.json beside the disk files (what the backup is, its chain, each
// file's digest), how it is written and read, the files' digests, and the
// free-space check made before a backup writes anything. The VM backup
// engine writes it; restore-vm-disk and the tests read it.
package vmmanifest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/atomicfile"
	"github.com/backstop-io/backstop/pkg/rootdir"
)

// File is the manifest of a backup, beside its disk files.
const File = "manifest.json"

// Manifest describes a backup's output: enough to check and restore it.
type Manifest struct {
	Backup         string        `json:"backup"`
	VirtualMachine string        `json:"virtualMachine"`
	Domain         string        `json:"domain"`
	Type           kv.BackupType `json:"type"`
	Checkpoint     string        `json:"checkpoint,omitempty"`
	Parent         string        `json:"parent,omitempty"`
	Created        time.Time     `json:"created"`
	LibvirtVersion string        `json:"libvirtVersion"`
	QEMUVersion    string        `json:"qemuVersion"`
	Disks          []Disk        `json:"disks"`
	// Definition is the domain's libvirt definition (inactive XML) when
	// the backup was taken: a restore defines a new domain from it when
	// the VM is gone or restored under another name.
	Definition string `json:"definition,omitempty"`
}

// Disk is one disk's file in a backup.
type Disk struct {
	Name        string `json:"name"`
	File        string `json:"file"`
	VirtualSize uint64 `json:"virtualSize"`
	// Backing is the previous backup's file (incremental), absolute.
	Backing string `json:"backing,omitempty"`
	// SHA256 is the digest of the file as written.
	SHA256 string `json:"sha256"`
}

// Write writes m into the backup directory dir, atomically: a crash
// leaves the old manifest or the new one.
func Write(dir string, m Manifest) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the manifest: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, File), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the manifest: %w", err)
	}
	return nil
}

// Read reads the manifest of the backup directory dir.
func Read(dir string) (Manifest, error) {
	var m Manifest
	data, err := os.ReadFile(filepath.Join(dir, File))
	if err != nil {
		return m, fmt.Errorf("%s is not a VM backup: %w", dir, err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("%s: %w", filepath.Join(dir, File), err)
	}
	// The volume may be written by others than the server: a file name
	// the manifest gives is one name in dir, a backing file a clean path
	// without "..".
	for _, d := range m.Disks {
		if err := rootdir.Name(d.File); err != nil {
			return Manifest{}, fmt.Errorf("%s: disk %q: %w", filepath.Join(dir, File), d.Name, err)
		}
		if d.Backing != "" && !rootdir.Clean(d.Backing) {
			return Manifest{}, fmt.Errorf("%s: disk %q: backing file %q is not a clean path", filepath.Join(dir, File), d.Name, d.Backing)
		}
	}
	return m, nil
}

// Verify checks the digest of every disk file of the backup in dir
// against m.
func Verify(dir string, m Manifest) error {
	for _, d := range m.Disks {
		sum, err := FileSHA256(filepath.Join(dir, d.File))
		if err != nil {
			return err
		}
		if sum != d.SHA256 {
			return fmt.Errorf("%s: digest %s, the manifest says %s", filepath.Join(dir, d.File), sum, d.SHA256)
		}
	}
	return nil
}
