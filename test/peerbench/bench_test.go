package peerbench

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backstop-io/backstop/test/integration/framework"
	"github.com/backstop-io/backstop/test/peerbench/report"
)

var (
	sizes      = flag.String("peerbench.objects", "10000,100000", "comma-separated object counts (ConfigMaps, Secrets and Deployments over 10 namespaces)")
	apiObjects = flag.Int("peerbench.api-objects", 10000, "Backups the API comparison creates, updates and lists")
	burstSize  = flag.Int("peerbench.burst", 200, "Backups created at once in the queue comparison")
	out        = flag.String("peerbench.out", "", "directory the results are written to as JSON (hack/peer-report reads them)")
	clientQPS  = flag.Int("peerbench.client-qps", 0, "BenchmarkPeers only: run both peers with --client-qps and --client-burst at this value (0: their defaults, 100 and 100 on both)")
)

// workloadOf spreads about n objects over 10 namespaces: 10 Deployments
// each, the rest ConfigMaps and Secrets in equal numbers.
func workloadOf(n int) workload {
	w := workload{namespaces: 10, deployments: 10}
	w.configMaps = max(1, (n/w.namespaces-w.deployments)/2)
	return w
}

// save writes v as -peerbench.out/<name>.json.
func save(b *testing.B, name string, v any) {
	b.Helper()
	if *out == "" {
		return
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*out, name+".json"), data, 0o644); err != nil {
		b.Fatal(err)
	}
}

// measured reports a backup's or restore's throughput and what the peer's
// processes (the server and its plugins) used meanwhile.
func measured(b *testing.B, c *framework.Cluster, p peer, w workload, op string, run func() result) report.Transfer {
	b.Helper()
	heapBefore := p.heap(b)
	requests := w.requests(b, c)
	framework.ResetTreePeakRSS(b, p.pid)
	cpu := framework.TreeCPU(b, p.pid)
	// Private memory (RssAnon: heap and stacks, not the binaries' code)
	// has no peak in /proc: it is sampled.
	anon := framework.TreeStatus(b, p.pid, "RssAnon")
	type sample struct {
		peak int64
		err  error
	}
	// The sampler ends with the op, also when the op fails the benchmark.
	stop, sampled := make(chan struct{}), make(chan sample, 1)
	go func() {
		s := sample{peak: anon}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				sampled <- s
				return
			case <-tick.C:
				kb, err := framework.ReadTreeStatus(p.pid, "RssAnon")
				s.peak = max(s.peak, kb)
				if s.err == nil {
					s.err = err
				}
			}
		}
	}()
	r := func() result { defer close(stop); return run() }()
	s := <-sampled
	if s.err != nil {
		b.Fatalf("sampling the private memory of %s: %v", p.name, s.err)
	}
	cpu = framework.TreeCPU(b, p.pid) - cpu
	peakRSS := framework.TreePeakRSS(b, p.pid)
	requests = w.requests(b, c) - requests
	heapAfter := p.heap(b)
	mib := func(bytes int64) float64 { return float64(bytes) / (1 << 20) }
	t := report.Transfer{Objects: w.items(), ClientQPS: *clientQPS, Peer: p.name, Op: op, Items: r.items, Seconds: r.elapsed.Seconds(),
		ItemsPerSec: float64(r.items) / r.elapsed.Seconds(), PeakRSSMiB: float64(peakRSS) / 1024, CPUSeconds: cpu.Seconds(),
		IdleAnonMiB: float64(anon) / 1024, PeakAnonMiB: float64(s.peak) / 1024,
		HeapBeforeMiB: mib(heapBefore.Total), HeapAfterMiB: mib(heapAfter.Total), EnginesHeapMiB: mib(heapAfter.Engines), WatchCacheHeapMiB: mib(heapAfter.WatchCache),
		RequestsPerItem: float64(requests) / float64(w.configMapsAndSecrets())}
	b.ReportMetric(t.ItemsPerSec, "items/s")
	b.ReportMetric(t.PeakRSSMiB, "peak-rss-MiB")
	b.ReportMetric(t.PeakAnonMiB, "peak-anon-MiB")
	b.ReportMetric(t.HeapAfterMiB, "live-heap-after-MiB")
	b.ReportMetric(t.RequestsPerItem, "requests/item")
	b.ReportMetric(t.CPUSeconds, "cpu-s")
	b.ReportMetric(t.Seconds, "s")
	return t
}

// benchPeer measures a peer's backup of the workload, its restore, and
// then its cancel and deletions.
func benchPeer(b *testing.B, c *framework.Cluster, p peer, w workload, canCancel bool, results *report.Results) {
	b.Run("op=backup/impl="+p.name, func(b *testing.B) {
		results.Transfers = append(results.Transfers, measured(b, c, p, w, "backup", func() result { return p.backup(b, c, w) }))
	})
	b.Run("op=restore/impl="+p.name, func(b *testing.B) {
		results.Transfers = append(results.Transfers, measured(b, c, p, w, "restore", func() result { return p.restore(b, c, w) }))
	})
	if *clientQPS != 0 {
		return // measured at the defaults
	}
	cancel, running, completed := p.cancelDelete(b, c, w, canCancel)
	results.Ops = append(results.Ops, report.Op{Objects: w.items(), Peer: p.name, Cancel: cancel.String(), DeleteRunning: running.String(), DeleteCompleted: completed.String()})
}

