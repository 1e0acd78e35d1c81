//go:build bench

// Package nonadminbench measures the tenants' engine through the real
// server (test/integration/framework) at 1,000 tenants × 10
// NonAdminBackups: how long 10,000 NonAdminBackups created concurrently
// take to reach Created; how long a Backup's completion takes to reach its
// NonAdminBackup (p50, p99), and how many requests on NonAdminBackups
// each completion costs (the server's own request counter), which must
// not grow with the number of NonAdminBackups; the server's RSS as
// completions accumulate, and its live heap (engines, watch cache, all)
// before any and after all completions: the engines' must stay flat. The backup engine is off: the benchmark writes
// each Backup's transitions as the engines would, so that what is
// measured is the tenants' engine. hack/bench-nonadmin.sh runs it;
// docs/benchmarks.md has the figures.
package nonadminbench

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"golang.org/x/time/rate"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/generated/informers/externalversions"
	"github.com/backstop-io/backstop/test/integration/framework"
)

var (
	tenants   = flag.Int("nonadminbench.tenants", 1000, "tenant namespaces")
	perTenant = flag.Int("nonadminbench.nabs", 10, "NonAdminBackups per tenant")
	workers   = flag.Int("nonadminbench.workers", 32, "concurrent clients")
	pace      = flag.Float64("nonadminbench.completions-per-second", 0, "backups completed per second (0: as fast as the clients go, a burst)")
)

const adminNamespace = "backstop-system"

// nabRequests is the server's count of requests on NonAdminBackups.
func nabRequests(b *testing.B, s *framework.Server) int {
	b.Helper()
	body, err := s.Clientset.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	total := 0
	lines := bufio.NewScanner(strings.NewReader(string(body)))
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	for lines.Scan() {
		l := lines.Text()
		if !strings.HasPrefix(l, "apiserver_request_total{") || !strings.Contains(l, `resource="nonadminbackups"`) {
			continue
		}
		n, err := strconv.ParseFloat(l[strings.LastIndex(l, " ")+1:], 64)
		if err == nil {
			total += int(n)
		}
	}
	return total
}

