package vmchain

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/vmmanifest"
	"github.com/backstop-io/backstop/pkg/vmrestore"
)

// requireQEMU skips in the fast tier: the tests run qemu-img and qemu-io.
func requireQEMU(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs qemu-img and qemu-io on real images: not in the fast tier (make test-unit); make test runs it")
	}
	for _, tool := range []string{"qemu-img", "qemu-io"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (make setup installs QEMU): %v", tool, err)
		}
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
}

const diskSize = 16 << 20

// makeChain writes a chain of n backups of one disk "vda" into root,
// oldest first, as the VM backup engine lays them out: a full backup, then
// incrementals holding the clusters written since (data and zeroes, at
// random places, some overlapping earlier ones), each file backed by the
// one before, each with its manifest.
func makeChain(t *testing.T, root string, n int, rng *rand.Rand) []string {
	t.Helper()
	var dirs []string
	prev := ""
	for i := range n {
		dir := filepath.Join(root, fmt.Sprintf("b%02d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, "vda.qcow2")
		m := vmmanifest.Manifest{Backup: filepath.Base(dir), VirtualMachine: "vm", Domain: "ns_vm", Checkpoint: fmt.Sprintf("cp%d", i),
			Created: time.Now().UTC(), Type: kv.Full}
		if i == 0 {
			run(t, "qemu-img", "create", "-q", "-f", "qcow2", file, fmt.Sprint(diskSize))
		} else {
			run(t, "qemu-img", "create", "-q", "-f", "qcow2", "-b", prev, "-F", "qcow2", file, fmt.Sprint(diskSize))
			m.Type, m.Parent = kv.Incremental, fmt.Sprintf("cp%d", i-1)
		}
		writes := 4
		if i == 0 {
			writes = 24
		}
		args := []string{"-f", "qcow2"}
		for range writes {
			off := rng.Int64N(diskSize/4096-64) * 4096
			length := (1 + rng.Int64N(48)) * 4096
			if rng.IntN(5) == 0 {
				args = append(args, "-c", fmt.Sprintf("write -z %d %d", off, length))
			} else {
				args = append(args, "-c", fmt.Sprintf("write -P %d %d %d", 1+rng.IntN(250), off, length))
			}
		}
		run(t, "qemu-io", append(args, file)...)
		sum, err := vmmanifest.FileSHA256(file)
		if err != nil {
			t.Fatal(err)
		}
		m.Disks = []vmmanifest.Disk{{Name: "vda", File: "vda.qcow2", VirtualSize: diskSize, Backing: prev, SHA256: sum}}
		if err := vmmanifest.Write(dir, m); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
		prev = file
	}
	return dirs
}

// restored is the sha256 of the disk restored from chain (oldest first).
func restored(t *testing.T, chain []string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "disk.raw")
	res, err := vmrestore.Restore(context.Background(), chain, "vda", out)
	if err != nil {
		t.Fatalf("restoring from %v: %v", chain, err)
	}
	_ = os.Remove(out)
	return res.SHA256
}

// link is a backup of the chain and the sha256 of its restore as first
// taken.
type link struct {
	dir  string
	want string
}

func linksOf(t *testing.T, dirs []string) []link {
	t.Helper()
	var out []link
	for i, d := range dirs {
		out = append(out, link{dir: d, want: restored(t, dirs[:i+1])})
	}
	return out
}

// checkChain restores every remaining link and compares it with its
// restore as first taken.
func checkChain(t *testing.T, links []link, after string) {
	t.Helper()
	var dirs []string
	for i, l := range links {
		dirs = append(dirs, l.dir)
		if got := restored(t, dirs); got != l.want {
			t.Fatalf("after %s: link %d (%s) restores to %s, was %s", after, i, filepath.Base(l.dir), got, l.want)
		}
	}
}

// removeLink removes links[k] from the chain.
func removeLink(t *testing.T, links []link, k int) []link {
	t.Helper()
	next := ""
	if k+1 < len(links) {
		next = links[k+1].dir
	}
	if err := Remove(context.Background(), links[k].dir, next, Options{}); err != nil {
		t.Fatalf("removing %s: %v", filepath.Base(links[k].dir), err)
	}
	if _, err := os.Stat(links[k].dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s is still there: %v", links[k].dir, err)
	}
	return slices.Delete(slices.Clone(links), k, k+1)
}

// TestRemove: the middle, the newest and the full backup of a chain of 10
// removed, then random sequences: after each removal every remaining link
// restores bit-identically (sha256) to its restore as first taken, and the
// space the chain uses is its remaining links' own data.
func TestRemove(t *testing.T) {
	requireQEMU(t)
	random := func(rng *rand.Rand, n int) int { return rng.IntN(n) }
	for _, c := range []struct {
		name  string
		seed  uint64
		picks func(rng *rand.Rand, remaining int) int
		count int
	}{
		{"a middle link", 1, func(_ *rand.Rand, n int) int { return n / 2 }, 1},
		{"the newest", 2, func(_ *rand.Rand, n int) int { return n - 1 }, 1},
		{"the full backup", 3, func(_ *rand.Rand, _ int) int { return 0 }, 1},
		{"the full backup, again and again", 4, func(_ *rand.Rand, _ int) int { return 0 }, 4},
		{"random, seed 5", 5, random, 9},
		{"random, seed 6", 6, random, 6},
		{"random, seed 7", 7, random, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(c.seed, c.seed))
			links := linksOf(t, makeChain(t, t.TempDir(), 10, rng))
			for step := range c.count {
				k := c.picks(rng, len(links))
				what := fmt.Sprintf("removing %s (step %d)", filepath.Base(links[k].dir), step+1)
				links = removeLink(t, links, k)
				checkChain(t, links, what)
			}
			used, own := space(t, links)
			t.Logf("%d links left: %d KiB on disk for %d KiB of their own data", len(links), used>>10, own>>10)
			// qcow2's own metadata (header, L1/L2 and refcount tables)
			// is a few clusters per file.
			if overhead := used - own; overhead > int64(len(links))*512<<10 {
				t.Errorf("the chain uses %d KiB for %d KiB of its links' own data: %d KiB more than their metadata", used>>10, own>>10, overhead>>10)
			}
		})
	}
}

