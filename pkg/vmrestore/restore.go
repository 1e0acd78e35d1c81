// Package vmrestore turns a chain of VM disk backups (the directories
// VirtualMachineBackups write: qcow2 files and manifest.json) into a raw
// disk image. The chain is given oldest first: a full backup, then
// incrementals, each one's parent being the checkpoint of the one before.
// Before anything is written, every manifest digest is checked against
// its file, every file is checked with `qemu-img check`, and the chain's
// links are checked; a broken chain is an error naming the link. The
// files are then stitched without being changed (a qemu-img json: image
// whose backing chain is the given directories, wherever they were moved
// to), converted to raw, and the result compared with the chain; its
// sha256 is returned.
package vmrestore

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/backstop-io/backstop/pkg/vmmanifest"
)

// Result describes a restored image.
type Result struct {
	Output string
	SHA256 string
	// Chain are the files stitched, oldest first.
	Chain []string
}

// Restore writes disk's raw image from the backup directories (oldest
// first) to output.
func Restore(ctx context.Context, dirs []string, disk, output string) (Result, error) {
	files, err := checkChain(ctx, dirs, disk)
	if err != nil {
		return Result{}, err
	}
	chain, err := chainSpec(files)
	if err != nil {
		return Result{}, err
	}
	if out, err := exec.CommandContext(ctx, "qemu-img", "convert", "-O", "raw", chain, output).CombinedOutput(); err != nil {
		_ = os.Remove(output)
		return Result{}, fmt.Errorf("converting the chain to %s: %v: %s", output, err, strings.TrimSpace(string(out)))
	}
	if err := compare(ctx, chain, "raw", output); err != nil {
		_ = os.Remove(output)
		return Result{}, err
	}
	sum, err := vmmanifest.FileSHA256(output)
	if err != nil {
		return Result{}, err
	}
	return Result{Output: output, SHA256: sum, Chain: files}, nil
}

// checkChain checks the backup directories (oldest first) as a chain of
// disk's backups and returns disk's files in them: every manifest digest
// against its file, every file with `qemu-img check`, and the links.
func checkChain(ctx context.Context, dirs []string, disk string) ([]string, error) {
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no backup directory given")
	}
	var files []string
	var prev *vmmanifest.Manifest
	for i, dir := range dirs {
		m, err := vmmanifest.Read(dir)
		if err != nil {
			return nil, err
		}
		switch {
		case i == 0 && m.Type != "Full":
			return nil, fmt.Errorf("broken chain: %s is a %s backup; a chain starts with a full one", dir, m.Type)
		case i > 0 && m.Type == "Full":
			return nil, fmt.Errorf("broken chain: %s is a full backup; only the first backup of a chain is", dir)
		case i > 0 && m.Parent != prev.Checkpoint:
			return nil, fmt.Errorf("broken chain: %s was taken since checkpoint %q, but the backup before it (%s) ends at checkpoint %q",
				dir, m.Parent, dirs[i-1], prev.Checkpoint)
		}
		var entry *vmmanifest.Disk
		for j := range m.Disks {
			if m.Disks[j].Name == disk {
				entry = &m.Disks[j]
			}
		}
		if entry == nil {
			return nil, fmt.Errorf("%s has no disk %q", dir, disk)
		}
		file := filepath.Join(dir, entry.File)
		if err := vmmanifest.CheckImage(ctx, file); err != nil {
			return nil, err
		}
		sum, err := vmmanifest.FileSHA256(file)
		if err != nil {
			return nil, err
		}
		if sum != entry.SHA256 {
			return nil, fmt.Errorf("%s: sha256 %s does not match the manifest's %s: the file changed after the backup", file, sum, entry.SHA256)
		}
		if out, err := exec.CommandContext(ctx, "qemu-img", "check", "-q", "-f", "qcow2", file).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s: qemu-img check: %v: %s", file, err, strings.TrimSpace(string(out)))
		}
		files = append(files, file)
		mm := m
		prev = &mm
	}
	return files, nil
}

// compare checks that image (of format) reads as the chain does.
func compare(ctx context.Context, chain, format, image string) error {
	if out, err := exec.CommandContext(ctx, "qemu-img", "compare", "-U", "-F", format, chain, image).CombinedOutput(); err != nil {
		return fmt.Errorf("the restored image %s differs from the chain: %v: %s", image, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// chainSpec is a qemu-img json: image reading the newest file over the
// older ones, whatever backing file names the files themselves carry.
func chainSpec(files []string) (string, error) {
	var spec map[string]any
	for i, f := range files {
		abs, err := filepath.Abs(f)
		if err != nil {
			return "", err
		}
		node := map[string]any{"driver": "qcow2", "file": map[string]any{"driver": "file", "filename": abs}}
		if i == 0 {
			node["backing"] = nil // a full backup reads nothing under it
		} else {
			node["backing"] = spec
		}
		spec = node
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	return "json:" + string(data), nil
}
