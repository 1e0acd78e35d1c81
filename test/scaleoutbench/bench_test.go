//go:build bench

// Package scaleoutbench measures the API served by several replicas on
// etcd3 beside one server on Pebble, in one run, through HTTP with
// client-go: creates of Backups (16 clients spread over the replicas), a
// list of all of them (10,000, as kubectl lists: no resourceVersion, so
// a consistent read) from 16 clients, and a watch fan-out (100 watchers
// spread over the replicas; time from the sending of a create to each
// watcher's event, p50 and p99). Three configurations: one server on
// Pebble (the reference), one replica on a three-member etcd, three
// replicas on it. Then the time another replica takes the engines' Lease
// after kill -9 of the leader, p50 and p99 over the trials. The engines
// are off: what is measured is the API and the election.
// hack/bench-scaleout.sh runs it; docs/benchmarks.md has the figures.
package scaleoutbench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/apiserver"
	"github.com/backstop-io/backstop/pkg/engine/leader"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	"github.com/backstop-io/backstop/test/integration/framework"
)

var (
	objects  = flag.Int("scaleoutbench.objects", 10000, "Backups created, then listed")
	clients  = flag.Int("scaleoutbench.clients", 16, "concurrent clients for creates and lists")
	lists    = flag.Int("scaleoutbench.lists", 48, "full lists")
	watchers = flag.Int("scaleoutbench.watchers", 100, "watchers of the fan-out")
	events   = flag.Int("scaleoutbench.events", 200, "creates each watcher sees")
	trials   = flag.Int("scaleoutbench.trials", 10, "kill -9 trials of the leader")
)

const ns = "backstop-system"

// Election timing of the takeover trials (TestScaleOut's).
var electionArgs = []string{"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"}

// engineless turns every engine off.
var engineless = "--disable-controllers=" + strings.Join(apiserver.EngineNames(), ",")

// clientOf is a client of s without client-side rate limits.
func clientOf(b *testing.B, s *framework.Server) versioned.Interface {
	b.Helper()
	cfg := rest.CopyConfig(s.Config)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := versioned.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func newBackup(name string) *velerov1.Backup {
	return &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench": "scaleout"}},
		Spec: velerov1.BackupSpec{IncludedNamespaces: []string{"app"}}}
}

// startReplicas starts n replicas on etcd, engines off.
func startReplicas(b *testing.B, etcd *framework.Etcd, n int, extra ...string) []*framework.Server {
	args := make([][]string, n)
	for i := range args {
		args[i] = append([]string{engineless}, extra...)
	}
	return framework.StartReplicas(b, etcd, args)
}

// row is one configuration's figures.
type row struct {
	name               string
	createsPerSec      float64
	listsPerSec        float64
	listP50, listP99   time.Duration
	watchP50, watchP99 time.Duration
}

// measure runs the creates, lists and watch fan-out against servers.
func measure(b *testing.B, name string, servers []*framework.Server) row {
	ctx := context.Background()
	cs := make([]versioned.Interface, len(servers))
	for i, s := range servers {
		cs[i] = clientOf(b, s)
	}
	r := row{name: name}

	start := time.Now()
	framework.Parallel(b, *clients, *objects, func(i int) error {
		_, err := cs[i%len(cs)].VeleroV1().Backups(ns).Create(ctx, newBackup(fmt.Sprintf("b-%06d", i)), metav1.CreateOptions{})
		return err
	})
	r.createsPerSec = float64(*objects) / time.Since(start).Seconds()

	var mu sync.Mutex
	var took []time.Duration
	start = time.Now()
	framework.Parallel(b, *clients, *lists, func(i int) error {
		t0 := time.Now()
		list, err := cs[i%len(cs)].VeleroV1().Backups(ns).List(ctx, metav1.ListOptions{LabelSelector: "bench=scaleout"})
		if err != nil {
			return err
		}
		if len(list.Items) < *objects {
			return fmt.Errorf("a list through replica %d has %d Backups, want %d", i%len(cs)+1, len(list.Items), *objects)
		}
		mu.Lock()
		took = append(took, time.Since(t0))
		mu.Unlock()
		return nil
	})
	r.listsPerSec = float64(*lists) / time.Since(start).Seconds()
	r.listP50, r.listP99 = framework.Percentiles(took)

	// Watch fan-out: watchers from now on, spread over the replicas.
	list, err := cs[0].VeleroV1().Backups(ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	r.watchP50, r.watchP99 = framework.FanOut{Watchers: *watchers, Events: *events,
		Watch: func(ctx context.Context, w int) (watch.Interface, error) {
			return cs[w%len(cs)].VeleroV1().Backups(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, LabelSelector: "bench=fanout"})
		},
		Create: func(ctx context.Context, i int) error {
			o := newBackup(framework.FanOutName(i))
			o.Labels["bench"] = "fanout"
			_, err := cs[i%len(cs)].VeleroV1().Backups(ns).Create(ctx, o, metav1.CreateOptions{})
			return err
		},
	}.Run(b)
	return r
}

