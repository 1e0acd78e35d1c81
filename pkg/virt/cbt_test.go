package virt_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/backstop-io/backstop/pkg/virt"
	"github.com/backstop-io/backstop/pkg/virt/virttest"
	"github.com/backstop-io/backstop/pkg/vmmanifest"
)

func fileDigest(t *testing.T, path string) string {
	t.Helper()
	sum, err := vmmanifest.FileSHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func wantCBT(t *testing.T, c *virt.Conn, domain, stateDir string, want virt.CBTState) {
	t.Helper()
	got, err := c.CBTStatus(domain, stateDir)
	if err != nil || got != want {
		t.Fatalf("changed block tracking of %s: %q (%v), want %q", domain, got, err, want)
	}
}

// TestCBTForRawDisk: a domain with a raw disk gets changed block tracking
// through a qcow2 overlay whose data file is the raw image: the raw image
// is not changed by enabling it, takes effect at the next start
// (PendingRestart until then), incremental backups then hold exactly what
// was written, the writes land in the raw image, and disabling it puts the
// raw image back as the disk and removes the overlay and its checkpoints.
func TestCBTForRawDisk(t *testing.T) {
	c := open(t)
	ctx := context.Background()
	dom := virttest.NewRawDomain(t, "backstop-virt-cbt", "64M")
	stateDir := virttest.Dir(t)
	dom.Write(t, 0x5a, "1M", "2M")
	wantCBT(t, c, dom.Name, stateDir, virt.CBTDisabled)
	if _, err := c.PushBackup(ctx, virt.BackupRequest{Domain: dom.Name, TargetDir: mkdir(t, dom.Dir, "nocbt"), Checkpoint: "cp0"}, nil); err == nil {
		t.Error("a checkpoint on a raw disk without an overlay was accepted")
	}

	dom.Stop(t)
	before := fileDigest(t, dom.Disk)
	dom.Start(t)
	state, err := c.EnableCBT(dom.Name, stateDir)
	if err != nil || state != virt.CBTPendingRestart {
		t.Fatalf("enabling on a running domain: %q, %v; want %q", state, err, virt.CBTPendingRestart)
	}
	dom.Stop(t)
	wantCBT(t, c, dom.Name, stateDir, virt.CBTEnabled)
	if after := fileDigest(t, dom.Disk); after != before {
		t.Fatalf("making the overlay changed the raw image (sha256 %s, was %s)", after, before)
	}
	// Enabling again changes nothing.
	if state, err := c.EnableCBT(dom.Name, stateDir); err != nil || state != virt.CBTEnabled {
		t.Fatalf("enabling again: %q, %v", state, err)
	}
	dom.Start(t)
	wantCBT(t, c, dom.Name, stateDir, virt.CBTEnabled)
	disks, err := c.Disks(dom.Name)
	if err != nil || len(disks) != 1 || disks[0].Format != "qcow2" || filepath.Dir(disks[0].Source) != filepath.Join(stateDir, dom.Name) {
		t.Fatalf("disks of the running domain: %+v, %v; want vda read through its overlay", disks, err)
	}

	full, err := c.PushBackup(ctx, virt.BackupRequest{Domain: dom.Name, TargetDir: mkdir(t, dom.Dir, "full"), Checkpoint: "cp1"}, nil)
	if err != nil {
		t.Fatalf("full backup through the overlay: %v", err)
	}
	dom.Write(t, 0x77, "8M", "128k")
	dom.Write(t, 0x78, "40M", "64k")
	inc, err := c.PushBackup(ctx, virt.BackupRequest{Domain: dom.Name, TargetDir: mkdir(t, dom.Dir, "inc"),
		Incremental: "cp1", Checkpoint: "cp2", Backing: map[string]string{"vda": full.Targets["vda"]}}, nil)
	if err != nil {
		t.Fatalf("incremental backup through the overlay: %v", err)
	}
	want := []string{"8388608+131072", "41943040+65536"}
	if got := virttest.DataRanges(t, inc.Targets["vda"]); !slices.Equal(got, want) {
		t.Errorf("incremental holds %v, want exactly the writes %v", got, want)
	}
	dom.Stop(t)
	// The guest's writes are in the raw image, and the backup chain reads
	// as the raw image.
	virttest.Run(t, "qemu-img", "compare", "-f", "qcow2", "-F", "raw", inc.Targets["vda"], dom.Disk)
	if out := virttest.Run(t, "qemu-io", "-r", "-f", "raw", "-c", "read -P 0x77 8M 128k", dom.Disk); !strings.Contains(out, "read 131072/131072") {
		t.Errorf("the raw image lacks the guest's write: %s", out)
	}

	// Disabling on a running domain waits for a restart; the overlay and
	// the checkpoints go once nothing runs on them.
	dom.Start(t)
	state, err = c.DisableCBT(dom.Name, stateDir)
	if err != nil || state != virt.CBTPendingRestart {
		t.Fatalf("disabling on a running domain: %q, %v; want %q", state, err, virt.CBTPendingRestart)
	}
	if _, err := os.Stat(filepath.Join(stateDir, dom.Name, "vda.qcow2")); err != nil {
		t.Fatalf("the overlay in use was removed: %v", err)
	}
	dom.Stop(t)
	if state, err := c.DisableCBT(dom.Name, stateDir); err != nil || state != virt.CBTDisabled {
		t.Fatalf("disabling on the stopped domain: %q, %v", state, err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, dom.Name)); !os.IsNotExist(err) {
		t.Errorf("overlays left after disabling: %v", err)
	}
	if cps, err := c.Checkpoints(dom.Name); err != nil || len(cps) != 0 {
		t.Errorf("checkpoints left after disabling: %v, %v", cps, err)
	}
	dom.Start(t)
	disks, err = c.Disks(dom.Name)
	if err != nil || len(disks) != 1 || disks[0].Format != "raw" || disks[0].Source != dom.Disk {
		t.Fatalf("disks after disabling: %+v, %v; want the raw image", disks, err)
	}
	dom.Stop(t)
	virttest.Run(t, "qemu-img", "compare", "-f", "qcow2", "-F", "raw", inc.Targets["vda"], dom.Disk)
}

// TestRawOverlayRefusesNonRaw: only a raw image gets an overlay.
func TestRawOverlayRefusesNonRaw(t *testing.T) {
	dir := virttest.Dir(t)
	img := filepath.Join(dir, "disk.qcow2")
	virttest.Run(t, "qemu-img", "create", "-q", "-f", "qcow2", img, "1M")
	err := virt.CreateRawOverlay(img, filepath.Join(dir, "ov.qcow2"))
	if err == nil || !strings.Contains(err.Error(), "not raw") {
		t.Fatalf("overlay of a qcow2 image: %v, want an error saying it is not raw", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ov.qcow2")); !os.IsNotExist(err) {
		t.Errorf("an overlay was left: %v", err)
	}
}

// TestCBTOfQcow2Disk: a domain whose disks are qcow2 keeps bitmaps without
// an overlay: Enabled, and neither enabling nor disabling redefines it or
// makes overlays; a missing domain is ErrDomainNotFound.
func TestCBTOfQcow2Disk(t *testing.T) {
	c := open(t)
	dom := virttest.NewDomain(t, "backstop-virt-cbt-qcow2", "16M")
	stateDir := virttest.Dir(t)
	wantCBT(t, c, dom.Name, stateDir, virt.CBTEnabled)
	for name, op := range map[string]func(string, string) (virt.CBTState, error){"enabling": c.EnableCBT, "disabling": c.DisableCBT} {
		if state, err := op(dom.Name, stateDir); err != nil || state != virt.CBTEnabled {
			t.Errorf("%s on a qcow2 disk: %q, %v; want %q", name, state, err, virt.CBTEnabled)
		}
	}
	disks, err := c.Disks(dom.Name)
	if err != nil || len(disks) != 1 || disks[0].Source != dom.Disk {
		t.Errorf("disks: %+v, %v; want the qcow2 image itself", disks, err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, dom.Name)); !os.IsNotExist(err) {
		t.Errorf("an overlay directory was made for a qcow2 disk: %v", err)
	}
	if _, err := c.CBTStatus("backstop-virt-no-such-domain", stateDir); !errors.Is(err, virt.ErrDomainNotFound) {
		t.Errorf("status of a missing domain: %v, want ErrDomainNotFound", err)
	}
}

// TestCBTStaleOverlayReplaced: an overlay left by an enabling that was
// undone (the domain then ran on its raw disk, writing past the overlay's
// bitmaps) is not reused: enabling again makes a new one and drops the
// checkpoints whose bitmaps the old one held, so no incremental can miss
// those writes.
func TestCBTStaleOverlayReplaced(t *testing.T) {
	c := open(t)
	ctx := context.Background()
	dom := virttest.NewRawDomain(t, "backstop-virt-cbt-stale", "16M")
	stateDir := virttest.Dir(t)
	if _, err := c.EnableCBT(dom.Name, stateDir); err != nil {
		t.Fatal(err)
	}
	dom.Stop(t)
	dom.Start(t)
	wantCBT(t, c, dom.Name, stateDir, virt.CBTEnabled)
	if _, err := c.PushBackup(ctx, virt.BackupRequest{Domain: dom.Name, TargetDir: mkdir(t, dom.Dir, "full"), Checkpoint: "cp1"}, nil); err != nil {
		t.Fatal(err)
	}
	// Disabled, restarted on the raw disk (the overlay not yet removed),
	// written to, then enabled again.
	if state, err := c.DisableCBT(dom.Name, stateDir); err != nil || state != virt.CBTPendingRestart {
		t.Fatalf("disabling: %q %v", state, err)
	}
	dom.Stop(t)
	dom.Start(t)
	dom.Write(t, 0x42, "1M", "64k")
	overlay := filepath.Join(stateDir, dom.Name, "vda.qcow2")
	if bitmaps := bitmapsOf(t, overlay); !slices.Equal(bitmaps, []string{"cp1"}) {
		t.Fatalf("bitmaps of the old overlay: %v, want cp1", bitmaps)
	}
	if state, err := c.EnableCBT(dom.Name, stateDir); err != nil || state != virt.CBTPendingRestart {
		t.Fatalf("enabling again: %q %v", state, err)
	}
	if bitmaps := bitmapsOf(t, overlay); len(bitmaps) != 0 {
		t.Errorf("the overlay after enabling again has bitmaps %v: the stale one was reused", bitmaps)
	}
	if cps, err := c.Checkpoints(dom.Name); err != nil || len(cps) != 0 {
		t.Errorf("checkpoints after enabling again: %v %v, want none", cps, err)
	}
}
