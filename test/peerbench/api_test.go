package peerbench

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/backstop-io/backstop/pkg/apiserver"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// apiLoad is what the API comparison does to each server of Backups: the
// same objects through the same dynamic client-go client.
type apiLoad struct {
	// objects Backups are created: a fifth by one client, the rest by
	// clients at once; each is then updated once (clients at once) and
	// all are listed lists times (clients at once).
	objects, clients, lists int
	// watchers watch while events Backups are created.
	watchers, events int
}

// apiRow is one server's figures.
type apiRow struct {
	server                      string
	creates1, createsN, updates float64 // per second
	listsPerSec                 float64
	listP50, listP99            time.Duration
	// The same lists read as bytes (no decoding in the client).
	rawListsPerSec         float64
	rawListP50, rawListP99 time.Duration
	watchP50, watchP99     time.Duration
	objects, clients       int
}

// withoutLimits is cfg without client-side rate limits or a timeout (a
// big list, a CPU profile take long).
func withoutLimits(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst, cfg.Timeout = -1, 0, 0
	return cfg
}

// unlimited is a dynamic client of cfg without client-side rate limits.
func unlimited(tb testing.TB, cfg *rest.Config) dynamic.Interface {
	tb.Helper()
	d, err := dynamic.NewForConfig(withoutLimits(cfg))
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// rawClient reads responses as bytes (no decoding), without client-side
// rate limits.
func rawClient(tb testing.TB, cfg *rest.Config) rest.Interface {
	tb.Helper()
	c, err := kubernetes.NewForConfig(withoutLimits(cfg))
	if err != nil {
		tb.Fatal(err)
	}
	return c.Discovery().RESTClient()
}

// apiBackup is the Backup the API comparison creates: what `velero
// backup create` sends for one namespace.
func apiBackup(namespace, name, label string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "velero.io/v1", "kind": "Backup",
		"metadata": map[string]any{"name": name, "namespace": namespace, "labels": map[string]any{"bench": label}},
		"spec": map[string]any{
			"includedNamespaces": []any{"app"}, "storageLocation": "default", "ttl": "720h0m0s",
			"csiSnapshotTimeout": "10m0s", "itemOperationTimeout": "4h0m0s",
		},
	}}
}