func BenchmarkScaleOut(b *testing.B) {
	var rows []row
	pebble := framework.Start(b, framework.Options{Args: []string{engineless}})
	rows = append(rows, measure(b, "Pebble, 1 server (reference)", []*framework.Server{pebble}))
	pebble.Stop()

	one := framework.StartEtcd(b, 3)
	single := startReplicas(b, one, 1)
	rows = append(rows, measure(b, "etcd3 (3 members), 1 replica", single))
	single[0].Stop()

	three := framework.StartEtcd(b, 3)
	replicas := startReplicas(b, three, 3, electionArgs...)
	rows = append(rows, measure(b, "etcd3 (3 members), 3 replicas", replicas))

	fmt.Printf("objects %d, clients %d, lists %d, watchers %d, events %d\n", *objects, *clients, *lists, *watchers, *events)
	fmt.Println("| configuration | creates/s | lists of all/s | list p50 | list p99 | watch event p50 | watch event p99 |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %.0f | %.2f | %s | %s | %s | %s |\n", r.name, r.createsPerSec, r.listsPerSec,
			r.listP50.Round(time.Millisecond), r.listP99.Round(time.Millisecond), r.watchP50.Round(100*time.Microsecond), r.watchP99.Round(100*time.Microsecond))
		key := strings.NewReplacer(" ", "", ",", "-", "(", "", ")", "").Replace(r.name)
		b.ReportMetric(r.createsPerSec, key+"-creates/s")
		b.ReportMetric(r.listsPerSec, key+"-lists/s")
		b.ReportMetric(float64(r.watchP99.Microseconds()), key+"-watch-p99-µs")
	}

	// Takeover: kill -9 of the leader, trial after trial.
	takeovers := takeoverTrials(b, replicas)
	p50, p99 := framework.Percentiles(takeovers)
	fmt.Printf("takeover after kill -9 of the leader (Lease 4s, renew deadline 3s, retry 500ms), %d trials: p50 %s, p99 %s, all %v\n",
		len(takeovers), p50.Round(time.Millisecond), p99.Round(time.Millisecond), roundAll(takeovers))
	b.ReportMetric(float64(p50.Milliseconds()), "takeover-p50-ms")
	b.ReportMetric(float64(p99.Milliseconds()), "takeover-p99-ms")
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(10 * time.Millisecond)
	}
	return out
}

// takeoverTrials kills the leader trial after trial and measures the time
// until another replica holds the Lease, read through a live replica.
func takeoverTrials(b *testing.B, replicas []*framework.Server) []time.Duration {
	ctx := context.Background()
	ids := make([]string, len(replicas))
	for i, r := range replicas {
		id, err := os.ReadFile(filepath.Join(r.DataDir, "replica-id"))
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = "_" + strings.TrimSpace(string(id))
	}
	holder := func(via *framework.Server) (int, leader.Term) {
		kube, err := kubernetes.NewForConfig(via.Config)
		if err != nil {
			b.Fatal(err)
		}
		term, err := leader.LeaseTerm(kube.CoordinationV1(), ns)(ctx, "backstop-engines")
		if err != nil {
			return -1, term
		}
		for i, id := range ids {
			if strings.HasSuffix(term.Holder, id) {
				return i, term
			}
		}
		return -1, term
	}
	var out []time.Duration
	for range *trials {
		var idx int
		var term leader.Term
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			idx, term = holder(replicas[0])
			return idx >= 0, nil
		}); err != nil {
			b.Fatalf("no leader: %v", err)
		}
		via := replicas[(idx+1)%len(replicas)]
		killed := time.Now()
		replicas[idx].Kill()
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			next, now := holder(via)
			return next >= 0 && next != idx && !now.Same(term), nil
		}); err != nil {
			b.Fatalf("no replica took over: %v", err)
		}
		out = append(out, time.Since(killed))
		replicas[idx].StartAgain(nil)
	}
	return out
}
