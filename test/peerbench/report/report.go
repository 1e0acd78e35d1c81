// Package report owns the peer benchmarks' results (test/peerbench): the
// JSON files a run writes, the Markdown section of docs/benchmarks.md
// made from them, and the charts (gonum/plot) that section shows.
package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Results are what a run of the peer benchmarks measured; each benchmark
// fills its part.
type Results struct {
	Versions  map[string]string `json:"versions"`
	Transfers []Transfer        `json:"transfers,omitempty"`
	Ops       []Op              `json:"ops,omitempty"`
	API       []API             `json:"api,omitempty"`
	Bursts    []Burst           `json:"bursts,omitempty"`
}

// Transfer is one peer's backup or restore of a workload.
type Transfer struct {
	Objects int `json:"objects"`
	// ClientQPS is --client-qps and --client-burst of both peers; 0:
	// their defaults (100 and 100 on both).
	ClientQPS   int     `json:"clientQPS,omitempty"`
	Peer        string  `json:"peer"`
	Op          string  `json:"op"` // backup or restore
	Items       int     `json:"items"`
	Seconds     float64 `json:"seconds"`
	ItemsPerSec float64 `json:"itemsPerSec"`
	PeakRSSMiB  float64 `json:"peakRSSMiB"`
	// IdleAnonMiB is the private memory (RssAnon) before the op, and
	// PeakAnonMiB its peak during it (sampled every 100 ms).
	IdleAnonMiB float64 `json:"idleAnonMiB"`
	PeakAnonMiB float64 `json:"peakAnonMiB"`
	CPUSeconds  float64 `json:"cpuSeconds"`
	// HeapBeforeMiB and HeapAfterMiB are the server process's live heap
	// (pprof, after a collection) before and after the op; of the heap
	// after, EnginesHeapMiB is held by Backstop's engines and
	// WatchCacheHeapMiB by its watch cache (0 for Velero).
	HeapBeforeMiB     float64 `json:"heapBeforeMiB,omitempty"`
	HeapAfterMiB      float64 `json:"heapAfterMiB,omitempty"`
	EnginesHeapMiB    float64 `json:"enginesHeapMiB,omitempty"`
	WatchCacheHeapMiB float64 `json:"watchCacheHeapMiB,omitempty"`
	// RequestsPerItem is kube-apiserver's count of requests on ConfigMaps
	// and Secrets during the op (apiserver_request_total, every verb), per
	// ConfigMap and Secret of the workload.
	RequestsPerItem float64 `json:"requestsPerItem,omitempty"`
}

// Op is how a peer's cancel and deletions went at one workload size:
// seconds until the backup was over with its data gone, or why not.
type Op struct {
	Objects         int    `json:"objects"`
	Peer            string `json:"peer"`
	Cancel          string `json:"cancel"`
	DeleteRunning   string `json:"deleteRunning"`
	DeleteCompleted string `json:"deleteCompleted"`
}

// API is one server of Backups under the API load.
type API struct {
	Server      string  `json:"server"`
	Objects     int     `json:"objects"`
	Clients     int     `json:"clients"`
	Creates1    float64 `json:"creates1"`
	CreatesN    float64 `json:"createsN"`
	Updates     float64 `json:"updates"`
	ListsPerSec float64 `json:"listsPerSec"`
	ListP50ms   float64 `json:"listP50ms"`
	ListP99ms   float64 `json:"listP99ms"`
	// The same lists read as bytes, not decoded by the client.
	RawListsPerSec float64 `json:"rawListsPerSec,omitempty"`
	RawListP50ms   float64 `json:"rawListP50ms,omitempty"`
	RawListP99ms   float64 `json:"rawListP99ms,omitempty"`
	WatchP50ms     float64 `json:"watchP50ms"`
	WatchP99ms     float64 `json:"watchP99ms"`
}

// Burst is one peer's queue under a burst of backups.
type Burst struct {
	Peer           string  `json:"peer"`
	Backups        int     `json:"backups"`
	Concurrency    int     `json:"concurrency"`
	DrainSeconds   float64 `json:"drainSeconds"`
	MaxWaitSeconds float64 `json:"maxWaitSeconds"`
	MaxRunning     int     `json:"maxRunning"`
	Stuck          int     `json:"stuck"`
	Failed         int     `json:"failed"`
	// NotCompleted names the backups that ended otherwise than Completed
	// ("name: phase").
	NotCompleted []string `json:"notCompleted,omitempty"`
}

