package peerbench

import (
	"context"
	"flag"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/backstop-io/backstop/test/integration/framework"
)

var (
	idleSettle  = flag.Duration("peerbench.idle-settle", 30*time.Second, "BenchmarkIdleAggregated: how long the server runs before it is measured")
	idleProfile = flag.String("peerbench.idle-profile", "", "BenchmarkIdleAggregated: file the heap profile is written to")
)

// BenchmarkIdleAggregated: an idle Backstop aggregated into kube-apiserver
// (the cluster harness, as installed), measured as make bench-idle measures
// a standalone one: its private memory (RssAnon) and live heap after the
// server has run for -peerbench.idle-settle, the heap profile kept in
// -peerbench.idle-profile.
func BenchmarkIdleAggregated(b *testing.B) {
	c := framework.StartClusterWith(b, framework.ClusterOptions{})
	time.Sleep(*idleSettle) // what is measured is the server after this long: nothing to wait for
	client, err := kubernetes.NewForConfig(c.BackstopDirect())
	if err != nil {
		b.Fatal(err)
	}
	profile, err := client.Discovery().RESTClient().Get().AbsPath("/debug/pprof/heap").Param("gc", "1").DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	heap, err := framework.ParseHeap(profile)
	if err != nil {
		b.Fatal(err)
	}
	if *idleProfile != "" {
		if err := os.WriteFile(*idleProfile, profile, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	anon := framework.TreeStatus(b, c.BackstopPID(), "RssAnon")
	b.ReportMetric(float64(anon)/1024, "anon-MiB")
	b.ReportMetric(float64(heap.Total)/(1<<20), "live-heap-MiB")
}
