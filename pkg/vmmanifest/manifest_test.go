package vmmanifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
)

// TestWriteReadVerify: a manifest comes back as written, its digests
// match the files, and a changed file is found.
func TestWriteReadVerify(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "vda.qcow2"), []byte("disk data"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := FileSHA256(filepath.Join(dir, "vda.qcow2"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "1dbf7ba43fb2ceab0f3a8ea3e7f5ab5ac8e6e79e2fcc2d4c7bed8a1f5ea6f4a0"; len(sum) != len(want) {
		t.Fatalf("digest %q is not a hex sha256", sum)
	}
	m := Manifest{Backup: "b1", VirtualMachine: "vm", Domain: "ns_vm", Type: kv.Full, Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Disks: []Disk{{Name: "vda", File: "vda.qcow2", VirtualSize: 1 << 20, SHA256: sum}}}
	if err := Write(dir, m); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Backup != "b1" || !got.Created.Equal(m.Created) || len(got.Disks) != 1 || got.Disks[0] != m.Disks[0] {
		t.Errorf("read %+v, wrote %+v", got, m)
	}
	if err := Verify(dir, got); err != nil {
		t.Errorf("verify: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vda.qcow2"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Verify(dir, got); err == nil || !strings.Contains(err.Error(), "the manifest says") {
		t.Errorf("verify of a changed file: %v", err)
	}
	if _, err := Read(t.TempDir()); err == nil || !strings.Contains(err.Error(), "is not a VM backup") {
		t.Errorf("read of a directory without a manifest: %v", err)
	}
	if free, err := FreeBytes(dir); err != nil || free == 0 {
		t.Errorf("free bytes of a temporary directory: %d, %v", free, err)
	}
}