// BenchmarkPeers: for each object count, on one cluster and one S3
// server, Velero (its CRDs and `velero server`) and then Backstop back up
// the same workload and restore it into new namespaces (items/s, the peak
// RSS and CPU seconds of the server's processes), then cancel and delete
// backups of it.
func BenchmarkPeers(b *testing.B) {
	results := &report.Results{Versions: versions(b)}
	for _, field := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil {
			b.Fatalf("-peerbench.objects: %v", err)
		}
		w := workloadOf(n)
		b.Run(fmt.Sprintf("objects=%d", w.items()), func(b *testing.B) {
			c := framework.StartClusterWith(b, framework.ClusterOptions{WithoutBackstop: true})
			s3 := framework.StartS3(b)
			start := time.Now()
			w.create(b, c.Kube)
			b.Logf("%d objects created in %v", w.items(), time.Since(start).Round(time.Millisecond))

			var limits []string
			if *clientQPS != 0 {
				limits = []string{fmt.Sprint("--client-qps=", *clientQPS), fmt.Sprint("--client-burst=", *clientQPS)}
			}
			v := c.StartVelero(s3, "velero", limits...)
			benchPeer(b, c, veleroPeer(v, s3), w, false, results)
			v.Stop()
			benchPeer(b, c, startBackstop(b, c, s3, "backstop", limits...), w, true, results)
		})
	}
	name := "transfers"
	if *clientQPS != 0 {
		name = fmt.Sprintf("transfers-qps%d", *clientQPS)
	}
	save(b, name, results)
}

// BenchmarkPeerAPI: Velero's Backup resource served by kube-apiserver
// from Velero's CRD (JSON in etcd), by Backstop aggregated behind the
// same kube-apiserver, and by a standalone Backstop reached directly:
// creates (1 and 16 clients), updates, lists of all, watch fan-out.
func BenchmarkPeerAPI(b *testing.B) {
	l := apiLoad{objects: *apiObjects, clients: 16, lists: 48, watchers: 100, events: 200}
	var rows []report.API
	for _, r := range apiPeers(b, l) {
		rows = append(rows, r.report())
		b.Logf("%s: creates/s %.0f (1 client), %.0f (%d); updates/s %.0f; lists/s %.2f (p50 %v, p99 %v), read as bytes %.2f (p50 %v, p99 %v); watch p50 %v, p99 %v",
			r.server, r.creates1, r.createsN, l.clients, r.updates, r.listsPerSec, r.listP50, r.listP99, r.rawListsPerSec, r.rawListP50, r.rawListP99, r.watchP50, r.watchP99)
	}
	save(b, "api", report.Results{Versions: versions(b), API: rows})
}

// BenchmarkPeerQueue: -peerbench.burst Backups created at once, each of
// its own namespace of ten ConfigMaps, with --concurrent-backups 5 on both peers:
// time until all have run, the longest wait in the queue, the most
// running at once, and any stuck.
func BenchmarkPeerQueue(b *testing.B) {
	c := framework.StartClusterWith(b, framework.ClusterOptions{WithoutBackstop: true})
	s3 := framework.StartS3(b)
	makeBurstNamespaces(b, c, *burstSize)
	var rows []report.Burst
	v := c.StartVelero(s3, "velero", fmt.Sprint("--concurrent-backups=", QueueConcurrency))
	velero := veleroPeer(v, s3)
	rows = append(rows, velero.burst(b, c, *burstSize, time.Hour).report(velero.name))
	v.Stop()
	backstop := startBackstop(b, c, s3, "backstop", fmt.Sprint("--concurrent-backups=", QueueConcurrency))
	rows = append(rows, backstop.burst(b, c, *burstSize, time.Hour).report(backstop.name))
	for _, r := range rows {
		b.Logf("%+v", r)
	}
	save(b, "queue", report.Results{Versions: versions(b), Bursts: rows})
}

func (r apiRow) report() report.API {
	return report.API{Server: r.server, Objects: r.objects, Clients: r.clients, Creates1: r.creates1, CreatesN: r.createsN, Updates: r.updates,
		ListsPerSec: r.listsPerSec, ListP50ms: ms(r.listP50), ListP99ms: ms(r.listP99),
		RawListsPerSec: r.rawListsPerSec, RawListP50ms: ms(r.rawListP50), RawListP99ms: ms(r.rawListP99), WatchP50ms: ms(r.watchP50), WatchP99ms: ms(r.watchP99)}
}

func (r burstRow) report(peer string) report.Burst {
	return report.Burst{Peer: peer, Backups: r.backups, Concurrency: QueueConcurrency, DrainSeconds: r.drain.Seconds(),
		MaxWaitSeconds: r.maxWait.Seconds(), MaxRunning: r.maxRunning, Stuck: r.stuck, Failed: len(r.notCompleted), NotCompleted: r.notCompleted}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// versions are what the run measured: the peers' and the control plane's
// versions, Backstop's commit, Go, and the machine.
func versions(b *testing.B) map[string]string {
	b.Helper()
	first := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).Output()
		if err != nil {
			return fmt.Sprintf("unknown (%v)", err)
		}
		return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	velero := framework.Binary(b, "velero")
	v := map[string]string{
		"Velero":                "unknown",
		"velero-plugin-for-aws": "unknown",
		"kube-apiserver":        first(framework.Binary(b, "kube-apiserver"), "--version"),
		"Backstop":              first("git", "describe", "--always", "--dirty"),
		"Go":                    runtime.Version(),
		"machine":               fmt.Sprintf("%d CPUs, %s", runtime.NumCPU(), first("sh", "-c", "grep MemTotal /proc/meminfo")),
	}
	if out, err := exec.Command(velero, "version", "--client-only").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if s, ok := strings.CutPrefix(strings.TrimSpace(line), "Version: "); ok {
				v["Velero"] = s + " (velero server, CRDs from velero install --crds-only)"
			}
		}
	}
	if data, err := os.ReadFile(filepath.Join(filepath.Dir(velero), "velero-plugins", ".version")); err == nil {
		v["velero-plugin-for-aws"] = strings.TrimSpace(string(data))
	}
	return v
}
