// Package peerbench runs Backstop and its peer, the real Velero server
// (Velero's CRDs in the same kube-apiserver and etcd), on the same
// cluster content, storing into the same S3 server, side by side in one
// run: Velero first (its CRDs serve velero.io), then Backstop (its
// APIService serves velero.io once the CRDs are gone). Each backs up the
// same namespaces of ConfigMaps, Secrets and Deployments and restores them
// into new namespaces, through the same velero.io/v1 objects with the same
// client. TestPeersSmoke does it with a few objects in `make test`, so
// the harness cannot rot; hack/bench-peers.sh runs the benchmark.
package peerbench

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/backstop-io/backstop/test/integration/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.RunInNetNS(m)) }

// benchLabel marks the objects the peers back up.
const benchLabel = "backstop.io/peer-bench"

// workload is what the peers back up: per namespace, configMaps
// ConfigMaps, as many Secrets, and deployments Deployments.
type workload struct {
	namespaces, configMaps, deployments int
}

func (w workload) namespace(i int) string { return fmt.Sprintf("peers-%02d", i) }

// namespaceList is every namespace of the workload, as a Backup's
// includedNamespaces.
func (w workload) namespaceList() []any {
	var out []any
	for i := range w.namespaces {
		out = append(out, w.namespace(i))
	}
	return out
}

// items is how many objects of the workload a backup takes and a restore
// brings back (the labelled ones).
func (w workload) items() int { return w.namespaces * (2*w.configMaps + w.deployments) }

// configMapsAndSecrets is how many of the workload's items are ConfigMaps
// and Secrets.
func (w workload) configMapsAndSecrets() int { return 2 * w.namespaces * w.configMaps }

// requests is kube-apiserver's count so far of requests on ConfigMaps and
// Secrets, of every verb: what a backup or restore of the workload asks of
// it, read before and after. Deployments are left out, as
// kube-controller-manager writes restored ones too.
func (w workload) requests(tb testing.TB, c *framework.Cluster) int64 {
	tb.Helper()
	return c.APIRequests(tb, "configmaps", "secrets")
}

// create makes the workload with 16 concurrent clients.
func (w workload) create(t testing.TB, kube kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{benchLabel: "true"}
	for i := range w.namespaces {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.namespace(i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	replicas := int32(1)
	framework.Parallel(t, 16, w.namespaces*(w.configMaps+w.deployments), func(k int) error {
		ns, j := w.namespace(k%w.namespaces), k/w.namespaces
		if j >= w.configMaps {
			d := j - w.configMaps
			sel := map[string]string{"app": fmt.Sprintf("d%d", d)}
			_, err := kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("d%d", d), Labels: labels},
				Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: sel},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}}}}},
			}, metav1.CreateOptions{})
			return err
		}
		data := map[string]string{"value": strings.Repeat("x", 160)}
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%d", j), Labels: labels}, Data: data}, metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", j), Labels: labels}, StringData: data}, metav1.CreateOptions{})
		return err
	})
}

// count counts the labelled objects of the namespaces prefix-NN.
func (w workload) count(t testing.TB, kube kubernetes.Interface, prefix string) int {
	t.Helper()
	ctx := context.Background()
	opts := metav1.ListOptions{LabelSelector: benchLabel}
	n := 0
	for i := range w.namespaces {
		ns := fmt.Sprintf("%s-%02d", prefix, i)
		cms, err1 := kube.CoreV1().ConfigMaps(ns).List(ctx, opts)
		secrets, err2 := kube.CoreV1().Secrets(ns).List(ctx, opts)
		deployments, err3 := kube.AppsV1().Deployments(ns).List(ctx, opts)
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("counting the objects of %s: %v %v %v", ns, err1, err2, err3)
		}
		n += len(cms.Items) + len(secrets.Items) + len(deployments.Items)
	}
	return n
}

// peer is a server of velero.io/v1: Velero's CRDs and `velero server`,
// or Backstop.
type peer struct {
	name string
	// namespace holds its Backups and Restores.
	namespace string
	pid       int
	// store is its bucket's directory in the S3 server.
	store string
	// heap reads the live heap of its server process (pprof).
	heap func(testing.TB) framework.Heap
}

// veleroPeer is the Velero server v as a peer, storing into bucket
// "velero" of s3.
func veleroPeer(v *framework.Velero, s3 *framework.S3Server) peer {
	return peer{name: "velero", namespace: framework.VeleroNamespace, pid: v.PID(), store: filepath.Join(s3.Root, "velero"), heap: v.Heap}
}

// backups is the client of the peer's Backups.
func (p peer) backups(c *framework.Cluster) dynamic.ResourceInterface {
	return c.Dynamic.Resource(framework.VeleroResource("backups")).Namespace(p.namespace)
}