// measureAPI runs the load against the Backups of namespace through
// client: creates (one client, then many), updates, full lists, and a
// watch fan-out.
func measureAPI(tb testing.TB, server string, cfg *rest.Config, namespace string, l apiLoad) apiRow {
	tb.Helper()
	ctx := context.Background()
	client, raw := unlimited(tb, cfg), rawClient(tb, cfg)
	backups := client.Resource(framework.VeleroResource("backups")).Namespace(namespace)
	r := apiRow{server: server, objects: l.objects, clients: l.clients}
	created := make([]*unstructured.Unstructured, l.objects)
	create := func(i int) error {
		got, err := backups.Create(ctx, apiBackup(namespace, fmt.Sprintf("b-%06d", i), "api"), metav1.CreateOptions{})
		created[i] = got
		return err
	}
	alone := l.objects / 5
	start := time.Now()
	for i := range alone {
		if err := create(i); err != nil {
			tb.Fatalf("%s: create: %v", server, err)
		}
	}
	r.creates1 = float64(alone) / time.Since(start).Seconds()
	start = time.Now()
	framework.Parallel(tb, l.clients, l.objects-alone, func(i int) error { return create(alone + i) })
	r.createsN = float64(l.objects-alone) / time.Since(start).Seconds()

	start = time.Now()
	framework.Parallel(tb, l.clients, l.objects, func(i int) error {
		o := created[i]
		o.SetLabels(map[string]string{"bench": "api", "updated": "true"})
		_, err := backups.Update(ctx, o, metav1.UpdateOptions{})
		return err
	})
	r.updates = float64(l.objects) / time.Since(start).Seconds()

	var mu sync.Mutex
	var took []time.Duration
	start = time.Now()
	framework.Parallel(tb, l.clients, l.lists, func(int) error {
		t0 := time.Now()
		list, err := backups.List(ctx, metav1.ListOptions{LabelSelector: "bench=api"})
		if err != nil {
			return err
		}
		if len(list.Items) != l.objects {
			return fmt.Errorf("a list has %d Backups, want %d", len(list.Items), l.objects)
		}
		mu.Lock()
		took = append(took, time.Since(t0))
		mu.Unlock()
		return nil
	})
	r.listsPerSec = float64(l.lists) / time.Since(start).Seconds()
	r.listP50, r.listP99 = framework.Percentiles(took)

	// The same lists read as bytes, as they come (gzip when big, as
	// client-go asks for): what the server does per list, without the
	// client's decoding into objects (as costly as the server's encoding,
	// on the same cores). Each item has one uid.
	took = nil
	start = time.Now()
	framework.Parallel(tb, l.clients, l.lists, func(int) error {
		t0 := time.Now()
		body, err := raw.Get().AbsPath("/apis/velero.io/v1/namespaces/"+namespace+"/backups").Param("labelSelector", "bench=api").DoRaw(ctx)
		if err != nil {
			return err
		}
		if n := bytes.Count(body, []byte(`"uid":`)); n != l.objects {
			return fmt.Errorf("a list read as bytes has %d Backups, want %d", n, l.objects)
		}
		mu.Lock()
		took = append(took, time.Since(t0))
		mu.Unlock()
		return nil
	})
	r.rawListsPerSec = float64(l.lists) / time.Since(start).Seconds()
	r.rawListP50, r.rawListP99 = framework.Percentiles(took)

	// The watches start after the updates: from the list's version.
	now, err := backups.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		tb.Fatal(err)
	}
	r.watchP50, r.watchP99 = framework.FanOut{Watchers: l.watchers, Events: l.events,
		Watch: func(ctx context.Context, _ int) (watch.Interface, error) {
			return backups.Watch(ctx, metav1.ListOptions{ResourceVersion: now.GetResourceVersion(), LabelSelector: "bench=fanout"})
		},
		Create: func(ctx context.Context, i int) error {
			_, err := backups.Create(ctx, apiBackup(namespace, framework.FanOutName(i), "fanout"), metav1.CreateOptions{})
			return err
		},
	}.Run(tb)
	return r
}

// engineless turns Backstop's engines off: the API comparison measures
// the API (no Velero server runs against the CRDs either).
var engineless = "--disable-controllers=" + strings.Join(apiserver.EngineNames(), ",")

// apiPeers measures the servers of Backups on one cluster: Velero's CRD
// in kube-apiserver and etcd, Backstop aggregated behind the same
// kube-apiserver, and a standalone Backstop reached directly, with and
// without lists from stored bytes.
func apiPeers(tb testing.TB, l apiLoad) []apiRow {
	tb.Helper()
	c := framework.StartClusterWith(tb, framework.ClusterOptions{WithoutBackstop: true})
	ctx := context.Background()
	c.InstallVeleroCRDs()
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: framework.VeleroNamespace}}, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	var rows []apiRow
	rows = append(rows, measureAPI(tb, "Velero's CRD (kube-apiserver, etcd)", c.Admin, framework.VeleroNamespace, l))
	c.RemoveVeleroCRDs()

	c.InstallBackstop(engineless)
	rows = append(rows, measureAPI(tb, "Backstop aggregated (through kube-apiserver)", c.Admin, framework.BackstopNamespace, l))
	c.StopBackstop(false)

	s := framework.Start(tb, framework.Options{Args: []string{engineless}})
	rows = append(rows, measureAPI(tb, "Backstop standalone (direct)", s.Config, framework.BackstopNamespace, l))
	s.Stop()

	// The same without lists from stored bytes: each object encoded.
	s = framework.Start(tb, framework.Options{Args: []string{engineless, "--lists-from-storage=false"}})
	rows = append(rows, measureAPI(tb, "Backstop standalone, lists encoded (--lists-from-storage=false)", s.Config, framework.BackstopNamespace, l))
	s.Stop()
	return rows
}
