package vmrestore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/backstop-io/backstop/pkg/rootdir"
	"github.com/backstop-io/backstop/pkg/virt"
	"github.com/backstop-io/backstop/pkg/vmmanifest"
)

// DomainRequest restores a libvirt domain's disks from a chain.
type DomainRequest struct {
	// Chain are the backup directories, oldest first (a full backup,
	// then incrementals).
	Chain []string
	// Domain is restored into: its disks are overwritten when it exists;
	// otherwise it is defined anew from Definition with images of its
	// own and started.
	Domain string
	// Definition is the domain XML a new domain is defined from (the
	// backed-up domain's, as its backup saved it: rebuilt with
	// virt.RestorableDefinition, with what of the host it may use).
	Definition string
	Allowed    virt.Restorable
	// ImageDir is where a new domain's images are written (a directory
	// of the server's: never one the definition names).
	ImageDir string
}

// DomainResult says what a domain restore did.
type DomainResult struct {
	// Created: the domain did not exist and was defined.
	Created bool
	// Started: the domain runs after the restore (it ran before, or was
	// created).
	Started bool
	// Disks are the images written, by disk name.
	Disks map[string]string
	// LeftOut says what of the definition a new domain was not defined
	// with (virt.RestorableDefinition).
	LeftOut []string
}

// IntoDomain restores req.Domain's disks from req.Chain. Every disk of the
// chain's newest backup is checked (digests, qemu-img check, links) before
// anything is touched. An existing domain is stopped, loses its
// checkpoints (their bitmaps tracked data that is replaced: the next
// backup is full), has each disk's image written from the chain (through
// the image, so an overlay of changed block tracking writes its raw data
// file) and is started again if it ran. A domain that does not exist is
// defined from req.Definition, rebuilt (virt.RestorableDefinition), with
// new qcow2 images (<domain>-<disk>.qcow2 in req.ImageDir) and started. Each image written is compared with the chain.
func IntoDomain(ctx context.Context, conn virt.Hypervisor, req DomainRequest) (DomainResult, error) {
	if len(req.Chain) == 0 {
		return DomainResult{}, errors.New("no backup to restore from")
	}
	newest, files, err := checkDomainChain(ctx, req.Chain)
	if err != nil {
		return DomainResult{}, err
	}
	chains := map[string]string{}
	for disk, f := range files {
		if chains[disk], err = chainSpec(f); err != nil {
			return DomainResult{}, err
		}
	}
	res := DomainResult{Disks: map[string]string{}}
	disks, err := conn.Disks(req.Domain)
	switch {
	case errors.Is(err, virt.ErrDomainNotFound):
		return intoNewDomain(ctx, conn, req, newest, chains)
	case err != nil:
		return res, err
	}
	byName := map[string]virt.Disk{}
	for _, d := range disks {
		byName[d.Name] = d
	}
	for _, d := range newest.Disks {
		have, ok := byName[d.Name]
		if !ok {
			return res, fmt.Errorf("domain %s has no disk %s to restore into", req.Domain, d.Name)
		}
		if have.VirtualSize != d.VirtualSize {
			return res, fmt.Errorf("domain %s: disk %s is %d bytes, its backup %d: resize it first", req.Domain, d.Name, have.VirtualSize, d.VirtualSize)
		}
	}
	wasActive, err := conn.StopForRestore(ctx, req.Domain)
	if err != nil {
		return res, err
	}
	// Stopped, the domain reads the images of its definition (changed
	// block tracking may have given it overlays meanwhile).
	if disks, err = conn.Disks(req.Domain); err != nil {
		return res, fmt.Errorf("%w; the domain is left stopped", err)
	}
	for _, d := range disks {
		byName[d.Name] = d
	}
	for _, d := range newest.Disks {
		have, ok := byName[d.Name]
		if !ok {
			return res, fmt.Errorf("domain %s has no disk %s to restore into; the domain is left stopped", req.Domain, d.Name)
		}
		if out, err := exec.CommandContext(ctx, "qemu-img", "convert", "-n", "-O", have.Format, chains[d.Name], have.Source).CombinedOutput(); err != nil {
			return res, fmt.Errorf("writing disk %s of domain %s (%s) from the chain: %v: %s; the domain is left stopped",
				d.Name, req.Domain, have.Source, err, strings.TrimSpace(string(out)))
		}
		if err := compare(ctx, chains[d.Name], have.Format, have.Source); err != nil {
			return res, fmt.Errorf("%w; the domain is left stopped", err)
		}
		res.Disks[d.Name] = have.Source
	}
	if wasActive {
		if err := conn.StartDomain(req.Domain); err != nil {
			return res, err
		}
		res.Started = true
	}
	return res, nil
}

