package peerbench

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/backstop-io/backstop/test/integration/framework"
)

var watchRuns = flag.Int("peerbench.watch-runs", 5, "BenchmarkPeerWatch: fan-out runs per server")

// watchRow is one server's fan-outs: each run's p50 and p99.
type watchRow struct {
	server   string
	p50, p99 []time.Duration
}

// String is the row of the table BenchmarkPeerWatch logs: the p99's
// median and range over the runs, then each run's p50/p99.
func (r watchRow) String() string {
	sorted := slices.Clone(r.p99)
	slices.Sort(sorted)
	var runs []string
	for i := range r.p99 {
		runs = append(runs, fmt.Sprintf("%.1f/%.1f", ms(r.p50[i]), ms(r.p99[i])))
	}
	return fmt.Sprintf("| %s | %.1f ms | %.1f-%.1f ms | %s |", r.server, ms(sorted[len(sorted)/2]), ms(sorted[0]), ms(sorted[len(sorted)-1]),
		strings.Join(runs, ", "))
}

// fanOuts runs the API comparison's watch fan-out (100 watchers, 200
// creates) runs times against the Backups of namespace through client,
// each run with objects and a label of its own.
func fanOuts(tb testing.TB, server string, client dynamic.Interface, namespace string, runs int) watchRow {
	tb.Helper()
	backups := client.Resource(framework.VeleroResource("backups")).Namespace(namespace)
	row := watchRow{server: server}
	for range runs {
		// Two servers may serve the same Backups (aggregated, through
		// kube-apiserver and directly): the objects of each run are new.
		label := fmt.Sprintf("fanout-%d", time.Now().UnixNano())
		now, err := backups.List(context.Background(), metav1.ListOptions{Limit: 1})
		if err != nil {
			tb.Fatal(err)
		}
		p50, p99 := framework.FanOut{Watchers: 100, Events: 200,
			Watch: func(ctx context.Context, _ int) (watch.Interface, error) {
				return backups.Watch(ctx, metav1.ListOptions{ResourceVersion: now.GetResourceVersion(), LabelSelector: "bench=" + label})
			},
			Create: func(ctx context.Context, i int) error {
				// The watchers read the index from the name's
				// "fanout-<i>" start.
				_, err := backups.Create(ctx, apiBackup(namespace, framework.FanOutName(i)+"-"+label, label), metav1.CreateOptions{})
				return err
			},
		}.Run(tb)
		row.p50, row.p99 = append(row.p50, p50), append(row.p99, p99)
	}
	return row
}

// BenchmarkPeerWatch: the watch fan-out of BenchmarkPeerAPI (100 watchers,
// each seeing 200 creates; the time from a create's sending to each
// watcher's event) -peerbench.watch-runs times against each server:
// Velero's CRD (kube-apiserver, etcd), Backstop aggregated through
// kube-apiserver, the same Backstop reached directly (the aggregator's
// proxy costs the difference), Backstop standalone. It logs a table: the
// p99's median and range over the runs, and each run's p50/p99.
func BenchmarkPeerWatch(b *testing.B) {
	c := framework.StartClusterWith(b, framework.ClusterOptions{WithoutBackstop: true})
	client := unlimited(b, c.Admin)
	c.InstallVeleroCRDs()
	if _, err := c.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: framework.VeleroNamespace}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var rows []watchRow
	rows = append(rows, fanOuts(b, "Velero's CRD (kube-apiserver, etcd)", client, framework.VeleroNamespace, *watchRuns))
	c.RemoveVeleroCRDs()

	c.InstallBackstop(engineless)
	rows = append(rows, fanOuts(b, "Backstop aggregated (through kube-apiserver)", client, framework.BackstopNamespace, *watchRuns))
	rows = append(rows, fanOuts(b, "Backstop aggregated (direct: no aggregator proxy)", unlimited(b, c.BackstopDirect()), framework.BackstopNamespace, *watchRuns))
	c.StopBackstop(false)

	s := framework.Start(b, framework.Options{Args: []string{engineless}})
	rows = append(rows, fanOuts(b, "Backstop standalone (direct)", unlimited(b, s.Config), framework.BackstopNamespace, *watchRuns))
	s.Stop()

	table := []string{"| server | watch p99, median | p99 range | each run p50/p99 (ms) |", "|---|---|---|---|"}
	for _, r := range rows {
		table = append(table, r.String())
	}
	b.Logf("watch fan-out, %d runs per server:\n%s", *watchRuns, strings.Join(table, "\n"))
}
