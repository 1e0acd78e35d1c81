package virt_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/backstop-io/backstop/pkg/virt"
	"github.com/backstop-io/backstop/pkg/virt/virttest"
)

func open(t *testing.T) *virt.Conn {
	t.Helper()
	virttest.Require(t)
	c, err := virt.Open(virttest.URI)
	if err != nil {
		t.Fatalf("libvirt is needed (make test installs and starts it: hack/install-libvirt.sh, hack/start-libvirt.sh): %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func backingOf(t *testing.T, image string) string {
	t.Helper()
	var info struct {
		BackingFilename string `json:"backing-filename"`
	}
	if err := json.Unmarshal([]byte(virttest.Run(t, "qemu-img", "info", "-U", "--output=json", image)), &info); err != nil {
		t.Fatal(err)
	}
	return info.BackingFilename
}

func mkdir(t *testing.T, parent, name string) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPushBackupChain: a full backup and three incrementals of a running
// domain, each incremental holding exactly the blocks written since the
// previous backup and naming it as its backing file, so that the last one
// reads as the live disk.
func TestPushBackupChain(t *testing.T) {
	c := open(t)
	dom := virttest.NewDomain(t, "backstop-virt-chain", "64M")
	ctx := context.Background()
	dom.Write(t, 0x11, "0", "4M")
	dom.Write(t, 0x33, "20M", "8M")

	full, err := c.PushBackup(ctx, virt.BackupRequest{Domain: dom.Name, TargetDir: mkdir(t, dom.Dir, "full"), Checkpoint: "cp1", Quiesce: true}, nil)
	if err != nil {
		t.Fatalf("full backup: %v", err)
	}
	// No guest agent: the backup goes on unquiesced and says why.
	if full.Quiesced || full.QuiesceError == nil || !strings.Contains(full.QuiesceError.Error(), "agent") {
		t.Errorf("quiesce without a guest agent: quiesced %v, error %v", full.Quiesced, full.QuiesceError)
	}
	prev := full.Targets["vda"]
	if got := virttest.DataRanges(t, prev); len(got) == 0 {
		t.Fatal("the full backup holds no data")
	}

	for i, c2 := range []struct {
		writes [][3]string // pattern, offset, length
		want   []string
		bytes  uint64
	}{
		{[][3]string{{"ab", "1M", "64k"}, {"cd", "40M", "192k"}}, []string{"1048576+65536", "41943040+196608"}, 256 << 10},
		{[][3]string{{"ef", "50M", "128k"}}, []string{"52428800+131072"}, 128 << 10},
		{[][3]string{{"77", "0", "64k"}, {"78", "63M", "1M"}}, []string{"0+65536", "66060288+1048576"}, (64 << 10) + (1 << 20)},
	} {
		for _, w := range c2.writes {
			var p byte
			fmt.Sscanf(w[0], "%x", &p)
			dom.Write(t, p, w[1], w[2])
		}
		since, next := fmt.Sprintf("cp%d", i+1), fmt.Sprintf("cp%d", i+2)
		// The checkpoint's size is what the incremental will copy.
		if size, err := c.CheckpointSize(dom.Name, since); err != nil || size != c2.bytes {
			t.Errorf("size of %s: %d (%v), want %d", since, size, err, c2.bytes)
		}
		res, err := c.PushBackup(ctx, virt.BackupRequest{Domain: dom.Name, TargetDir: mkdir(t, dom.Dir, fmt.Sprintf("inc%d", i+1)),
			Incremental: since, Backing: map[string]string{"vda": prev}, Checkpoint: next}, nil)
		if err != nil {
			t.Fatalf("incremental %d: %v", i+1, err)
		}
		target := res.Targets["vda"]
		if got := virttest.DataRanges(t, target); !slices.Equal(got, c2.want) {
			t.Errorf("incremental %d holds %v, want exactly the writes %v", i+1, got, c2.want)
		}
		if res.Bytes != c2.bytes {
			t.Errorf("incremental %d copied %d bytes, want %d", i+1, res.Bytes, c2.bytes)
		}
		if got := backingOf(t, target); got != prev {
			t.Errorf("incremental %d backing file %q, want %q", i+1, got, prev)
		}
		prev = target
	}

	// The chain, read through the last incremental, is the live disk.
	dom.Suspend(t)
	virttest.Run(t, "qemu-img", "compare", "-U", prev, dom.Disk)
	dom.Resume(t)
	cps, err := c.Checkpoints(dom.Name)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(cps)
	if strings.Join(cps, ",") != "cp1,cp2,cp3,cp4" {
		t.Errorf("checkpoints %v", cps)
	}
}

// TestCheckpointRedefinition: after the domain is defined anew, libvirt
// knows none of its checkpoints; redefined from their saved XML, an
// incremental since the last one holds exactly what was written after.
func TestCheckpointRedefinition(t *testing.T) {
	c := open(t)
	dom := virttest.NewDomain(t, "backstop-virt-redefine", "64M")
	ctx := context.Background()
	dom.Write(t, 0x11, "0", "1M")
	full, err := c.PushBackup(ctx, virt.BackupRequest{Domain: dom.Name, TargetDir: mkdir(t, dom.Dir, "full"), Checkpoint: "cp1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := c.CheckpointXML(dom.Name, "cp1")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(saved, "<domain ") || strings.Contains(saved, "<domain>") {
		t.Errorf("checkpoint XML embeds the domain:\n%s", saved)
	}
	dom.Stop(t)
	dom.ForgetCheckpoints(t)
	dom.Start(t)
	if cps, err := c.Checkpoints(dom.Name); err != nil || len(cps) != 0 {
		t.Fatalf("checkpoints after the new definition: %v %v", cps, err)
	}
	if _, err := c.PushBackup(ctx, virt.BackupRequest{Domain: dom.Name, TargetDir: mkdir(t, dom.Dir, "lost"), Incremental: "cp1",
		Backing: map[string]string{"vda": full.Targets["vda"]}, Checkpoint: "cp2"}, nil); err == nil {
		t.Fatal("an incremental since a checkpoint libvirt does not know succeeded")
	}
	if entries, _ := os.ReadDir(filepath.Join(dom.Dir, "lost")); len(entries) != 0 {
		t.Errorf("the failed backup left %d files", len(entries))
	}
	if err := c.RedefineCheckpoint(dom.Name, saved); err != nil {
		t.Fatalf("redefining cp1: %v", err)
	}
	dom.Write(t, 0x22, "8M", "64k")
	inc, err := c.PushBackup(ctx, virt.BackupRequest{Domain: dom.Name, TargetDir: mkdir(t, dom.Dir, "inc"), Incremental: "cp1",
		Backing: map[string]string{"vda": full.Targets["vda"]}, Checkpoint: "cp2"}, nil)
	if err != nil {
		t.Fatalf("incremental after redefinition: %v", err)
	}
	if got := virttest.DataRanges(t, inc.Targets["vda"]); !slices.Equal(got, []string{"8388608+65536"}) {
		t.Errorf("incremental after redefinition holds %v", got)
	}
	dom.Suspend(t)
	virttest.Run(t, "qemu-img", "compare", "-U", inc.Targets["vda"], dom.Disk)
	dom.Resume(t)
}

// TestAbortedBackupLeavesNothing: a backup whose context ends is aborted
// and leaves neither target files nor the checkpoint it would have made.
func TestAbortedBackupLeavesNothing(t *testing.T) {
	c := open(t)
	dom := virttest.NewDomain(t, "backstop-virt-abort", "64M")
	dom.Write(t, 0x11, "0", "32M")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := mkdir(t, dom.Dir, "aborted")
	if _, err := c.PushBackup(ctx, virt.BackupRequest{Domain: dom.Name, TargetDir: dir, Checkpoint: "cp1"}, nil); !errors.Is(err, virt.ErrAborted) {
		t.Fatalf("backup with an ended context: %v, want ErrAborted", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the aborted backup left %d files", len(entries))
	}
	if cps, err := c.Checkpoints(dom.Name); err != nil || len(cps) != 0 {
		t.Errorf("checkpoints after the aborted backup: %v %v", cps, err)
	}
	// The domain is free for the next backup.
	if _, err := c.PushBackup(context.Background(), virt.BackupRequest{Domain: dom.Name, TargetDir: mkdir(t, dom.Dir, "after"), Checkpoint: "cp1"}, nil); err != nil {
		t.Fatalf("backup after an aborted one: %v", err)
	}
}

// bitmapsOf lists the dirty bitmaps stored in a qcow2 image.
func bitmapsOf(t *testing.T, image string) []string {
	t.Helper()
	out, err := virt.Bitmaps(image)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStaleBitmapsRemoved: a checkpoint whose bitmap was stored in the
// image and was in use when QEMU was killed fails verification
// (ErrCheckpointInconsistent); removing it as stale takes its bitmap out
// of the image.
func TestStaleBitmapsRemoved(t *testing.T) {
	c := open(t)
	dom := virttest.NewDomain(t, "backstop-virt-stale", "64M")
	dom.Write(t, 0x11, "0", "1M")
	if _, err := c.PushBackup(context.Background(), virt.BackupRequest{Domain: dom.Name, TargetDir: mkdir(t, dom.Dir, "full"), Checkpoint: "cp1"}, nil); err != nil {
		t.Fatal(err)
	}
	saved, err := c.CheckpointXML(dom.Name, "cp1")
	if err != nil {
		t.Fatal(err)
	}
	dom.Stop(t) // QEMU stores the bitmap in the image
	if got := bitmapsOf(t, dom.Disk); !slices.Equal(got, []string{"cp1"}) {
		t.Fatalf("bitmaps after a clean stop: %v", got)
	}
	dom.Start(t) // ... and marks it in use
	dom.KillQEMU(t)
	dom.Start(t)
	if err := c.VerifyCheckpoint(dom.Name, "cp1", saved); !errors.Is(err, virt.ErrCheckpointInconsistent) {
		t.Fatalf("verifying a checkpoint whose QEMU was killed: %v, want ErrCheckpointInconsistent", err)
	}
	if err := c.RemoveStaleCheckpoint(dom.Name, "cp1", saved); err != nil {
		t.Fatalf("removing the stale checkpoint: %v", err)
	}
	dom.Stop(t)
	if got := bitmapsOf(t, dom.Disk); len(got) != 0 {
		t.Errorf("bitmaps left in the image: %v", got)
	}
	if cps, err := c.Checkpoints(dom.Name); err != nil || len(cps) != 0 {
		t.Errorf("checkpoints left: %v %v", cps, err)
	}
}