// Load merges the results files (*.json) of dir.
func Load(dir string) (*Results, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no results (*.json) in %s", dir)
	}
	sort.Strings(files)
	all := &Results{Versions: map[string]string{}}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r Results
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for k, v := range r.Versions {
			all.Versions[k] = v
		}
		all.Transfers = append(all.Transfers, r.Transfers...)
		all.Ops = append(all.Ops, r.Ops...)
		all.API = append(all.API, r.API...)
		all.Bursts = append(all.Bursts, r.Bursts...)
	}
	return all, nil
}

// transfer finds a peer's op at a size and client limit.
func (r *Results) transfer(objects, qps int, peer, op string) (Transfer, bool) {
	for _, t := range r.Transfers {
		if t.Objects == objects && t.ClientQPS == qps && t.Peer == peer && t.Op == op {
			return t, true
		}
	}
	return Transfer{}, false
}

// pair is Velero's and Backstop's measure of one op at one size and
// client limit.
type pair struct {
	objects, qps     int
	op               string
	velero, backstop Transfer
}

// pairs are the ops both peers measured: by client limit (the defaults
// first), then size, then backup before restore.
func (r *Results) pairs() []pair {
	var out []pair
	for _, qps := range r.limits() {
		for _, n := range r.sizes(qps) {
			for _, op := range []string{"backup", "restore"} {
				v, ok1 := r.transfer(n, qps, "velero", op)
				s, ok2 := r.transfer(n, qps, "backstop", op)
				if ok1 && ok2 {
					out = append(out, pair{objects: n, qps: qps, op: op, velero: v, backstop: s})
				}
			}
		}
	}
	return out
}

// sizes are the workload sizes measured at client limit qps, ascending.
func (r *Results) sizes(qps int) []int {
	var out []int
	for _, t := range r.Transfers {
		if t.ClientQPS == qps && !slices.Contains(out, t.Objects) {
			out = append(out, t.Objects)
		}
	}
	slices.Sort(out)
	return out
}

// limits are the client limits measured, the defaults (0) first.
func (r *Results) limits() []int {
	var out []int
	for _, t := range r.Transfers {
		if !slices.Contains(out, t.ClientQPS) {
			out = append(out, t.ClientQPS)
		}
	}
	slices.Sort(out)
	return out
}

// Markdown is the results as the section of docs/benchmarks.md: tables,
// ratios against Velero, and the charts (chartDir relative to the doc).
func (r *Results) Markdown(command, chartDir string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Command: `%s`\n\n", command)
	var keys []string
	for k := range r.Versions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "- %s: %s\n", k, r.Versions[k])
	}
	if len(r.Transfers) > 0 {
		b.WriteString("\n**Backups and restores** (ConfigMaps, Secrets and Deployments over 10 namespaces; restores into new namespaces; peak RSS and CPU of the server's whole process tree, Velero's plugins included):\n\n")
		b.WriteString("Peak RSS counts the binaries' code pages too (file-backed; Backstop's binary is about 160 MB, Velero's about 105 MB, Kubernetes' RBAC and API machinery included); private memory (RssAnon, sampled every 100 ms) is the heap and stacks, before the op → at its peak.\n\n")
		b.WriteString("| objects | op | client QPS/burst | Velero items/s | Backstop items/s | ratio | Velero peak RSS | Backstop peak RSS | ratio | Velero private memory | Backstop private memory | ratio (peaks) | Velero CPU s | Backstop CPU s |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, p := range r.pairs() {
			v, s := p.velero, p.backstop
			fmt.Fprintf(&b, "| %d | %s | %s | %.0f | %.0f | %.1fx | %.0f MiB | %.0f MiB | %.2f | %.0f → %.0f MiB | %.0f → %.0f MiB | %.2f | %.1f | %.1f |\n", p.objects, p.op, limitName(p.qps), v.ItemsPerSec, s.ItemsPerSec,
				s.ItemsPerSec/v.ItemsPerSec, v.PeakRSSMiB, s.PeakRSSMiB, s.PeakRSSMiB/v.PeakRSSMiB,
				v.IdleAnonMiB, v.PeakAnonMiB, s.IdleAnonMiB, s.PeakAnonMiB, s.PeakAnonMiB/v.PeakAnonMiB, v.CPUSeconds, s.CPUSeconds)
		}
		r.heapTable(&b)
		fmt.Fprintf(&b, "\n![items/s against objects](%s/peers-throughput.svg)\n![peak RSS against objects](%s/peers-memory.svg)\n", chartDir, chartDir)
	}
	if len(r.Ops) > 0 {
		b.WriteString("\n**Cancel and delete** (from the request until the backup is over and its data is gone from the bucket; a cancelled backup keeps its log):\n\n")
		b.WriteString("| objects | peer | cancel a running backup | delete a running backup | delete a completed backup |\n|---|---|---|---|---|\n")
		for _, o := range r.Ops {
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", o.Objects, o.Peer, o.Cancel, o.DeleteRunning, o.DeleteCompleted)
		}
	}
	if len(r.API) > 0 {
		a := r.API[0]
		fmt.Fprintf(&b, "\n**API** (Backups; %d created, a fifth by 1 client and the rest by %d, each updated once by %d clients, full lists by %d clients (decoded by client-go's dynamic client, then read as bytes), then 100 watchers see 200 creates; engines off on both sides):\n\n", a.Objects, a.Clients, a.Clients, a.Clients)
		b.WriteString("| server | creates/s (1 client) | creates/s (16) | updates/s | lists of all/s | list p50 | list p99 | lists read as bytes/s | its p50 | its p99 | watch p50 | watch p99 |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, a := range r.API {
			fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.0f | %.2f | %.0f ms | %.0f ms | %.2f | %.0f ms | %.0f ms | %.1f ms | %.1f ms |\n", a.Server, a.Creates1, a.CreatesN, a.Updates, a.ListsPerSec,
				a.ListP50ms, a.ListP99ms, a.RawListsPerSec, a.RawListP50ms, a.RawListP99ms, a.WatchP50ms, a.WatchP99ms)
		}
	}
	if len(r.Bursts) > 0 {
		b.WriteString("\n**Queue** (backups created at once, each of its own namespace of 10 ConfigMaps: backups whose namespaces overlap run one after the other on both):\n\n")
		b.WriteString("| peer | backups | --concurrent-backups | all ended after | longest queue wait | most running at once | stuck | not Completed |\n|---|---|---|---|---|---|---|---|\n")
		for _, q := range r.Bursts {
			fmt.Fprintf(&b, "| %s | %d | %d | %.1f s | %.0f s | %d | %d | %d |\n", q.Peer, q.Backups, q.Concurrency, q.DrainSeconds, q.MaxWaitSeconds, q.MaxRunning, q.Stuck, q.Failed)
		}
		for _, q := range r.Bursts {
			if len(q.NotCompleted) > 0 {
				fmt.Fprintf(&b, "\n%s's backups not Completed: %s\n", q.Peer, strings.Join(q.NotCompleted, ", "))
			}
		}
	}
	return b.String()
}

