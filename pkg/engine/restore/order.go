package restore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"golang.org/x/sync/errgroup"

	"github.com/backstop-io/backstop/pkg/archive"
	"github.com/backstop-io/backstop/pkg/engine/items"
)

// highPriorities and lowPriorities are Velero's default restore order
// (velero server --restore-resource-priorities): these resources first, in
// this order (what others live in, are bound by or mount), then every
// other resource of the backup in alphabetical order, then the low ones.
// A name without a group is the resource of that name the target serves
// (the core group's first).
var (
	highPriorities = []string{
		"customresourcedefinitions", "namespaces", "storageclasses",
		"volumesnapshotclass.snapshot.storage.k8s.io", "volumesnapshotcontents.snapshot.storage.k8s.io", "volumesnapshots.snapshot.storage.k8s.io",
		"datauploads.velero.io", "persistentvolumes", "persistentvolumeclaims",
		"clusterroles", "roles", "serviceaccounts", "clusterrolebindings", "rolebindings",
		"secrets", "configmaps", "limitranges", "priorityclasses", "pods", "replicasets.apps",
		"clusterclasses.cluster.x-k8s.io", "endpoints", "services",
	}
	lowPriorities = []string{
		"clusterbootstraps.run.tanzu.vmware.com", "clusters.cluster.x-k8s.io", "clusterresourcesets.addons.cluster.x-k8s.io",
		"apps.kappctrl.k14s.io", "packageinstalls.packaging.carvel.dev",
	}
)

// restoreOrder orders the group resources present in a backup for the
// restore: Velero's high priorities, the rest alphabetically, the low ones.
func restoreOrder(resources []items.Resource, present map[string]bool) []string {
	resolve := func(name string) string {
		if strings.Contains(name, ".") {
			return name
		}
		found := ""
		for _, r := range resources {
			if r.GVR.Resource != name {
				continue
			}
			if r.GVR.Group == "" {
				return r.GroupResource()
			}
			if found == "" {
				found = r.GroupResource()
			}
		}
		if found == "" {
			return name
		}
		return found
	}
	var order []string
	seen := map[string]bool{}
	add := func(gr string) {
		if present[gr] && !seen[gr] {
			seen[gr] = true
			order = append(order, gr)
		}
	}
	for _, p := range highPriorities {
		add(resolve(p))
	}
	low := map[string]bool{}
	for _, p := range lowPriorities {
		low[resolve(p)] = true
	}
	var rest []string
	for gr := range present {
		if !seen[gr] && !low[gr] {
			rest = append(rest, gr)
		}
	}
	sort.Strings(rest)
	for _, gr := range rest {
		add(gr)
	}
	for _, p := range lowPriorities {
		add(resolve(p))
	}
	return order
}

// spool keeps the items of a restore's second pass on disk, as the tarball
// holds them, so that they are restored in restoreOrder after a single
// read of the tarball (Velero extracts the whole tarball for the same
// reason). Memory holds only their names.
type spool struct {
	dir   string
	n     int
	items map[string][]spooled
	// bytes are the bytes spooled, maxBytes their bound (0: none).
	bytes, maxBytes int64
	// space reads the scratch disk's free and total bytes; checked is
	// s.bytes at its last reading.
	space   func() (free, total uint64, err error)
	checked int64
	// budget is shared by every restore and preview of the process (nil:
	// none); s.bytes of it are this spool's until close.
	budget *ScratchBudget
}

// ScratchBudget is the scratch space's size when something other than its
// disk bounds it (--restore-scratch-size: the chart's emptyDir, whose
// sizeLimit kubelet enforces by evicting the pod): the restores and
// previews running at once spool at most nine tenths of it together (the
// rest is their logs').
type ScratchBudget struct {
	size int64
	used atomic.Int64
}

// NewScratchBudget returns the budget of a scratch space of size bytes (0:
// none, the disk bounds it).
func NewScratchBudget(size int64) *ScratchBudget { return &ScratchBudget{size: size} }

// take counts n more bytes spooled, unless they would pass the budget.
func (b *ScratchBudget) take(n int64) error {
	if b == nil || b.size <= 0 {
		return nil
	}
	limit := b.size / 10 * 9
	for {
		used := b.used.Load()
		if used+n > limit {
			return fmt.Errorf("%w: the restores and previews running spool %d bytes, and %d more would pass %d, nine tenths of the scratch space (--restore-scratch-size %d)",
				errScratchFull, used, n, limit, b.size)
		}
		if b.used.CompareAndSwap(used, used+n) {
			return nil
		}
	}
}

