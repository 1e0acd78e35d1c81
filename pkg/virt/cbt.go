package virt

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/backstop-io/backstop/pkg/rootdir"
)

// Changed block tracking for raw disks (KubeVirt VEP 22, "Enable/Disable
// QEMU backup"). Dirty bitmaps live only in qcow2 images, so a raw disk gets
// a qcow2 overlay that holds metadata and bitmaps only: its data stays in
// the raw image, the overlay's external data file, written in place
// (data_file_raw, so the raw image remains a complete raw image). libvirt
// 10.10 and later describe this with <dataStore>; older libvirt (9.0 on
// Debian 12) knows nothing of data files, so the disk's source becomes the
// overlay and QEMU opens the raw image named in the overlay's header.
//
// Enabling or disabling changes the domain's persistent definition; a
// running domain keeps its disks until it is started again
// (CBTPendingRestart), as in KubeVirt before libvirt can add overlays live.

// CBTState is a domain's changed block tracking state, with KubeVirt's
// names (VirtualMachine status.changedBlockTracking).
type CBTState string

const (
	// CBTPendingRestart: the definition has changed (enabled or disabled);
	// the running domain takes it when it is started again.
	CBTPendingRestart CBTState = "PendingRestart"
	// CBTInitializing: overlays are being made (reported by callers while
	// EnableCBT runs).
	CBTInitializing CBTState = "Initializing"
	// CBTEnabled: every file disk keeps dirty bitmaps: qcow2 disks
	// themselves, raw disks through their overlays.
	CBTEnabled CBTState = "Enabled"
	// CBTDisabled: a raw disk has no overlay.
	CBTDisabled CBTState = "Disabled"
)

// CreateRawOverlay makes overlay, a qcow2 image whose external data file is
// the raw image raw, mapping it one to one, without changing raw: the
// overlay is created against a scratch data file, then amended to name raw.
// (qemu-img create -o data_file=raw would truncate raw to zeros.)
func CreateRawOverlay(raw, overlay string) error {
	info, err := imageInfo(raw)
	if err != nil {
		return err
	}
	if info.Format != "raw" {
		return fmt.Errorf("creating an overlay for %s: the image is %s, not raw", raw, info.Format)
	}
	absRaw, err := filepath.Abs(raw)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(overlay), 0o755); err != nil {
		return fmt.Errorf("creating the overlay directory: %w", err)
	}
	tmp := overlay + ".tmp"
	scratch := overlay + ".scratch"
	defer os.Remove(scratch)
	defer os.Remove(tmp)
	size := strconv.FormatUint(info.VirtualSize, 10)
	if err := qemuImg("create", "-q", "-f", "qcow2", "-o", "data_file="+scratch+",data_file_raw=on", tmp, size); err != nil {
		return fmt.Errorf("creating the overlay of %s: %w", raw, err)
	}
	if err := qemuImg("amend", "-q", "-f", "qcow2", "-o", "data_file="+absRaw, tmp); err != nil {
		return fmt.Errorf("pointing the overlay at %s: %w", raw, err)
	}
	if err := os.Rename(tmp, overlay); err != nil {
		return fmt.Errorf("creating the overlay of %s: %w", raw, err)
	}
	return nil
}

// imageDetails is what `qemu-img info` says of an image.
type imageDetails struct {
	Format         string `json:"format"`
	VirtualSize    uint64 `json:"virtual-size"`
	FormatSpecific struct {
		Data struct {
			DataFile    string `json:"data-file"`
			DataFileRaw bool   `json:"data-file-raw"`
			Bitmaps     []struct {
				Name string `json:"name"`
			} `json:"bitmaps"`
		} `json:"data"`
	} `json:"format-specific"`
}

func imageInfo(path string) (imageDetails, error) {
	var info imageDetails
	out, err := exec.Command("qemu-img", "info", "-U", "--output=json", path).Output()
	if err != nil {
		return info, fmt.Errorf("reading image %s: %w", path, commandError(err))
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return info, fmt.Errorf("reading image %s: %w", path, err)
	}
	return info, nil
}

