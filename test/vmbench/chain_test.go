//go:build bench

package vmbench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/vmchain"
	"github.com/backstop-io/backstop/pkg/vmmanifest"
)

var (
	chainDisk    = flag.Int64("vmbench.chain-disk", 4<<30, "virtual size (and data) of the full backup of the merge benchmark")
	chainChanged = flag.Int64("vmbench.chain-changed", 64<<20, "bytes the merged (deleted) incremental holds")
)

func qemu(b *testing.B, name string, args ...string) {
	b.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		b.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
}

// writeRanges writes pattern into file (qcow2, its backing chain as its
// header says) over count ranges of size bytes spread evenly across span.
func writeRanges(b *testing.B, file string, pattern int, total, span int64, count int) {
	b.Helper()
	size := total / int64(count)
	step := span / int64(count)
	args := []string{"-f", "qcow2"}
	for i := range int64(count) {
		args = append(args, "-c", fmt.Sprintf("write -P %d %d %d", pattern, i*step, size))
	}
	qemu(b, "qemu-io", append(args, file)...)
}

// backupDir writes a backup directory holding file as disk vda, with its
// manifest.
func backupDir(b *testing.B, dir string, typ kv.BackupType, checkpoint, parent, backing string) string {
	b.Helper()
	file := filepath.Join(dir, "vda.qcow2")
	sum, err := vmmanifest.FileSHA256(file)
	if err != nil {
		b.Fatal(err)
	}
	if err := vmmanifest.Write(dir, vmmanifest.Manifest{Backup: filepath.Base(dir), Domain: "bench_vm", Type: typ, Checkpoint: checkpoint, Parent: parent,
		Created: time.Now().UTC(), Disks: []vmmanifest.Disk{{Name: "vda", File: "vda.qcow2", VirtualSize: uint64(*chainDisk), Backing: backing, SHA256: sum}}}); err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkChainMerge: deleting an incremental of a chain on a disk of
// -vmbench.chain-disk bytes (all written in the full backup), the deleted
// incremental holding -vmbench.chain-changed bytes and the next one a
// quarter of that: the merge (pkg/vmchain.Remove) against `qemu-img
// rebase` of the same next link onto the full backup (what the merge
// replaces: it compares the whole disk) and against copying the disk
// (`qemu-img convert` of the chain to one qcow2), in one run, each on a
// fresh copy of the two incrementals.
func BenchmarkChainMerge(b *testing.B) {
	root := b.TempDir()
	full := filepath.Join(root, "full")
	if err := os.MkdirAll(full, 0o755); err != nil {
		b.Fatal(err)
	}
	fullFile := filepath.Join(full, "vda.qcow2")
	qemu(b, "qemu-img", "create", "-q", "-f", "qcow2", fullFile, fmt.Sprint(*chainDisk))
	writeRanges(b, fullFile, 0x11, *chainDisk, *chainDisk, 64)
	backupDir(b, full, kv.Full, "c1", "", "")

	// The two incrementals, made once and copied for each measurement.
	proto := filepath.Join(root, "proto")
	if err := os.MkdirAll(filepath.Join(proto, "d"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(proto, "n"), 0o755); err != nil {
		b.Fatal(err)
	}
	dFile, nFile := filepath.Join(proto, "d", "vda.qcow2"), filepath.Join(proto, "n", "vda.qcow2")
	qemu(b, "qemu-img", "create", "-q", "-f", "qcow2", "-b", fullFile, "-F", "qcow2", dFile, fmt.Sprint(*chainDisk))
	writeRanges(b, dFile, 0x22, *chainChanged, *chainDisk, 256)
	qemu(b, "qemu-img", "create", "-q", "-f", "qcow2", "-b", dFile, "-F", "qcow2", nFile, fmt.Sprint(*chainDisk))
	writeRanges(b, nFile, 0x33, *chainChanged/4, *chainDisk/2, 128)

	// fresh copies the incrementals into a new directory pair; n's file
	// names d's copy as its backing.
	fresh := func(i int) (string, string) {
		d, n := filepath.Join(root, fmt.Sprintf("d%d", i)), filepath.Join(root, fmt.Sprintf("n%d", i))
		qemu(b, "cp", "-r", filepath.Join(proto, "d"), d)
		qemu(b, "cp", "-r", filepath.Join(proto, "n"), n)
		qemu(b, "qemu-img", "rebase", "-u", "-f", "qcow2", "-b", filepath.Join(d, "vda.qcow2"), "-F", "qcow2", filepath.Join(n, "vda.qcow2"))
		backupDir(b, d, kv.Incremental, "c2", "c1", fullFile)
		backupDir(b, n, kv.Incremental, "c3", "c2", filepath.Join(d, "vda.qcow2"))
		return d, n
	}
	timed := func(f func()) time.Duration {
		// Each starts with the files out of the page cache, as a merge
		// days after the backups were written would.
		qemu(b, "sync")
		_ = os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o200)
		start := time.Now()
		f()
		return time.Since(start)
	}
	var merge, rebase, convert time.Duration
	for i := 0; i < b.N; i++ {
		d, n := fresh(3 * i)
		merge += timed(func() {
			if err := vmchain.Remove(context.Background(), d, n, vmchain.Options{}); err != nil {
				b.Fatal(err)
			}
		})
		_, n = fresh(3*i + 1)
		rebase += timed(func() {
			qemu(b, "qemu-img", "rebase", "-f", "qcow2", "-b", fullFile, "-F", "qcow2", filepath.Join(n, "vda.qcow2"))
		})
		_, n = fresh(3*i + 2)
		convert += timed(func() {
			qemu(b, "qemu-img", "convert", "-f", "qcow2", "-O", "qcow2", filepath.Join(n, "vda.qcow2"), filepath.Join(n, "flat.qcow2"))
		})
	}
	per := func(d time.Duration) time.Duration { return (d / time.Duration(b.N)).Round(time.Millisecond) }
	fmt.Printf("disk %d MiB, deleted incremental %d MiB, next %d MiB: merge %s, qemu-img rebase %s, qemu-img convert of the chain %s (rebase/merge %.1fx, convert/merge %.1fx)\n",
		*chainDisk>>20, *chainChanged>>20, *chainChanged>>22, per(merge), per(rebase), per(convert),
		float64(rebase)/float64(merge), float64(convert)/float64(merge))
	b.ReportMetric(float64(per(merge).Milliseconds()), "merge-ms")
	b.ReportMetric(float64(per(rebase).Milliseconds()), "rebase-ms")
	b.ReportMetric(float64(per(convert).Milliseconds()), "convert-ms")
}

// BenchmarkChainSpace: a chain of 10 backups (a full one and 9
// incrementals, random writes), half of them deleted in random order: the
// space the remaining files use against the data they hold themselves.
func BenchmarkChainSpace(b *testing.B) {
	const links, size = 10, 1 << 30
	for range b.N {
		root := b.TempDir()
		var dirs []string
		prev := ""
		for i := range links {
			dir := filepath.Join(root, fmt.Sprintf("b%d", i))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			file := filepath.Join(dir, "vda.qcow2")
			typ, parent := kv.Full, ""
			if prev == "" {
				qemu(b, "qemu-img", "create", "-q", "-f", "qcow2", file, fmt.Sprint(size))
				writeRanges(b, file, 1, 256<<20, size, 64)
			} else {
				typ, parent = kv.Incremental, fmt.Sprintf("c%d", i-1)
				qemu(b, "qemu-img", "create", "-q", "-f", "qcow2", "-b", prev, "-F", "qcow2", file, fmt.Sprint(size))
				// Each link rewrites part of what the one before wrote.
				writeRanges(b, file, 1+i, 32<<20, size-int64(i)<<20, 16+i)
			}
			saved := *chainDisk
			*chainDisk = size
			backupDir(b, dir, typ, fmt.Sprintf("c%d", i), parent, prev)
			*chainDisk = saved
			dirs = append(dirs, dir)
			prev = file
		}
		for _, k := range []int{4, 1, 0, 5, 3} { // indexes into what remains
			next := ""
			if k+1 < len(dirs) {
				next = dirs[k+1]
			}
			if err := vmchain.Remove(context.Background(), dirs[k], next, vmchain.Options{}); err != nil {
				b.Fatal(err)
			}
			dirs = append(dirs[:k], dirs[k+1:]...)
		}
		var used, own int64
		for _, d := range dirs {
			file := filepath.Join(d, "vda.qcow2")
			var st syscall.Stat_t
			if err := syscall.Stat(file, &st); err != nil {
				b.Fatal(err)
			}
			used += st.Blocks * 512
			own += ownData(b, file)
		}
		fmt.Printf("chain of %d, %d deleted: %d MiB used for %d MiB of the remaining links' own data (ratio %.3f)\n",
			links, links-len(dirs), used>>20, own>>20, float64(used)/float64(own))
		b.ReportMetric(float64(used)/float64(own), "used/own")
	}
}

// ownData is the data a qcow2 file holds itself.
func ownData(b *testing.B, file string) int64 {
	b.Helper()
	n, err := vmchain.OwnData(context.Background(), file)
	if err != nil {
		b.Fatal(err)
	}
	return n
}