func BenchmarkNonAdmin(b *testing.B) {
	s := framework.Start(b, framework.Options{Args: []string{"--disable-controllers=backup,backup-sync,restore,schedule,gc"}})
	ctx := context.Background()
	n := *tenants * *perTenant
	name := func(i int) (string, string) {
		return fmt.Sprintf("t%04d", i / *perTenant), fmt.Sprintf("nab%d", i%*perTenant)
	}

	// Every NonAdminBackup as it changes, seen through an informer (a
	// watch the server closes, as it may a busy one, is opened again).
	var mu sync.Mutex
	created := map[string]bool{}
	completedAt := map[string]time.Time{}
	allCreated := make(chan struct{})
	observe := func(obj any) {
		nab, ok := obj.(*oadpv1alpha1.NonAdminBackup)
		if !ok {
			return
		}
		key := nab.Namespace + "/" + nab.Name
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if nab.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated && !created[key] {
			created[key] = true
			if len(created) == n {
				close(allCreated)
			}
		}
		if vb := nab.Status.VeleroBackup; vb != nil && vb.Status != nil && vb.Status.Phase == velerov1.BackupPhaseCompleted {
			if _, ok := completedAt[key]; !ok {
				completedAt[key] = now
			}
		}
	}
	factory := externalversions.NewSharedInformerFactory(s.Clientset, 0)
	if _, err := factory.Oadp().V1alpha1().NonAdminBackups().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: observe, UpdateFunc: func(_, obj any) { observe(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	factory.WaitForCacheSync(stop)

	// 1. All created at once.
	start := time.Now()
	framework.Parallel(b, *workers, n, func(i int) error {
		ns, nm := name(i)
		_, err := s.Clientset.OadpV1alpha1().NonAdminBackups(ns).Create(ctx, &oadpv1alpha1.NonAdminBackup{
			ObjectMeta: metav1.ObjectMeta{Name: nm}, Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{}}}, metav1.CreateOptions{})
		return err
	})
	progress := time.NewTicker(10 * time.Second)
	defer progress.Stop()
	for waiting := true; waiting; {
		select {
		case <-allCreated:
			waiting = false
		case <-progress.C:
			mu.Lock()
			b.Logf("%d of %d NonAdminBackups Created after %s", len(created), n, time.Since(start).Round(time.Second))
			mu.Unlock()
		case <-time.After(30 * time.Minute):
			b.Fatalf("not all NonAdminBackups Created after 30 minutes")
		}
	}
	createdIn := time.Since(start)
	heapCreated := framework.HeapOf(b, s.Config)

	// 2. Each Backup walked to Completed as the engines would write it;
	// the time from the last write to its NonAdminBackup showing it.
	backupOf := make([]string, n)
	for i := range n {
		ns, nm := name(i)
		nab, err := s.Clientset.OadpV1alpha1().NonAdminBackups(ns).Get(ctx, nm, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		backupOf[i] = nab.Status.VeleroBackup.Name
	}
	engine := s.EngineClientset().VeleroV1().Backups(adminNamespace)
	wroteAt := make([]time.Time, n)
	requestsBefore := nabRequests(b, s)
	pid := s.PID()
	rss := map[int]int64{}
	var done atomic.Int64
	limit := rate.NewLimiter(rate.Inf, 1)
	if *pace > 0 {
		limit = rate.NewLimiter(rate.Limit(*pace), 1)
	}
	framework.Parallel(b, *workers, n, func(i int) error {
		if err := limit.Wait(ctx); err != nil {
			return err
		}
		for {
			cur, err := engine.Get(ctx, backupOf[i], metav1.GetOptions{})
			if err != nil {
				return err
			}
			path := velerov1.BackupLifecycle.Path(cur.Status.Phase, velerov1.BackupPhaseCompleted)
			if len(path) == 0 {
				break
			}
			cur.Status.Phase = path[0]
			if _, err := engine.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
				return err
			}
			if path[0] == velerov1.BackupPhaseCompleted {
				wroteAt[i] = time.Now()
			}
		}
		if d := done.Add(1); d == int64(n/4) || d == int64(n) {
			mu.Lock()
			rss[int(d)] = framework.ProcStatus(b, pid, "VmRSS")
			mu.Unlock()
		}
		return nil
	})
	walked := time.Since(start.Add(createdIn))
	b.Logf("walked %d backups to Completed in %s", n, walked)
	var latencies []time.Duration
	deadline := time.Now().Add(5 * time.Minute)
	for {
		mu.Lock()
		seen := len(completedAt)
		mu.Unlock()
		if seen == n || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	requests := nabRequests(b, s) - requestsBefore
	heapCompleted := framework.HeapOf(b, s.Config)
	mu.Lock()
	for i := range n {
		ns, nm := name(i)
		if at, ok := completedAt[ns+"/"+nm]; ok && !wroteAt[i].IsZero() {
			latencies = append(latencies, max(at.Sub(wroteAt[i]), 0))
		}
	}
	mu.Unlock()
	if len(latencies) != n {
		b.Fatalf("%d of %d completions reached their NonAdminBackup", len(latencies), n)
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 { return float64(latencies[int(p*float64(n-1))].Microseconds()) / 1000 }
	b.ReportMetric(createdIn.Seconds(), "all-created-s")
	b.ReportMetric(float64(n)/createdIn.Seconds(), "created/s")
	b.ReportMetric(pct(0.5), "completion-p50-ms")
	b.ReportMetric(pct(0.99), "completion-p99-ms")
	b.ReportMetric(float64(requests)/float64(n), "nab-requests/completion")
	b.ReportMetric(float64(rss[n/4])/1024, "rss-at-25%-MiB")
	b.ReportMetric(float64(rss[n])/1024, "rss-at-100%-MiB")
	b.ReportMetric(float64(n)/walked.Seconds(), "completions/s")
	mib := func(bytes int64) float64 { return float64(bytes) / (1 << 20) }
	b.ReportMetric(mib(heapCreated.Engines), "engines-heap-0%-MiB")
	b.ReportMetric(mib(heapCompleted.Engines), "engines-heap-100%-MiB")
	b.ReportMetric(mib(heapCreated.WatchCache), "watchcache-heap-0%-MiB")
	b.ReportMetric(mib(heapCompleted.WatchCache), "watchcache-heap-100%-MiB")
	b.ReportMetric(mib(heapCreated.Total), "heap-0%-MiB")
	b.ReportMetric(mib(heapCompleted.Total), "heap-100%-MiB")
}