// heapTable writes the servers' own accounts of each op (kube-apiserver's
// request count, their live heaps), for the runs that read them.
func (r *Results) heapTable(b *strings.Builder) {
	header := false
	for _, p := range r.pairs() {
		v, s := p.velero, p.backstop
		if v.HeapAfterMiB == 0 || s.HeapAfterMiB == 0 {
			continue
		}
		if !header {
			b.WriteString("\nRequests to kube-apiserver on ConfigMaps and Secrets during the op, every verb (its `apiserver_request_total`), per ConfigMap and Secret; the live heap of the server process (pprof `/debug/pprof/heap` after a collection; Velero's plugins not included), before the op → after it, and what of Backstop's is its engines' (informer caches and the engines' own) and its watch cache's:\n\n")
			b.WriteString("| objects | op | client QPS/burst | Velero requests/item | Backstop requests/item | Velero live heap | Backstop live heap | Backstop's engines | Backstop's watch cache |\n|---|---|---|---|---|---|---|---|---|\n")
			header = true
		}
		fmt.Fprintf(b, "| %d | %s | %s | %.3f | %.3f | %.0f → %.0f MiB | %.0f → %.0f MiB | %.0f MiB | %.0f MiB |\n", p.objects, p.op, limitName(p.qps), v.RequestsPerItem, s.RequestsPerItem,
			v.HeapBeforeMiB, v.HeapAfterMiB, s.HeapBeforeMiB, s.HeapAfterMiB, s.EnginesHeapMiB, s.WatchCacheHeapMiB)
	}
}

// limitName says which client limits a run had.
func limitName(qps int) string {
	if qps == 0 {
		return "defaults (100/100)"
	}
	return fmt.Sprintf("both %d/%d", qps, qps)
}

// Section markers of docs/benchmarks.md.
const (
	Begin = "<!-- bench-peers:begin (hack/bench-peers.sh writes this section) -->"
	End   = "<!-- bench-peers:end -->"
)

// Splice puts section between the markers of doc (appended with them
// when doc has none).
func Splice(doc, section string) string {
	block := Begin + "\n" + section + End
	i, j := strings.Index(doc, Begin), strings.Index(doc, End)
	if i < 0 || j < i {
		return strings.TrimRight(doc, "\n") + "\n\n" + block + "\n"
	}
	return doc[:i] + block + doc[j+len(End):]
}

// WriteDoc splices the section into the file doc.
func WriteDoc(doc, section string) error {
	data, err := os.ReadFile(doc)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.WriteFile(doc, []byte(Splice(string(data), section)), 0o644)
}
