//go:build bench

// Package vmbench measures VM disk backups on a real libvirt daemon and
// QEMU (pkg/virt), side by side with the reference in the same run:
//
//   - BenchmarkFullBackup: a full backup, pull mode (what the server runs)
//     and push mode, of a running domain's disk holding -vmbench.data bytes
//     of random data, against `qemu-img convert` of the same disk to qcow2
//     (read while the domain runs, -U) with several cache modes: MB/s of
//     data copied.
//   - BenchmarkIncrementalSize: the bytes an incremental backup holds
//     against the bytes written since the previous backup (random 4 KiB to
//     256 KiB writes at random offsets): the ratio, and how much of it is
//     the bitmap granularity (64 KiB clusters).
//
// docs/benchmarks.md has the figures; hack/bench-vm.sh runs it.
package vmbench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	mrand "math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/backstop-io/backstop/pkg/virt"
	"github.com/backstop-io/backstop/pkg/virt/virttest"
)

var (
	dataSize = flag.Int64("vmbench.data", 512<<20, "bytes of random data on the disk of the full-backup benchmark")
	writes   = flag.Int("vmbench.writes", 200, "random writes between the backups of the incremental benchmark")
)

// randomDisk makes a qcow2 disk whose first n bytes are random.
func randomDisk(b *testing.B, dir string, n int64) string {
	b.Helper()
	raw := filepath.Join(dir, "data.raw")
	f, err := os.Create(raw)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 4<<20)
	for left := n; left > 0; left -= int64(len(buf)) {
		if _, err := rand.Read(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	f.Close()
	disk := filepath.Join(dir, "disk.qcow2")
	virttest.Run(b, "qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, disk)
	virttest.Run(b, "qemu-img", "resize", "-q", disk, fmt.Sprint(2*n))
	_ = os.Remove(raw)
	return disk
}

func open(b *testing.B) *virt.Conn {
	b.Helper()
	c, err := virt.Open(virttest.URI)
	if err != nil {
		b.Fatalf("libvirt is needed (hack/install-libvirt.sh, hack/start-libvirt.sh): %v", err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}

func BenchmarkFullBackup(b *testing.B) {
	c := open(b)
	dom := virttest.NewDomain(b, "backstop-bench-full", "64M")
	dom.Stop(b)
	disk := randomDisk(b, dom.Dir, *dataSize)
	dom.UseDisk(b, disk)
	dom.Start(b)
	out := filepath.Join(dom.Dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		b.Fatal(err)
	}

	// qemu-img convert writes through the page cache and does not flush
	// by default (-t unsafe); "+fsync" then syncs the file, as a backup
	// must; -t none writes with O_DIRECT; "-direct-parallel" adds the
	// pull-mode copy's options (8 requests in flight, out of order): it is
	// the pull copy without NBD in between.
	for _, ref := range []struct {
		name  string
		args  []string
		fsync bool
	}{
		{"qemu-img-convert", []string{"-t", "unsafe"}, false},
		{"qemu-img-convert+fsync", []string{"-t", "unsafe"}, true},
		{"qemu-img-convert-direct", []string{"-t", "none"}, false},
		{"qemu-img-convert-direct-parallel", []string{"-t", "none", "-W", "-m", "8"}, false},
	} {
		b.Run("impl=reference-"+ref.name, func(b *testing.B) {
			target := filepath.Join(out, "convert.qcow2")
			var elapsed time.Duration
			for i := 0; i < b.N; i++ {
				_ = os.Remove(target)
				start := time.Now()
				args := append(append([]string{"convert", "-U"}, ref.args...), "-O", "qcow2", disk, target)
				if o, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
					b.Fatalf("qemu-img convert: %v: %s", err, o)
				}
				if ref.fsync {
					f, err := os.Open(target)
					if err != nil {
						b.Fatal(err)
					}
					if err := f.Sync(); err != nil {
						b.Fatal(err)
					}
					f.Close()
				}
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(*dataSize)*float64(b.N)/elapsed.Seconds()/1e6, "MB/s")
		})
	}
	for _, impl := range []struct {
		name   string
		backup func(dir string) (virt.BackupResult, error)
	}{
		{"pull", func(dir string) (virt.BackupResult, error) {
			return c.FullBackupPull(context.Background(), virt.BackupRequest{Domain: dom.Name, TargetDir: dir}, 0, nil)
		}},
		{"push", func(dir string) (virt.BackupResult, error) {
			return c.PushBackup(context.Background(), virt.BackupRequest{Domain: dom.Name, TargetDir: dir}, nil)
		}},
	} {
		b.Run("impl=libvirt-"+impl.name+"-backup", func(b *testing.B) {
			var elapsed time.Duration
			var copied uint64
			for i := 0; i < b.N; i++ {
				dir := filepath.Join(out, fmt.Sprintf("%s-%d", impl.name, i))
				if err := os.Mkdir(dir, 0o755); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				res, err := impl.backup(dir)
				if err != nil {
					b.Fatal(err)
				}
				elapsed += time.Since(start)
				copied += res.Bytes
				_ = os.RemoveAll(dir)
			}
			if copied < uint64(*dataSize)*uint64(b.N) {
				b.Fatalf("the backups copied %d bytes, the disk holds %d", copied, *dataSize)
			}
			b.ReportMetric(float64(*dataSize)*float64(b.N)/elapsed.Seconds()/1e6, "MB/s")
		})
	}
}

func BenchmarkIncrementalSize(b *testing.B) {
	c := open(b)
	dom := virttest.NewDomain(b, "backstop-bench-inc", "1G")
	ctx := context.Background()
	dir := func(name string) string {
		d := filepath.Join(dom.Dir, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
		return d
	}
	full, err := c.PushBackup(ctx, virt.BackupRequest{Domain: dom.Name, TargetDir: dir("full"), Checkpoint: "cp0"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	prev := full.Targets["vda"]
	rng := mrand.New(mrand.NewSource(1))
	var written, held, rounded float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Random writes; what they touch, in 64 KiB clusters.
		clusters := map[int64]bool{}
		for w := 0; w < *writes; w++ {
			size := int64(4<<10) << rng.Intn(7) // 4 KiB .. 256 KiB
			off := rng.Int63n((1<<30-size)/4096) * 4096
			dom.Write(b, byte(w), fmt.Sprint(off), fmt.Sprint(size))
			written += float64(size)
			for cl := off / (64 << 10); cl <= (off+size-1)/(64<<10); cl++ {
				clusters[cl] = true
			}
		}
		rounded += float64(len(clusters)) * (64 << 10)
		res, err := c.PushBackup(ctx, virt.BackupRequest{Domain: dom.Name, TargetDir: dir(fmt.Sprintf("inc%d", i)),
			Incremental: fmt.Sprintf("cp%d", i), Backing: map[string]string{"vda": prev}, Checkpoint: fmt.Sprintf("cp%d", i+1)}, nil)
		if err != nil {
			b.Fatal(err)
		}
		held += float64(dataBytes(b, res.Targets["vda"]))
		prev = res.Targets["vda"]
	}
	b.ReportMetric(held/written, "held/written")
	b.ReportMetric(held/rounded, "held/written-in-64k-clusters")
}

// dataBytes is the data an image holds itself (not its backing chain).
func dataBytes(b *testing.B, image string) int64 {
	b.Helper()
	var extents []struct {
		Length, Depth int64
		Data          bool
	}
	if err := json.Unmarshal([]byte(virttest.Run(b, "qemu-img", "map", "-U", "--output=json", image)), &extents); err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, e := range extents {
		if e.Depth == 0 && e.Data {
			n += e.Length
		}
	}
	return n
}
