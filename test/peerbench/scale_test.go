package peerbench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/backstop-io/backstop/test/integration/framework"
)

var (
	scaleObjects = flag.Int("peerbench.scale-objects", 1_000_000, "BenchmarkScale: ConfigMaps in the cluster at the end (1,000 per namespace)")
	scaleBase    = flag.Int("peerbench.scale-base", 100_000, "BenchmarkScale: ConfigMaps of the first backup, the one the biggest is compared with; also the restore's")
	scaleQPS     = flag.Int("peerbench.scale-restore-qps", 1000, "BenchmarkScale: the client limit (QPS and burst) of the restore")
	scaleProfile = flag.String("peerbench.scale-profiles", "", "BenchmarkScale: directory for profiles taken during each op: Backstop's and kube-apiserver's CPU (-peerbench.scale-cpu-seconds from 2 s in) and Backstop's heap (the last of one every 5 s)")
	scaleCPUSecs = flag.Int("peerbench.scale-cpu-seconds", 30, "BenchmarkScale: length of the CPU profiles")
)

// scaleRow is one backup or restore of the scale benchmark.
type scaleRow struct {
	op      string
	objects int
	elapsed time.Duration
	// peakAnon is the server's private memory's peak (sampled every
	// 100 ms); heap its live heap after.
	peakAnon, idleAnon, heapMiB float64
	// listP50, listP99: `kubectl get backups` (a list of the Backups
	// through kube-apiserver) while it ran, every 100 ms.
	listP50, listP99 time.Duration
	lists            int
}

func (r scaleRow) String() string {
	return fmt.Sprintf("| %s | %d | %.1f s | %.0f | %.0f → %.0f MiB | %.0f MiB | %.1f / %.1f ms (%d lists) |", r.op, r.objects, r.elapsed.Seconds(),
		float64(r.objects)/r.elapsed.Seconds(), r.idleAnon, r.peakAnon, r.heapMiB, ms(r.listP50), ms(r.listP99), r.lists)
}

// BenchmarkScale: Backstop aggregated into the cluster harness backs up
// -peerbench.scale-base ConfigMaps (100,000 small ones over 100
// namespaces), then all of -peerbench.scale-objects (1,000,000 over
// 1,000), and restores the first 100,000 into new namespaces at a raised
// client limit: the time and throughput of each, the server's peak
// private memory, and the latency of listing the Backups while each runs.
// Not in make test: make bench-scale.
func BenchmarkScale(b *testing.B) {
	c := framework.StartClusterWith(b, framework.ClusterOptions{WithoutBackstop: true})
	s3 := framework.StartS3(b)
	p := startBackstop(b, c, s3, "backstop")
	const perNamespace = 1000
	namespace := func(i int) string { return fmt.Sprintf("scale-%04d", i) }
	created := 0
	grow := func(to int) {
		b.Helper()
		start := time.Now()
		for ns := created / perNamespace; ns < to/perNamespace; ns++ {
			makeSmallConfigMaps(b, c, namespace(ns), perNamespace)
		}
		b.Logf("%d ConfigMaps created in %.0f s", to-created, time.Since(start).Seconds())
		created = to
	}
	namespaces := func(n int) []any {
		var out []any
		for i := range n / perNamespace {
			out = append(out, namespace(i))
		}
		return out
	}
	var rows []scaleRow
	backup := func(name string, objects int) {
		b.Helper()
		spec := map[string]any{"includedNamespaces": namespaces(objects), "includedResources": []any{"configmaps"},
			"labelSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": benchLabel, "operator": "Exists"}}}}
		row := scaleRow{op: "backup", objects: objects}
		r := watched(b, c, p, &row, func() result { return p.run(b, c, "backups", name, spec, "itemsBackedUp") })
		if r.phase != "Completed" || r.items != objects {
			b.Fatalf("backup %s: %s with %d items, want Completed with %d", name, r.phase, r.items, objects)
		}
		rows = append(rows, row)
		b.Logf("%s", row)
	}

	grow(*scaleBase)
	backup("scale-base", *scaleBase)
	grow(*scaleObjects)
	backup("scale-all", *scaleObjects)

	// The restore at a raised client limit.
	c.StopBackstop(false)
	c.BackstopArgs = append(c.BackstopArgs, fmt.Sprint("--client-qps=", *scaleQPS), fmt.Sprint("--client-burst=", *scaleQPS))
	c.StartBackstop()
	p.pid = c.BackstopPID()
	mapping := map[string]any{}
	for i := range *scaleBase / perNamespace {
		mapping[namespace(i)] = "restored-" + namespace(i)
	}
	row := scaleRow{op: fmt.Sprintf("restore (client limit %d)", *scaleQPS), objects: *scaleBase}
	r := watched(b, c, p, &row, func() result {
		return p.run(b, c, "restores", "scale-base", map[string]any{"backupName": "scale-base", "namespaceMapping": mapping}, "itemsRestored")
	})
	if r.phase != "Completed" {
		b.Fatalf("restore: %s; its results: %s", r.phase, p.restoreResults("scale-base"))
	}
	rows = append(rows, row)
	table := []string{"| op | objects | time | objects/s | private memory: idle → peak | live heap after | list of Backups p50 / p99 while it ran |", "|---|---|---|---|---|---|---|"}
	for _, r := range rows {
		table = append(table, r.String())
	}
	b.Logf("scale:\n%s", strings.Join(table, "\n"))
}