// restoreResults is what a restore's results file in the peer's bucket
// says (errors and warnings by namespace), for a failure's message.
func (p peer) restoreResults(name string) string {
	f, err := os.Open(filepath.Join(p.store, "restores", name, "restore-"+name+"-results.gz"))
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err.Error()
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return err.Error()
	}
	return string(data)
}

// result is one backup or restore by a peer.
type result struct {
	elapsed time.Duration
	items   int
	phase   string
}

// run creates a velero.io/v1 object (Backup or Restore) in the peer's
// namespace and waits until its phase is final.
func (p peer) run(t testing.TB, c *framework.Cluster, resource, name string, spec map[string]any, progressField string) result {
	t.Helper()
	ctx := context.Background()
	client := c.Dynamic.Resource(framework.VeleroResource(resource)).Namespace(p.namespace)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "velero.io/v1", "kind": map[string]string{"backups": "Backup", "restores": "Restore"}[resource],
		"metadata": map[string]any{"name": name, "namespace": p.namespace}, "spec": spec,
	}}
	start := time.Now()
	if _, err := client.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("%s: creating %s %s: %v", p.name, resource, name, err)
	}
	var last *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Hour, true, func(ctx context.Context) (bool, error) {
		got, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = got
		phase, _, _ := unstructured.NestedString(got.Object, "status", "phase")
		switch phase {
		case "Completed", "PartiallyFailed", "Failed", "FailedValidation":
			return true, nil
		}
		return false, nil
	})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("%s: %s %s did not end: %v (last: %v)", p.name, resource, name, err, last)
	}
	phase, _, _ := unstructured.NestedString(last.Object, "status", "phase")
	items, _, _ := unstructured.NestedInt64(last.Object, "status", "progress", progressField)
	return result{elapsed: elapsed, items: int(items), phase: phase}
}

// backup backs up the workload's namespaces; it must complete with the
// workload's objects.
func (p peer) backup(t testing.TB, c *framework.Cluster, w workload) result {
	t.Helper()
	r := p.run(t, c, "backups", "peers", map[string]any{
		"includedNamespaces": w.namespaceList(),
		"includedResources":  []any{"configmaps", "secrets", "deployments"},
		"labelSelector":      map[string]any{"matchExpressions": []any{map[string]any{"key": benchLabel, "operator": "Exists"}}},
	}, "itemsBackedUp")
	if r.phase != "Completed" || r.items != w.items() {
		t.Fatalf("%s: backup %s with %d items, want Completed with %d", p.name, r.phase, r.items, w.items())
	}
	return r
}

// restore restores the backup into <peer>-NN; it must complete and the
// restored namespaces hold the workload's objects.
func (p peer) restore(t testing.TB, c *framework.Cluster, w workload) result {
	t.Helper()
	mapping := map[string]any{}
	for i := range w.namespaces {
		mapping[w.namespace(i)] = fmt.Sprintf("%s-%02d", p.name, i)
	}
	r := p.run(t, c, "restores", "peers", map[string]any{"backupName": "peers", "namespaceMapping": mapping}, "itemsRestored")
	if r.phase != "Completed" {
		t.Fatalf("%s: restore %s, want Completed; its results: %s", p.name, r.phase, p.restoreResults("peers"))
	}
	if got := w.count(t, c.Kube, p.name); got != w.items() {
		t.Fatalf("%s: the restored namespaces hold %d of the workload's objects, want %d", p.name, got, w.items())
	}
	r.items = w.items()
	return r
}

