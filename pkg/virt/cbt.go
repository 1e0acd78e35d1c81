package virt

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"libvirt.org/go/libvirt"
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

// fileDisk matches a file-backed disk (device disk) of libvirt's domain XML,
// which libvirt writes in one canonical form.
var (
	fileDisk   = regexp.MustCompile(`(?s)<disk type='file' device='disk'[^>]*>.*?</disk>`)
	driverTag  = regexp.MustCompile(`<driver\b[^>]*>`)
	driverType = regexp.MustCompile(`\btype='([^']*)'`)
	sourceFile = regexp.MustCompile(`<source file='([^']*)'`)
)

// diskSource is the driver type and source file of one disk element.
func diskSource(disk string) (format, source string) {
	if m := driverTag.FindString(disk); m != "" {
		if t := driverType.FindStringSubmatch(m); t != nil {
			format = t[1]
		}
	}
	if m := sourceFile.FindStringSubmatch(disk); m != nil {
		source = html.UnescapeString(m[1])
	}
	return format, source
}

// withDiskSource returns disk with its driver type and source file replaced.
func withDiskSource(disk, format, source string) string {
	disk = driverTag.ReplaceAllStringFunc(disk, func(tag string) string {
		return driverType.ReplaceAllString(tag, "type='"+format+"'")
	})
	return sourceFile.ReplaceAllLiteralString(disk, "<source file='"+xmlAttr(source)+"'")
}

func xmlAttr(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return strings.ReplaceAll(b.String(), "'", "&apos;")
}

// OverlayDir is where a domain's overlays are kept.
func OverlayDir(stateDir, domain string) string { return filepath.Join(stateDir, domain) }

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
	dir := OverlayDir(stateDir, domain)
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
	err = c.redefineDisks(domain, "with overlays", func(disk string) (string, error) {
		format, raw := diskSource(disk)
		target := targetDev(disk)
		if format != "raw" || raw == "" || target == "" {
			return disk, nil
		}
		overlay := filepath.Join(dir, target+".qcow2")
		if _, err := os.Stat(overlay); err == nil && !inUse[overlay] {
			if !stale {
				if err := c.deleteCheckpointMetadata(domain); err != nil {
					return "", err
				}
				stale = true
			}
			if err := os.Remove(overlay); err != nil {
				return "", fmt.Errorf("disk %s: removing its stale overlay: %w", target, err)
			}
		}
		if _, err := os.Stat(overlay); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return "", fmt.Errorf("creating the overlay directory: %w", err)
			}
			if owner != nil {
				if err := checkReachable(dir, owner.uid, owner.gid); err != nil {
					return "", err
				}
			}
			if err := CreateRawOverlay(raw, overlay); err != nil {
				return "", fmt.Errorf("disk %s: %w", target, err)
			}
		} else if err != nil {
			return "", fmt.Errorf("disk %s: %w", target, err)
		}
		if owner != nil {
			// libvirt labels the overlay it knows; QEMU opens the raw
			// image too. An ACL entry, not the owner: libvirt puts the
			// raw image's owner back when a domain that used it directly
			// stops.
			if err := grantReadWrite(raw, owner.uid); err != nil {
				return "", fmt.Errorf("disk %s: giving QEMU access to its raw image: %w", target, err)
			}
		}
		return withDiskSource(disk, "qcow2", overlay), nil
	})
	if err != nil {
		return "", err
	}
	return c.CBTStatus(domain, stateDir)
}