func qemuImg(args ...string) error {
	if out, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("qemu-img %s: %v: %s", args[0], err, strings.TrimSpace(string(out)))
	}
	return nil
}

func commandError(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return err
}

// OverlayDir is where a domain's overlays are kept: stateDir/<domain>,
// an error when the domain's name cannot be a directory's (package
// rootdir).
func OverlayDir(stateDir, domain string) (string, error) {
	return rootdir.Dir(stateDir).Join(domain)
}

// RemoveOverlayDir removes a domain's overlays, never anything outside
// stateDir/<domain>.
func RemoveOverlayDir(stateDir, domain string) error {
	return rootdir.Dir(stateDir).RemoveAll(domain)
}

// EnableCBT gives every raw file disk of the domain an overlay (made in
// stateDir/<domain>/<disk>.qcow2 if it is not there) and defines the domain
// to read its disks through them. QEMU's user gets read and write access to
// the raw images (an ACL entry), which libvirt no longer manages. A running domain is PendingRestart until it is
// started again; a stopped one is Enabled.
func (c *Conn) EnableCBT(domain, stateDir string) (CBTState, error) {
	owner, err := c.qemuOwner()
	if err != nil {
		return "", err
	}
	dir, err := OverlayDir(stateDir, domain)
	if err != nil {
		return "", err
	}
	// An overlay left from an earlier enabling is current only while the
	// running domain writes through it; otherwise the raw image may have
	// been written without it (the domain ran on its raw disks) and its
	// bitmaps would hide those writes from incrementals: it and the
	// checkpoints it holds bitmaps for are dropped and made anew.
	inUse, err := c.liveOverlays(domain, stateDir)
	if err != nil {
		return "", err
	}
	stale := false
	err = c.redefineDisks(domain, "with overlays", func(disk *libvirtxml.DomainDisk) error {
		format, raw, target := diskFormat(disk), diskFile(disk), diskTarget(disk)
		if format != "raw" || target == "" {
			return nil
		}
		if err := rootdir.Name(target + ".qcow2"); err != nil {
			return fmt.Errorf("disk target %q cannot name an overlay: %w", target, err)
		}
		overlay := filepath.Join(dir, target+".qcow2")
		if _, err := os.Stat(overlay); err == nil && !inUse[overlay] {
			if !stale {
				if err := c.deleteCheckpointMetadata(domain); err != nil {
					return err
				}
				stale = true
			}
			if err := os.Remove(overlay); err != nil {
				return fmt.Errorf("disk %s: removing its stale overlay: %w", target, err)
			}
		}
		if _, err := os.Stat(overlay); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("creating the overlay directory: %w", err)
			}
			if owner != nil {
				if err := checkReachable(dir, owner.uid, owner.gid); err != nil {
					return err
				}
			}
			if err := CreateRawOverlay(raw, overlay); err != nil {
				return fmt.Errorf("disk %s: %w", target, err)
			}
		} else if err != nil {
			return fmt.Errorf("disk %s: %w", target, err)
		}
		if owner != nil {
			// libvirt labels the overlay it knows; QEMU opens the raw
			// image too. An ACL entry, not the owner: libvirt puts the
			// raw image's owner back when a domain that used it directly
			// stops.
			if err := grantReadWrite(raw, owner.uid); err != nil {
				return fmt.Errorf("disk %s: giving QEMU access to its raw image: %w", target, err)
			}
		}
		setDiskSource(disk, "qcow2", overlay)
		return nil
	})
	if err != nil {
		return "", err
	}
	return c.CBTStatus(domain, stateDir)
}