// space is what the links' files use on disk and the data they hold
// themselves.
func space(t *testing.T, links []link) (used, own int64) {
	t.Helper()
	for _, l := range links {
		file := filepath.Join(l.dir, "vda.qcow2")
		var st syscall.Stat_t
		if err := syscall.Stat(file, &st); err != nil {
			t.Fatal(err)
		}
		used += st.Blocks * 512
		own += ownData(t, file)
	}
	return used, own
}

// ownData is the data a qcow2 file holds itself.
func ownData(t *testing.T, file string) int64 {
	t.Helper()
	n, err := OwnData(context.Background(), file)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// crashEnv runs TestRemoveUntilCrash in a child process: the directories
// and the point to crash at.
const crashEnv = "VMCHAIN_TEST_CRASH"

// TestRemoveUntilCrash is the child of TestRemoveCrash: it removes a link
// and kills itself (SIGKILL) at the point named in crashEnv.
func TestRemoveUntilCrash(t *testing.T) {
	spec := os.Getenv(crashEnv)
	if spec == "" {
		t.Skip("the child process of TestRemoveCrash; runs only from it")
	}
	var point, dir, next string
	if _, err := fmt.Sscanf(spec, "%s %s %s", &point, &dir, &next); err != nil {
		t.Fatal(err)
	}
	err := Remove(context.Background(), dir, next, Options{Crash: func(p string) {
		if p == point {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}})
	t.Fatalf("the removal ended without reaching %s: %v", point, err)
}

// TestRemoveCrash: a removal killed (SIGKILL) at each point of a merge,
// then Recover: the chain is whole, either the old one or the new one,
// every link restoring as first taken, and nothing of the merge is left.
func TestRemoveCrash(t *testing.T) {
	requireQEMU(t)
	for _, point := range []string{CrashMerged, CrashJournaled, CrashRenamed, CrashManifest, CrashRemoved} {
		t.Run(point, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(len(point))))
			links := linksOf(t, makeChain(t, t.TempDir(), 4, rng))
			next := links[2].dir
			cmd := exec.Command(os.Args[0], "-test.run=^TestRemoveUntilCrash$")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %s", crashEnv, point, links[1].dir, links[2].dir))
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the child was not killed at %s: %v: %s", point, err, out)
			}
			if err := Recover(links[2].dir); err != nil {
				t.Fatalf("recovering: %v", err)
			}
			if _, err := os.Stat(links[1].dir); err == nil {
				// Not journaled: the old chain stays.
				if point != CrashMerged {
					t.Errorf("crash at %s: the merged link is still there after recovery", point)
				}
			} else {
				links = slices.Delete(links, 1, 2)
			}
			checkChain(t, links, "recovery from a crash at "+point)
			left, _ := filepath.Glob(filepath.Join(next, "*"+tempSuffix))
			if _, err := os.Stat(filepath.Join(next, JournalFile)); err == nil || len(left) > 0 {
				t.Errorf("crash at %s: the merge's journal or temporary files %v are left", point, left)
			}
		})
	}
}
