//go:build bench

// Package clusterbench measures backups and restores of a real cluster:
// Backstop in aggregated mode behind kube-apiserver and etcd
// (framework.StartCluster), backing up 10,000 and 100,000 ConfigMaps and
// Secrets spread over namespaces, side by side in the same run with the
// references: a bare client reading the same objects with the same paged
// lists, and a bare client creating the same objects one by one, at the
// same rate limits. The backing-up server's peak RSS is reported beside.
// BenchmarkVolumeSnapshots (snapshots_test.go) times a backup's CSI
// snapshots against bare VolumeSnapshots. docs/benchmarks.md has the
// figures; hack/bench-cluster.sh and make bench-snapshots run them.
package clusterbench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.RunInNetNS(m)) }

var (
	sizes      = flag.String("clusterbench.objects", "10000,100000", "comma-separated numbers of objects (half ConfigMaps, half Secrets)")
	namespaces = flag.Int("clusterbench.namespaces", 10, "namespaces the objects are spread over")
	pageSize   = flag.Int64("clusterbench.page", 500, "list page size of the backup (--client-page-size) and the reference")
	qps        = flag.Float64("clusterbench.qps", 1000, "request rate limit of Backstop's client (--client-qps) and the references")
	burst      = flag.Int("clusterbench.burst", 1000, "request burst of Backstop's client (--client-burst) and the references")
)

const adminNamespace = framework.BackstopNamespace

func nsName(prefix string, i int) string { return fmt.Sprintf("%s-%02d", prefix, i%*namespaces) }

// object is the i-th object: a ConfigMap or a Secret of about 200 bytes.
func object(i int, prefix string) (cm *corev1.ConfigMap, secret *corev1.Secret) {
	meta := metav1.ObjectMeta{Name: fmt.Sprintf("o%07d", i), Namespace: nsName(prefix, i), Labels: map[string]string{"app": "bench", "shard": strconv.Itoa(i % 16)}}
	value := strings.Repeat("x", 128)
	if i%2 == 0 {
		return &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"value": value}}, nil
	}
	return nil, &corev1.Secret{ObjectMeta: meta, StringData: map[string]string{"value": value}}
}

// createNamespaces creates the namespaces <prefix>-NN that n objects are
// spread over.
func createNamespaces(b *testing.B, client kubernetes.Interface, prefix string, n int) {
	b.Helper()
	for i := 0; i < *namespaces && i < n; i++ {
		if _, err := client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName(prefix, i)}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// createObjects creates n objects in namespaces <prefix>-NN with 32
// concurrent clients.
func createObjects(b *testing.B, client kubernetes.Interface, prefix string, n int) {
	b.Helper()
	ctx := context.Background()
	createNamespaces(b, client, prefix, n)
	const workers = 32
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				var err error
				if cm, secret := object(i, prefix); cm != nil {
					_, err = client.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
				} else {
					_, err = client.CoreV1().Secrets(secret.Namespace).Create(ctx, secret, metav1.CreateOptions{})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatalf("creating objects: %v", err)
	}
}

// createJSON creates the n objects in namespaces <prefix>-NN one by one,
// as JSON (the dynamic client, at the rate limits): what a restore has to
// write, with nothing else done. It returns the time the objects took.
func createJSON(b *testing.B, c *framework.Cluster, prefix string, n int) time.Duration {
	b.Helper()
	ctx := context.Background()
	createNamespaces(b, c.Kube, prefix, n)
	cfg := rest.CopyConfig(c.Admin)
	cfg.QPS, cfg.Burst = float32(*qps), *burst
	client := dynamic.NewForConfigOrDie(cfg)
	start := time.Now()
	for i := 0; i < n; i++ {
		var obj any
		resource := "configmaps"
		if cm, secret := object(i, prefix); cm != nil {
			cm.APIVersion, cm.Kind, obj = "v1", "ConfigMap", cm
		} else {
			secret.APIVersion, secret.Kind, obj, resource = "v1", "Secret", secret, "secrets"
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			b.Fatal(err)
		}
		item := &unstructured.Unstructured{Object: u}
		if _, err := client.Resource(schema.GroupVersionResource{Version: "v1", Resource: resource}).Namespace(item.GetNamespace()).Create(ctx, item, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

func BenchmarkCluster(b *testing.B) {
	for _, field := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil {
			b.Fatalf("-clusterbench.objects: %v", err)
		}
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			c := framework.StartCluster(b)
			c.StopBackstop(false)
			c.BackstopArgs = append(c.BackstopArgs, fmt.Sprintf("--client-page-size=%d", *pageSize),
				fmt.Sprintf("--client-qps=%g", *qps), fmt.Sprintf("--client-burst=%d", *burst))
			c.StartBackstop()
			createObjects(b, c.Kube, "bench", n)

			b.Run("op=backup/impl=reference-paged-list", func(b *testing.B) { benchList(b, c, n) })
			b.Run("op=backup/impl=backstop", func(b *testing.B) { benchBackup(b, c, n) })
			b.Run("op=restore/impl=reference-create", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					elapsed := createJSON(b, c, fmt.Sprintf("ref%d", i), n)
					b.ReportMetric(float64(n)/elapsed.Seconds(), "items/s")
				}
			})
			b.Run("op=restore/impl=backstop", func(b *testing.B) { benchRestore(b, c, n) })
		})
	}
}