// give returns n bytes a spool took.
func (b *ScratchBudget) give(n int64) {
	if b != nil && b.size > 0 {
		b.used.Add(-n)
	}
}

// The scratch disk keeps at least this much free, whatever a restore
// spools (the restores' scratch may share a disk with the database):
// minScratchFree or a fiftieth of the disk, whichever is larger.
const minScratchFree = 512 << 20

// scratchCheckEvery is how many bytes a spool writes between two readings
// of the disk's free space.
const scratchCheckEvery = 8 << 20

// scratchSpace reads the free and total bytes of dir's file system.
func scratchSpace(dir string) func() (uint64, uint64, error) {
	return func() (uint64, uint64, error) {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			return 0, 0, fmt.Errorf("the free space of the scratch directory %s: %w", dir, err)
		}
		return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
	}
}

// errScratchFull is the error of a restore whose items would not fit on
// the scratch disk.
var errScratchFull = errors.New("the scratch disk is full")

// checkSpace fails when writing n more bytes would leave the scratch disk
// less than its reserve.
func (s *spool) checkSpace(n int64) error {
	if s.space == nil {
		return nil
	}
	free, total, err := s.space()
	if err != nil {
		return err
	}
	reserve := max(uint64(minScratchFree), total/50)
	if free < reserve+uint64(n) {
		return fmt.Errorf("%w: %s has %d bytes free, and keeps %d of them (--restore-scratch-dir: give restores a disk of their own, or more space)",
			errScratchFull, s.dir, free, reserve)
	}
	s.checked = s.bytes
	return nil
}

type spooled struct {
	item archive.Item // without Data
	path string
}

func newSpool(scratch string, budget *ScratchBudget) (*spool, error) {
	dir, err := os.MkdirTemp(scratch, "restore-items-")
	if err != nil {
		return nil, fmt.Errorf("spooling the restore's items: %w", err)
	}
	s := &spool{dir: dir, items: map[string][]spooled{}, space: scratchSpace(dir), budget: budget}
	// Before the restore begins: a disk already at its reserve takes
	// none.
	if err := s.checkSpace(0); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *spool) add(it *archive.Item) error {
	n := int64(len(it.Data))
	if s.maxBytes > 0 && s.bytes+n > s.maxBytes {
		return fmt.Errorf("%w: its items need more than %d bytes of scratch space (--restore-max-scratch-bytes)", errLimit, s.maxBytes)
	}
	if err := s.budget.take(n); err != nil {
		return err
	}
	s.bytes += n
	if s.bytes-s.checked >= scratchCheckEvery || int64(len(it.Data)) >= scratchCheckEvery {
		if err := s.checkSpace(max(int64(len(it.Data)), s.bytes-s.checked)); err != nil {
			return err
		}
	}
	path := filepath.Join(s.dir, strconv.Itoa(s.n))
	s.n++
	if err := os.WriteFile(path, it.Data, 0o600); err != nil {
		return fmt.Errorf("spooling %s %s/%s: %w", it.GroupResource, it.Namespace, it.Name, err)
	}
	entry := spooled{item: *it, path: path}
	entry.item.Data = nil
	s.items[it.GroupResource] = append(s.items[it.GroupResource], entry)
	return nil
}

// present are the group resources spooled.
func (s *spool) present() map[string]bool {
	out := make(map[string]bool, len(s.items))
	for gr := range s.items {
		out[gr] = true
	}
	return out
}

// replay calls fn for every spooled item, the group resources in order:
// the items of one group resource up to workers at a time, all of them
// done before the next group resource starts (its items may need them:
// claims before pods, say). The first error stops it.
func (s *spool) replay(ctx context.Context, order []string, workers int, fn func(*archive.Item) error) error {
	for _, gr := range order {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(max(1, workers))
		for _, entry := range s.items[gr] {
			if gctx.Err() != nil {
				break
			}
			data, err := os.ReadFile(entry.path)
			if err != nil {
				_ = g.Wait()
				return fmt.Errorf("reading spooled item %s %s/%s: %w", gr, entry.item.Namespace, entry.item.Name, err)
			}
			it := entry.item
			it.Data = data
			path := entry.path
			g.Go(func() error {
				if err := gctx.Err(); err != nil {
					return err // an item failed while this one waited
				}
				if err := fn(&it); err != nil {
					return err
				}
				_ = os.Remove(path)
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

func (s *spool) close() {
	_ = os.RemoveAll(s.dir)
	s.budget.give(s.bytes)
	s.bytes = 0
}