// makeSmallConfigMaps creates namespace with n small labelled ConfigMaps.
func makeSmallConfigMaps(b *testing.B, c *framework.Cluster, namespace string, n int) {
	b.Helper()
	ctx := context.Background()
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	framework.Parallel(b, 16, n, func(i int) error {
		_, err := c.Kube.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%d", i), Labels: map[string]string{benchLabel: "true"}},
			Data:       map[string]string{"value": "small"}}, metav1.CreateOptions{})
		return err
	})
}

// watched runs op while sampling the server's private memory and listing
// its Backups through kube-apiserver every 100 ms, and fills row.
func watched(b *testing.B, c *framework.Cluster, p peer, row *scaleRow, op func() result) result {
	b.Helper()
	row.idleAnon = float64(framework.TreeStatus(b, p.pid, "RssAnon")) / 1024
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if *scaleProfile != "" {
		profileOp(b, c, strings.NewReplacer(" ", "-", "(", "", ")", "").Replace(fmt.Sprintf("%s-%d", row.op, row.objects)), stop, &wg)
	}
	var peak int64
	var latencies []time.Duration
	var listErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		backups := p.backups(c)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if kb, err := framework.ReadTreeStatus(p.pid, "RssAnon"); err == nil {
					peak = max(peak, kb)
				}
				start := time.Now()
				if _, err := backups.List(context.Background(), metav1.ListOptions{}); err != nil && listErr == nil {
					listErr = err
				}
				latencies = append(latencies, time.Since(start))
			}
		}
	}()
	r := op()
	close(stop)
	wg.Wait()
	if listErr != nil {
		b.Fatalf("listing the Backups while the %s ran: %v", row.op, listErr)
	}
	row.elapsed = r.elapsed
	row.peakAnon = float64(peak) / 1024
	row.heapMiB = float64(p.heap(b).Total) / (1 << 20)
	slices.Sort(latencies)
	if n := len(latencies); n > 0 {
		row.lists, row.listP50, row.listP99 = n, latencies[n/2], latencies[min(n-1, n*99/100)]
	}
	return r
}

// profileOp writes, into -peerbench.scale-profiles, the CPU profiles of
// Backstop and kube-apiserver over -peerbench.scale-cpu-seconds from 2 s
// into an op, and the last of Backstop's heap profiles taken every 5 s
// until stop.
func profileOp(b *testing.B, c *framework.Cluster, name string, stop chan struct{}, wg *sync.WaitGroup) {
	b.Helper()
	if err := os.MkdirAll(*scaleProfile, 0o755); err != nil {
		b.Fatal(err)
	}
	servers := map[string]rest.Interface{"backstop": rawClient(b, c.BackstopDirect()), "kube-apiserver": rawClient(b, c.Admin)}
	get := func(client rest.Interface, path string, params map[string]string) ([]byte, error) {
		r := client.Get().AbsPath(path)
		for k, v := range params {
			r = r.Param(k, v)
		}
		return r.DoRaw(context.Background())
	}
	save := func(file string, body []byte, err error) {
		if err != nil {
			b.Logf("profile %s: %v", file, err)
			return
		}
		if err := os.WriteFile(filepath.Join(*scaleProfile, file), body, 0o644); err != nil {
			b.Logf("profile %s: %v", file, err)
		}
	}
	for server, client := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Second):
			}
			body, err := get(client, "/debug/pprof/profile", map[string]string{"seconds": fmt.Sprint(*scaleCPUSecs)})
			save(name+"."+server+".cpu.pprof", body, err)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				body, err := get(servers["backstop"], "/debug/pprof/heap", nil)
				save(name+".backstop.heap.pprof", body, err)
			}
		}
	}()
}