// redefineDisks lets rewrite change each file-backed disk of the domain's
// persistent definition and defines the domain again if any changed.
func (c *Conn) redefineDisks(domain, what string, rewrite func(disk *libvirtxml.DomainDisk) error) error {
	d, err := c.domain(domain)
	if err != nil {
		return err
	}
	defer d.Free()
	desc, err := d.GetXMLDesc(libvirt.DOMAIN_XML_INACTIVE | libvirt.DOMAIN_XML_SECURE)
	if err != nil {
		return fmt.Errorf("domain %s: reading its definition: %w", domain, err)
	}
	dx, err := parseDomain(desc)
	if err != nil {
		return fmt.Errorf("domain %s: %w", domain, err)
	}
	before, err := dx.Marshal()
	if err != nil {
		return fmt.Errorf("domain %s: encoding its definition: %w", domain, err)
	}
	for _, disk := range fileDisks(dx) {
		if err := rewrite(disk); err != nil {
			return fmt.Errorf("domain %s: %w", domain, err)
		}
	}
	newDesc, err := dx.Marshal()
	if err != nil {
		return fmt.Errorf("domain %s: encoding its definition: %w", domain, err)
	}
	if newDesc == before {
		return nil
	}
	if err := c.define(newDesc); err != nil {
		return fmt.Errorf("domain %s: defining it %s: %w", domain, what, err)
	}
	return nil
}

// DisableCBT defines the domain to read its raw images directly again. The
// overlays (and their bitmaps, with libvirt's checkpoint metadata) are
// removed once no running QEMU uses them: at once for a stopped domain,
// otherwise by a call after the domain was started again (PendingRestart
// until then).
func (c *Conn) DisableCBT(domain, stateDir string) (CBTState, error) {
	err := c.redefineDisks(domain, "without overlays", func(disk *libvirtxml.DomainDisk) error {
		source := diskFile(disk)
		if diskFormat(disk) != "qcow2" || !isOverlayOf(stateDir, domain, source) {
			return nil
		}
		info, err := imageInfo(source)
		if err != nil {
			return err
		}
		raw := info.FormatSpecific.Data.DataFile
		if raw == "" || !info.FormatSpecific.Data.DataFileRaw {
			return nil
		}
		setDiskSource(disk, "raw", raw)
		return nil
	})
	if err != nil {
		return "", err
	}
	state, err := c.CBTStatus(domain, stateDir)
	if err != nil || state == CBTPendingRestart {
		return state, err
	}
	// Nothing runs on the overlays: drop them and the checkpoints whose
	// bitmaps they held.
	dir, err := OverlayDir(stateDir, domain)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return state, nil
	}
	if err := c.deleteCheckpointMetadata(domain); err != nil {
		return "", err
	}
	if err := RemoveOverlayDir(stateDir, domain); err != nil {
		return "", fmt.Errorf("domain %s: removing its overlays: %w", domain, err)
	}
	return state, nil
}

// deleteCheckpointMetadata drops libvirt's record of every checkpoint of
// the domain (their bitmaps go with the overlays that hold them).
func (c *Conn) deleteCheckpointMetadata(domain string) error {
	d, err := c.domain(domain)
	if err != nil {
		return err
	}
	defer d.Free()
	cps, err := d.ListAllCheckpoints(0)
	if err != nil {
		return fmt.Errorf("domain %s: listing checkpoints: %w", domain, err)
	}
	for i := range cps {
		err := cps[i].Delete(libvirt.DOMAIN_CHECKPOINT_DELETE_METADATA_ONLY)
		_ = cps[i].Free()
		if err != nil && !isError(err, libvirt.ERR_NO_DOMAIN_CHECKPOINT) {
			return fmt.Errorf("domain %s: deleting checkpoint metadata: %w", domain, err)
		}
	}
	return nil
}

// liveOverlays returns the domain's overlays its running QEMU reads its
// disks through (none when it is stopped).
func (c *Conn) liveOverlays(domain, stateDir string) (map[string]bool, error) {
	d, err := c.domain(domain)
	if err != nil {
		return nil, err
	}
	defer d.Free()
	out := map[string]bool{}
	if active, err := d.IsActive(); err != nil || !active {
		return out, err
	}
	live, err := d.GetXMLDesc(0)
	if err != nil {
		return nil, fmt.Errorf("domain %s: reading its live definition: %w", domain, err)
	}
	dx, err := parseDomain(live)
	if err != nil {
		return nil, fmt.Errorf("domain %s: %w", domain, err)
	}
	for _, disk := range fileDisks(dx) {
		if source := diskFile(disk); diskFormat(disk) == "qcow2" && isOverlayOf(stateDir, domain, source) {
			out[source] = true
		}
	}
	return out, nil
}

