//go:build bench

// Package backupbench measures backups of many small objects through the
// real server (test/integration/framework): items per second and the
// backing-up server's memory while it backs up 10,000 and 100,000 objects
// held by a second server (its --source-kubeconfig), side by side, in the
// same run and from the same source, with the reference: a client reading
// the same objects with the same paged list requests (page size and rate
// limits of the backup's client), the least any backup has to do. docs/benchmarks.md has the figures; hack/bench-backup.sh runs it.
package backupbench

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	kvbackupv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

var (
	sizes      = flag.String("backupbench.objects", "10000,100000", "comma-separated numbers of objects to back up")
	namespaces = flag.Int("backupbench.namespaces", 10, "namespaces the objects are spread over")
	pageSize   = flag.Int64("backupbench.page", 500, "list page size of the backup (--client-page-size) and the reference")
	qps        = flag.Float64("backupbench.qps", 20, "request rate limit of the backup (--client-qps) and the reference")
	burst      = flag.Int("backupbench.burst", 30, "request burst of the backup (--client-burst) and the reference")
)

const adminNamespace = "backstop-system"

var trackers = schema.GroupVersionResource{Group: kvbackupv1alpha1.GroupName, Version: "v1alpha1", Resource: "virtualmachinebackuptrackers"}

// createObjects creates n small VirtualMachineBackupTrackers over the
// namespaces with 32 concurrent clients.
func createObjects(b *testing.B, s *framework.Server, n int) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	group := "kubevirt.io"
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				ns := fmt.Sprintf("bench-%02d", i%*namespaces)
				_, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(ns).Create(context.Background(), &kvbackupv1alpha1.VirtualMachineBackupTracker{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t%07d", i), Namespace: ns, Labels: map[string]string{"app": "bench", "shard": strconv.Itoa(i % 16)}},
					Spec: kvbackupv1alpha1.VirtualMachineBackupTrackerSpec{Source: corev1.TypedLocalObjectReference{
						APIGroup: &group, Kind: "VirtualMachine", Name: fmt.Sprintf("vm-%07d", i)}},
				}, metav1.CreateOptions{})
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

func BenchmarkBackup(b *testing.B) {
	for _, field := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil {
			b.Fatalf("-backupbench.objects: %v", err)
		}
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			// The objects live in a source server; the backups run in
			// another one (--source-kubeconfig), whose memory is then the
			// backup's alone, not that of serving the objects.
			source := framework.Start(b, framework.Options{})
			createObjects(b, source, n)
			s := framework.Start(b, framework.Options{Args: []string{"--source-kubeconfig=" + source.KubeconfigPath,
				fmt.Sprintf("--client-page-size=%d", *pageSize), fmt.Sprintf("--client-qps=%g", *qps), fmt.Sprintf("--client-burst=%d", *burst),
			}})
			b.Run("impl=reference-paged-list", func(b *testing.B) { benchList(b, source, n) })
			b.Run("impl=backstop-backup", func(b *testing.B) { benchBackup(b, s, n) })
		})
	}
}

// benchList reads every object of the backed-up resource with paged lists
// as the backup's client does (same page size and rate limits).
func benchList(b *testing.B, s *framework.Server, n int) {
	cfg := rest.CopyConfig(s.Config)
	cfg.QPS, cfg.Burst = float32(*qps), *burst
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		read, cont := 0, ""
		for {
			list, err := client.Resource(trackers).List(ctx, metav1.ListOptions{Limit: *pageSize, Continue: cont})
			if err != nil {
				b.Fatal(err)
			}
			read += len(list.Items)
			if cont = list.GetContinue(); cont == "" {
				break
			}
		}
		if read != n {
			b.Fatalf("listed %d objects, want %d", read, n)
		}
	}
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "items/s")
}

// benchBackup backs up everything and waits until the backup completed;
// the server's peak RSS during the backup is reported beside items/s.
func benchBackup(b *testing.B, s *framework.Server, n int) {
	ctx := context.Background()
	pid := s.PID()
	var elapsed time.Duration
	var peak, growth int64
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("bench-%d", i)
		before := framework.ProcStatus(b, pid, "VmRSS")
		framework.ResetPeakRSS(b, pid)
		start := time.Now()
		if _, err := s.Clientset.VeleroV1().Backups(adminNamespace).Create(ctx, &velerov1.Backup{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: adminNamespace},
			Spec:       velerov1.BackupSpec{IncludedNamespaces: []string{"bench-*"}},
		}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		var done *velerov1.Backup
		pollCtx, cancel := context.WithTimeout(ctx, 30*time.Minute)
		err := wait.PollUntilContextCancel(pollCtx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			bk, err := s.Clientset.VeleroV1().Backups(adminNamespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			if bk.Status.Phase.Terminal() {
				done = bk
				return true, nil
			}
			return false, nil
		})
		cancel()
		elapsed += time.Since(start)
		if err != nil {
			b.Fatalf("backup %s did not finish", name)
		}
		if done.Status.Phase != velerov1.BackupPhaseCompleted || done.Status.Progress == nil || done.Status.Progress.ItemsBackedUp != n {
			b.Fatalf("backup %s: %s, progress %+v, want %d items", name, done.Status.Phase, done.Status.Progress, n)
		}
		if hwm := framework.ProcStatus(b, pid, "VmHWM"); hwm > peak {
			peak, growth = hwm, hwm-before
		}
	}
	b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "items/s")
	b.ReportMetric(float64(peak)/1024, "peak-rss-MiB")
	b.ReportMetric(float64(growth)/1024, "rss-growth-MiB")
}