// startBackstop installs Backstop (with extra arguments) in the cluster
// Velero has left, with a default storage location on the S3 server.
func startBackstop(t testing.TB, c *framework.Cluster, s3 *framework.S3Server, bucket string, args ...string) peer {
	t.Helper()
	c.InstallBackstop(args...)
	s3.MakeBucket(t, bucket)
	creds, err := os.ReadFile(s3.CredentialsFile(t, "default"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := framework.BackstopNamespace
	if _, err := c.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloud-credentials"},
		Data: map[string][]byte{"cloud": creds}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	locations := c.Dynamic.Resource(framework.VeleroResource("backupstoragelocations")).Namespace(ns)
	existing, err := locations.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The S3 location is the default one, as Velero's is.
	for _, l := range existing.Items {
		if def, _, _ := unstructured.NestedBool(l.Object, "spec", "default"); def {
			_ = unstructured.SetNestedField(l.Object, false, "spec", "default")
			if _, err := locations.Update(ctx, &l, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	bsl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
		"metadata": map[string]any{"name": "s3", "namespace": ns},
		"spec": map[string]any{
			"provider": "aws", "default": true,
			"objectStorage": map[string]any{"bucket": bucket},
			"credential":    map[string]any{"name": "cloud-credentials", "key": "cloud"},
			"config":        map[string]any{"region": "us-east-1", "s3Url": s3.Endpoint, "s3ForcePathStyle": "true"},
		},
	}}
	if _, err := locations.Create(ctx, bsl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := locations.Get(ctx, "s3", metav1.GetOptions{})
		phase, _, _ := unstructured.NestedString(got.Object, "status", "phase")
		return err == nil && phase == "Available", nil
	}); err != nil {
		t.Fatalf("Backstop's S3 location is not Available: %v", err)
	}
	direct := c.BackstopDirect()
	return peer{name: "backstop", namespace: ns, pid: c.BackstopPID(), store: filepath.Join(s3.Root, bucket),
		heap: func(t testing.TB) framework.Heap { t.Helper(); return framework.HeapOf(t, direct) }}
}

// TestPeersSmoke: the peer harness end to end with a few objects: Velero
// (its CRDs, `velero server`, velero-plugin-for-aws) and then Backstop, on
// the same cluster content and S3 server, each back up the workload,
// restore it into new namespaces, cancel and delete backups, and run a
// small burst of backups, with the same velero.io/v1 objects.
func TestPeersSmoke(t *testing.T) {
	c := framework.StartClusterWith(t, framework.ClusterOptions{WithoutBackstop: true})
	s3 := framework.StartS3(t)
	w := workload{namespaces: 2, configMaps: 5, deployments: 2}
	w.create(t, c.Kube)
	const burst = 12
	makeBurstNamespaces(t, c, burst)
	concurrency := fmt.Sprint("--concurrent-backups=", QueueConcurrency)

	v := c.StartVelero(s3, "velero", concurrency)
	velero := veleroPeer(v, s3)
	vb, vr := velero.backup(t, c, w), velero.restore(t, c, w)
	vh := velero.heap(t)
	vc, vdr, vdc := velero.cancelDelete(t, c, w, false)
	vq := velero.burst(t, c, burst, 5*time.Minute)
	v.Stop()

	backstop := startBackstop(t, c, s3, "backstop", concurrency)
	bb := backstop.backup(t, c, w)
	requests := w.requests(t, c)
	br := backstop.restore(t, c, w)
	requests = w.requests(t, c) - requests
	bh := backstop.heap(t)
	bc, bdr, bdc := backstop.cancelDelete(t, c, w, true)
	bq := backstop.burst(t, c, burst, 5*time.Minute)
	t.Logf("%d items: backup velero %v, backstop %v; restore velero %v, backstop %v", w.items(), vb.elapsed, bb.elapsed, vr.elapsed, br.elapsed)
	t.Logf("cancel, delete running, delete completed: velero %v, %v, %v; backstop %v, %v, %v", vc, vdr, vdc, bc, bdr, bdc)
	t.Logf("burst of %d: velero %+v; backstop %+v", burst, vq, bq)
	t.Logf("live heap after the restore: velero %+v; backstop %+v; backstop's restore: %d requests on ConfigMaps and Secrets", vh, bh, requests)
	// Backstop's restore writes each ConfigMap and Secret with one create
	// and reads none of them (kube-controller-manager's kube-root-ca.crt
	// of each new namespace is in the count too).
	if n := int64(w.configMapsAndSecrets()); requests < n || requests > n*3/2 {
		t.Errorf("backstop's restore of %d ConfigMaps and Secrets: %d requests on them, want one each", n, requests)
	}
	// Both servers' profiles are read, and Backstop's is split: its
	// engines hold at least their informers' caches.
	if vh.Total <= 0 || bh.Total <= 0 || bh.Engines <= 0 || bh.Engines+bh.WatchCache > bh.Total {
		t.Errorf("live heaps: velero %+v, backstop %+v: want both read, and Backstop's engines' share within its total", vh, bh)
	}
	// The harness follows both peers' bursts to their end; what the
	// backups ended as is Backstop's to answer for only (Velero's are
	// reported: a run here had one PartiallyFailed).
	if vq.stuck != 0 {
		t.Errorf("velero: burst of %d: %d not followed to their end", burst, vq.stuck)
	}
	if bq.stuck != 0 || len(bq.notCompleted) != 0 || bq.maxRunning > QueueConcurrency {
		t.Errorf("backstop: burst of %d: %d stuck, not Completed %v, up to %d running at once (--concurrent-backups %d)",
			burst, bq.stuck, bq.notCompleted, bq.maxRunning, QueueConcurrency)
	}
}

// TestPeersAPISmoke: the API comparison with a small load: Velero's CRD,
// Backstop aggregated, Backstop standalone, with and without lists from
// stored bytes.
func TestPeersAPISmoke(t *testing.T) {
	rows := apiPeers(t, apiLoad{objects: 40, clients: 4, lists: 4, watchers: 5, events: 5})
	if len(rows) != 4 {
		t.Fatalf("%d servers measured, want 4", len(rows))
	}
	for _, r := range rows {
		if r.creates1 <= 0 || r.createsN <= 0 || r.updates <= 0 || r.listsPerSec <= 0 || r.rawListsPerSec <= 0 || r.watchP99 <= 0 {
			t.Errorf("%s: a figure is missing: %+v", r.server, r)
		}
		t.Logf("%+v", r)
	}
}