// CBTStatus reports whether the domain's disks keep dirty bitmaps: Enabled
// when every file disk is qcow2 (itself, or a raw disk's overlay), Disabled
// when a raw disk has no overlay, PendingRestart when the running domain
// still has the disks of the previous definition.
func (c *Conn) CBTStatus(domain, stateDir string) (CBTState, error) {
	d, err := c.domain(domain)
	if err != nil {
		return "", err
	}
	defer d.Free()
	persistent, err := d.GetXMLDesc(libvirt.DOMAIN_XML_INACTIVE)
	if err != nil {
		return "", fmt.Errorf("domain %s: reading its definition: %w", domain, err)
	}
	persistentDom, err := parseDomain(persistent)
	if err != nil {
		return "", fmt.Errorf("domain %s: %w", domain, err)
	}
	active, err := d.IsActive()
	if err != nil {
		return "", fmt.Errorf("domain %s: %w", domain, err)
	}
	if active {
		live, err := d.GetXMLDesc(0)
		if err != nil {
			return "", fmt.Errorf("domain %s: reading its live definition: %w", domain, err)
		}
		liveDom, err := parseDomain(live)
		if err != nil {
			return "", fmt.Errorf("domain %s: %w", domain, err)
		}
		if usesOverlays(liveDom, stateDir, domain) != usesOverlays(persistentDom, stateDir, domain) || tracksChanges(liveDom) != tracksChanges(persistentDom) {
			return CBTPendingRestart, nil
		}
	}
	if tracksChanges(persistentDom) {
		return CBTEnabled, nil
	}
	return CBTDisabled, nil
}

// tracksChanges reports whether every file disk of a domain can hold
// dirty bitmaps (is qcow2).
func tracksChanges(d *libvirtxml.Domain) bool {
	for _, disk := range fileDisks(d) {
		if diskFormat(disk) != "qcow2" {
			return false
		}
	}
	return true
}

// usesOverlays reports whether a domain reads a disk through one of its
// overlays.
func usesOverlays(d *libvirtxml.Domain, stateDir, domain string) bool {
	for _, disk := range fileDisks(d) {
		if diskFormat(disk) == "qcow2" && isOverlayOf(stateDir, domain, diskFile(disk)) {
			return true
		}
	}
	return false
}

// isOverlayOf compares names only (no file system access: it runs for
// every disk at every status read).
func isOverlayOf(stateDir, domain, path string) bool {
	return rootdir.Name(domain) == nil && filepath.Dir(path) == filepath.Join(stateDir, domain)
}

func (c *Conn) define(desc string) error {
	conn, err := c.lv()
	if err != nil {
		return err
	}
	d, err := conn.DomainDefineXML(desc)
	if err != nil {
		return err
	}
	return d.Free()
}

// fileOwner is a uid and gid.
type fileOwner struct{ uid, gid int }

// qemuOwner is the uid and gid QEMU processes run as (nil: the DAC model is
// off, files are not relabelled).
func (c *Conn) qemuOwner() (*fileOwner, error) {
	conn, err := c.lv()
	if err != nil {
		return nil, err
	}
	caps, err := conn.GetCapabilities()
	if err != nil {
		return nil, fmt.Errorf("reading host capabilities: %w", err)
	}
	label, err := qemuBaseLabel(caps)
	if err != nil || label == "" {
		return nil, err
	}
	// "+64055:+64055"
	uid, gid, ok := strings.Cut(strings.TrimSpace(label), ":")
	u, err1 := strconv.Atoi(strings.TrimPrefix(uid, "+"))
	g, err2 := strconv.Atoi(strings.TrimPrefix(gid, "+"))
	if !ok || err1 != nil || err2 != nil {
		return nil, fmt.Errorf("unexpected DAC label %q for QEMU", label)
	}
	return &fileOwner{uid: u, gid: g}, nil
}