// CheckChain checks a chain of a domain's backups (directories, oldest
// first) as a restore of it would before touching anything: every disk of
// the newest backup, through every backup of the chain (digests against
// the manifests, qemu-img check, the links). It returns how many disks.
func CheckChain(ctx context.Context, chain []string) (int, error) {
	if len(chain) == 0 {
		return 0, errors.New("no backup in the chain")
	}
	_, files, err := checkDomainChain(ctx, chain)
	return len(files), err
}

// checkDomainChain checks every disk of the chain's newest backup and
// returns that backup's manifest and each disk's files, oldest first.
func checkDomainChain(ctx context.Context, chain []string) (vmmanifest.Manifest, map[string][]string, error) {
	newest, err := vmmanifest.Read(chain[len(chain)-1])
	if err != nil {
		return newest, nil, err
	}
	files := map[string][]string{}
	for _, d := range newest.Disks {
		if files[d.Name], err = checkChain(ctx, chain, d.Name); err != nil {
			return newest, nil, err
		}
	}
	return newest, files, nil
}

func intoNewDomain(ctx context.Context, conn virt.Hypervisor, req DomainRequest, newest vmmanifest.Manifest, chains map[string]string) (DomainResult, error) {
	res := DomainResult{Disks: map[string]string{}}
	if req.Definition == "" {
		return res, fmt.Errorf("domain %s does not exist and the backup holds no domain definition to define it from", req.Domain)
	}
	if req.ImageDir == "" {
		return res, fmt.Errorf("domain %s does not exist and no directory is given for its new images", req.Domain)
	}
	definition, leftOut, err := virt.RestorableDefinition(req.Definition, req.Allowed)
	if err != nil {
		return res, err
	}
	res.LeftOut = leftOut
	// The definition's file disks: each needs the backup's chain.
	targets, err := virt.DiskTargets(definition)
	if err != nil {
		return res, err
	}
	dirs := map[string]bool{}
	for _, disk := range targets {
		if _, ok := chains[disk]; !ok {
			return res, fmt.Errorf("the backup has no disk %s of the domain's definition", disk)
		}
		dirs[disk] = true
	}
	images, err := rootdir.Dir(req.ImageDir).MkdirAll(0o755)
	if err != nil {
		return res, fmt.Errorf("the directory of the restored disks: %w", err)
	}
	var written []string
	defer func() {
		if err != nil {
			for _, f := range written {
				_ = os.Remove(f)
			}
		}
	}()
	for _, d := range newest.Disks {
		if _, ok := dirs[d.Name]; !ok {
			continue // not a disk of the definition: nothing reads it
		}
		// The disk's name comes from the backup's manifest, in a volume
		// others may write: one file name, or nothing is written.
		file := req.Domain + "-" + d.Name + ".qcow2"
		if err = rootdir.Name(file); err != nil {
			return res, fmt.Errorf("disk %q of domain %s cannot name an image: %w", d.Name, req.Domain, err)
		}
		image := filepath.Join(images, file)
		if _, statErr := os.Lstat(image); statErr == nil {
			err = fmt.Errorf("domain %s does not exist but its disk image %s does: it is not overwritten", req.Domain, image)
			return res, err
		}
		temp := image + ".restoring"
		if out, cerr := exec.CommandContext(ctx, "qemu-img", "convert", "-O", "qcow2", chains[d.Name], temp).CombinedOutput(); cerr != nil {
			_ = os.Remove(temp)
			err = fmt.Errorf("writing disk %s of domain %s from the chain: %v: %s", d.Name, req.Domain, cerr, strings.TrimSpace(string(out)))
			return res, err
		}
		if err = compare(ctx, chains[d.Name], "qcow2", temp); err != nil {
			_ = os.Remove(temp)
			return res, err
		}
		if err = os.Rename(temp, image); err != nil {
			_ = os.Remove(temp)
			return res, fmt.Errorf("restoring disk %s: %w", d.Name, err)
		}
		written = append(written, image)
		if err = conn.GrantImage(image); err != nil {
			return res, err
		}
		res.Disks[d.Name] = image
	}
	if err = conn.DefineFrom(definition, req.Domain, res.Disks); err != nil {
		return res, err
	}
	res.Created = true
	if err = conn.StartDomain(req.Domain); err != nil {
		return res, fmt.Errorf("domain %s was defined with its restored disks but did not start: %w", req.Domain, err)
	}
	res.Started = true
	return res, nil
}