// benchList reads the ConfigMaps and Secrets with paged lists at the
// backup's page size and rate limits, as JSON into unstructured objects
// (the dynamic client): what a backup has to read, without writing it
// anywhere.
func benchList(b *testing.B, c *framework.Cluster, n int) {
	cfg := rest.CopyConfig(c.Admin)
	cfg.QPS, cfg.Burst = float32(*qps), *burst
	client := dynamic.NewForConfigOrDie(cfg)
	ctx := context.Background()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		read := 0
		for _, resource := range []string{"configmaps", "secrets"} {
			cont := ""
			for {
				list, err := client.Resource(schema.GroupVersionResource{Version: "v1", Resource: resource}).List(ctx, metav1.ListOptions{Limit: *pageSize, Continue: cont})
				if err != nil {
					b.Fatal(err)
				}
				read += len(list.Items)
				if cont = list.GetContinue(); cont == "" {
					break
				}
			}
		}
		if read < n {
			b.Fatalf("listed %d objects, want at least %d", read, n)
		}
	}
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "items/s")
}

// benchBackup backs up the ConfigMaps and Secrets of the bench namespaces
// and waits for the end; the server's peak RSS is reported beside items/s.
func benchBackup(b *testing.B, c *framework.Cluster, n int) {
	ctx := context.Background()
	pid := c.BackstopPID()
	var elapsed time.Duration
	var peak int64
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("bench-%d", i)
		framework.ResetPeakRSS(b, pid)
		start := time.Now()
		if _, err := c.Backstop.VeleroV1().Backups(adminNamespace).Create(ctx, &velerov1.Backup{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       velerov1.BackupSpec{IncludedNamespaces: []string{"bench-*"}, IncludedResources: []string{"configmaps", "secrets"}},
		}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		done := waitBackup(b, c, name, start)
		elapsed += time.Since(start)
		if done.Status.Phase != velerov1.BackupPhaseCompleted || done.Status.Progress == nil || done.Status.Progress.ItemsBackedUp < n {
			b.Fatalf("backup %s: %s, progress %+v, want %d items", name, done.Status.Phase, done.Status.Progress, n)
		}
		peak = max(peak, framework.ProcStatus(b, pid, "VmHWM"))
	}
	b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "items/s")
	b.ReportMetric(float64(peak)/1024, "peak-rss-MiB")
}

// benchRestore restores the first backup into new namespaces
// (namespaceMapping) and waits for the end.
func benchRestore(b *testing.B, c *framework.Cluster, n int) {
	ctx := context.Background()
	pid := c.BackstopPID()
	var elapsed time.Duration
	var peak int64
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("bench-%d", i)
		mapping := map[string]string{}
		for j := 0; j < *namespaces; j++ {
			mapping[nsName("bench", j)] = nsName(fmt.Sprintf("restored%d", i), j)
		}
		framework.ResetPeakRSS(b, pid)
		start := time.Now()
		if _, err := c.Backstop.VeleroV1().Restores(adminNamespace).Create(ctx, &velerov1.Restore{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       velerov1.RestoreSpec{BackupName: "bench-0", NamespaceMapping: mapping},
		}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		var done *velerov1.Restore
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Hour, true, func(ctx context.Context) (bool, error) {
			r, err := c.Backstop.VeleroV1().Restores(adminNamespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			done = r
			return r.Status.Phase.Terminal(), nil
		})
		elapsed += time.Since(start)
		if err != nil || done.Status.Phase != velerov1.RestorePhaseCompleted || done.Status.Progress == nil || done.Status.Progress.ItemsRestored < n {
			b.Fatalf("restore %s: %v, %+v", name, err, done)
		}
		peak = max(peak, framework.ProcStatus(b, pid, "VmHWM"))
	}
	b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "items/s")
	b.ReportMetric(float64(peak)/1024, "peak-rss-MiB")
}

// waitBackup waits for the end of backup name, created at start, and logs
// when each phase was first seen.
func waitBackup(b *testing.B, c *framework.Cluster, name string, start time.Time) *velerov1.Backup {
	b.Helper()
	var done *velerov1.Backup
	var phases []string
	last := velerov1.BackupPhase("-")
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, time.Hour, true, func(ctx context.Context) (bool, error) {
		bk, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		done = bk
		if bk.Status.Phase != last {
			last = bk.Status.Phase
			phases = append(phases, fmt.Sprintf("%s at %v", last, time.Since(start).Round(time.Millisecond)))
		}
		return bk.Status.Phase.Terminal(), nil
	})
	if err != nil {
		b.Fatalf("backup %s did not end: %v", name, err)
	}
	b.Logf("backup %s: %s", name, strings.Join(phases, ", "))
	return done
}
