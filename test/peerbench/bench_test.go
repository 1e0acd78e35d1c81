package peerbench

import (
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backstop-io/backstop/test/integration/framework"
)

var sizes = flag.String("peerbench.objects", "10000,100000", "comma-separated object counts (ConfigMaps, Secrets and Deployments over 10 namespaces)")

// workloadOf spreads about n objects over 10 namespaces: 10 Deployments
// each, the rest ConfigMaps and Secrets in equal numbers.
func workloadOf(n int) workload {
	w := workload{namespaces: 10, deployments: 10}
	w.configMaps = max(1, (n/w.namespaces-w.deployments)/2)
	return w
}

// measured reports a backup's or restore's throughput and what the peer's
// processes (the server and its plugins) used meanwhile.
func measured(b *testing.B, p peer, op func() result) {
	b.Helper()
	framework.ResetTreePeakRSS(b, p.pid)
	cpu := framework.TreeCPU(b, p.pid)
	r := op()
	cpu = framework.TreeCPU(b, p.pid) - cpu
	b.ReportMetric(float64(r.items)/r.elapsed.Seconds(), "items/s")
	b.ReportMetric(float64(framework.TreePeakRSS(b, p.pid))/1024, "peak-rss-MiB")
	b.ReportMetric(cpu.Seconds(), "cpu-s")
	b.ReportMetric(r.elapsed.Seconds(), "s")
}

// benchPeer measures a peer's backup of the workload and its restore.
func benchPeer(b *testing.B, c *framework.Cluster, p peer, w workload) {
	b.Run("op=backup/impl="+p.name, func(b *testing.B) { measured(b, p, func() result { return p.backup(b, c, w) }) })
	b.Run("op=restore/impl="+p.name, func(b *testing.B) { measured(b, p, func() result { return p.restore(b, c, w) }) })
}

// BenchmarkPeers: for each object count, on one cluster and one S3
// server, Velero (its CRDs and `velero server`) and then Backstop back up
// the same workload and restore it into new namespaces: items/s, the peak
// RSS and CPU seconds of the server's processes.
func BenchmarkPeers(b *testing.B) {
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

			v := c.StartVelero(s3, "velero")
			benchPeer(b, c, peer{name: "velero", namespace: framework.VeleroNamespace, pid: v.PID(), store: filepath.Join(s3.Root, "velero")}, w)
			v.Stop()
			benchPeer(b, c, startBackstop(b, c, s3, "backstop"), w)
		})
	}
}