// redefineDisks rewrites each file-backed disk of the domain's persistent
// definition and defines the domain again if any changed.
func (c *Conn) redefineDisks(domain, what string, rewrite func(disk string) (string, error)) error {
	d, err := c.domain(domain)
	if err != nil {
		return err
	}
	defer d.Free()
	desc, err := d.GetXMLDesc(libvirt.DOMAIN_XML_INACTIVE | libvirt.DOMAIN_XML_SECURE)
	if err != nil {
		return fmt.Errorf("domain %s: reading its definition: %w", domain, err)
	}
	var failed error
	newDesc := fileDisk.ReplaceAllStringFunc(desc, func(disk string) string {
		if failed != nil {
			return disk
		}
		out, err := rewrite(disk)
		if err != nil {
			failed = err
			return disk
		}
		return out
	})
	if failed != nil {
		return fmt.Errorf("domain %s: %w", domain, failed)
	}
	if newDesc == desc {
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
	err := c.redefineDisks(domain, "without overlays", func(disk string) (string, error) {
		format, source := diskSource(disk)
		if format != "qcow2" || !isOverlayOf(stateDir, domain, source) {
			return disk, nil
		}
		info, err := imageInfo(source)
		if err != nil {
			return "", err
		}
		raw := info.FormatSpecific.Data.DataFile
		if raw == "" || !info.FormatSpecific.Data.DataFileRaw {
			return disk, nil
		}
		return withDiskSource(disk, "raw", raw), nil
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
	if _, err := os.Stat(OverlayDir(stateDir, domain)); errors.Is(err, os.ErrNotExist) {
		return state, nil
	}
	if err := c.deleteCheckpointMetadata(domain); err != nil {
		return "", err
	}
	if err := os.RemoveAll(OverlayDir(stateDir, domain)); err != nil {
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
	for _, disk := range fileDisk.FindAllString(live, -1) {
		if format, source := diskSource(disk); format == "qcow2" && isOverlayOf(stateDir, domain, source) {
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
	active, err := d.IsActive()
	if err != nil {
		return "", fmt.Errorf("domain %s: %w", domain, err)
	}
	if active {
		live, err := d.GetXMLDesc(0)
		if err != nil {
			return "", fmt.Errorf("domain %s: reading its live definition: %w", domain, err)
		}
		if usesOverlays(live, stateDir, domain) != usesOverlays(persistent, stateDir, domain) || tracksChanges(live) != tracksChanges(persistent) {
			return CBTPendingRestart, nil
		}
	}
	if tracksChanges(persistent) {
		return CBTEnabled, nil
	}
	return CBTDisabled, nil
}

// tracksChanges reports whether every file disk of a domain XML can hold
// dirty bitmaps (is qcow2).
func tracksChanges(desc string) bool {
	for _, disk := range fileDisk.FindAllString(desc, -1) {
		if format, _ := diskSource(disk); format != "qcow2" {
			return false
		}
	}
	return true
}

// usesOverlays reports whether a domain XML reads a disk through one of the
// domain's overlays.
func usesOverlays(desc, stateDir, domain string) bool {
	for _, disk := range fileDisk.FindAllString(desc, -1) {
		if format, source := diskSource(disk); format == "qcow2" && isOverlayOf(stateDir, domain, source) {
			return true
		}
	}
	return false
}

func isOverlayOf(stateDir, domain, path string) bool {
	return filepath.Dir(path) == OverlayDir(stateDir, domain)
}

var targetTag = regexp.MustCompile(`<target dev='([^']*)'`)

func targetDev(disk string) string {
	if m := targetTag.FindStringSubmatch(disk); m != nil {
		return m[1]
	}
	return ""
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

// capabilitiesXML is the part of the host capabilities naming the user
// QEMU runs as (the DAC security model's base label for QEMU domains).
type capabilitiesXML struct {
	Host struct {
		SecModels []struct {
			Model      string `xml:"model"`
			BaseLabels []struct {
				Type  string `xml:"type,attr"`
				Label string `xml:",chardata"`
			} `xml:"baselabel"`
		} `xml:"secmodel"`
	} `xml:"host"`
}

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
	var cx capabilitiesXML
	if err := xml.Unmarshal([]byte(caps), &cx); err != nil {
		return nil, fmt.Errorf("decoding host capabilities: %w", err)
	}
	for _, m := range cx.Host.SecModels {
		if m.Model != "dac" {
			continue
		}
		for _, l := range m.BaseLabels {
			if l.Type != "qemu" {
				continue
			}
			// "+64055:+64055"
			uid, gid, ok := strings.Cut(strings.TrimSpace(l.Label), ":")
			u, err1 := strconv.Atoi(strings.TrimPrefix(uid, "+"))
			g, err2 := strconv.Atoi(strings.TrimPrefix(gid, "+"))
			if !ok || err1 != nil || err2 != nil {
				return nil, fmt.Errorf("unexpected DAC label %q for QEMU", l.Label)
			}
			return &fileOwner{uid: u, gid: g}, nil
		}
	}
	return nil, nil
}
