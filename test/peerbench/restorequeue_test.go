package peerbench

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/backstop-io/backstop/test/integration/framework"
)

var (
	restoreBig   = flag.Int("peerbench.restore-big", 10000, "BenchmarkPeerRestoreQueue: ConfigMaps of the big restore")
	restoreSmall = flag.Int("peerbench.restore-small", 10, "BenchmarkPeerRestoreQueue: ConfigMaps of the small restore")
)

// restoreQueueRow is one peer's restore queue measurement.
type restoreQueueRow struct {
	peer string
	// alone is the big restore's duration by itself; beside it, with the
	// small one created while it ran.
	alone, beside time.Duration
	// small is the small restore's time from its creation to its end;
	// createdAfter is how far into the big restore it was created.
	small, createdAfter time.Duration
}

func (r restoreQueueRow) String() string {
	return fmt.Sprintf("| %s | %.1f s | %.1f s (%+.1f%%) | %.1f s after the big one's start | %.2f s |", r.peer, r.alone.Seconds(), r.beside.Seconds(),
		100*(r.beside.Seconds()/r.alone.Seconds()-1), r.createdAfter.Seconds(), r.small.Seconds())
}

// BenchmarkPeerRestoreQueue: a small restore created while a big one runs,
// on Velero (one restore at a time) and on Backstop (--concurrent-restores
// at its default): the small one's time from creation to end, and the big
// one's duration beside it against its duration alone. Both restore into
// new namespaces (namespaceMapping) at the default client limits.
func BenchmarkPeerRestoreQueue(b *testing.B) {
	c := framework.StartClusterWith(b, framework.ClusterOptions{WithoutBackstop: true})
	s3 := framework.StartS3(b)
	makeConfigMaps(b, c, "rq-big", *restoreBig)
	makeConfigMaps(b, c, "rq-small", *restoreSmall)
	var rows []restoreQueueRow
	v := c.StartVelero(s3, "velero")
	rows = append(rows, restoreQueue(b, c, veleroPeer(v, s3)))
	v.Stop()
	rows = append(rows, restoreQueue(b, c, startBackstop(b, c, s3, "backstop")))
	table := []string{"| server | big restore alone | beside the small one | small one created | small one: creation to end |", "|---|---|---|---|---|"}
	for _, r := range rows {
		table = append(table, r.String())
	}
	b.Logf("a %d-item restore created while a %d-item restore runs:\n%s", *restoreSmall, *restoreBig, strings.Join(table, "\n"))
}

// makeConfigMaps creates namespace with n labelled ConfigMaps.
func makeConfigMaps(b *testing.B, c *framework.Cluster, namespace string, n int) {
	b.Helper()
	ctx := context.Background()
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	data := map[string]string{"value": strings.Repeat("x", 160)}
	framework.Parallel(b, 16, n, func(i int) error {
		_, err := c.Kube.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%d", i), Labels: map[string]string{benchLabel: "true"}}, Data: data}, metav1.CreateOptions{})
		return err
	})
}

// restoreQueue backs up rq-big and rq-small with peer p, restores the big
// one alone, then again with the small one created once the big one has
// restored a tenth of its items.
func restoreQueue(b *testing.B, c *framework.Cluster, p peer) restoreQueueRow {
	b.Helper()
	selector := map[string]any{"matchExpressions": []any{map[string]any{"key": benchLabel, "operator": "Exists"}}}
	for _, ns := range []string{"rq-big", "rq-small"} {
		r := p.run(b, c, "backups", ns, map[string]any{"includedNamespaces": []any{ns}, "includedResources": []any{"configmaps"}, "labelSelector": selector}, "itemsBackedUp")
		if r.phase != "Completed" {
			b.Fatalf("%s: backup %s %s", p.name, ns, r.phase)
		}
	}
	row := restoreQueueRow{peer: p.name}
	restoreSpec := func(backup, into string) map[string]any {
		return map[string]any{"backupName": backup, "namespaceMapping": map[string]any{backup: into}}
	}
	alone := p.run(b, c, "restores", "big-alone", restoreSpec("rq-big", p.name+"-big-1"), "itemsRestored")
	if alone.phase != "Completed" || alone.items < *restoreBig { // Velero counts the namespace too
		b.Fatalf("%s: big restore alone %s with %d items", p.name, alone.phase, alone.items)
	}
	row.alone = alone.elapsed

	ctx := context.Background()
	restores := c.Dynamic.Resource(framework.VeleroResource("restores")).Namespace(p.namespace)
	create := func(name string, spec map[string]any) time.Time {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "velero.io/v1", "kind": "Restore",
			"metadata": map[string]any{"name": name, "namespace": p.namespace}, "spec": spec}}
		start := time.Now()
		if _, err := restores.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			b.Fatalf("%s: creating restore %s: %v", p.name, name, err)
		}
		return start
	}
	// ended polls a restore every 20 ms until cond holds of it.
	until := func(name string, cond func(phase string, restored int64) bool) (time.Time, string) {
		var phase string
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Hour, true, func(ctx context.Context) (bool, error) {
			got, err := restores.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			phase, _, _ = unstructured.NestedString(got.Object, "status", "phase")
			restored, _, _ := unstructured.NestedInt64(got.Object, "status", "progress", "itemsRestored")
			return cond(phase, restored), nil
		}); err != nil {
			b.Fatalf("%s: restore %s: %v (phase %q)", p.name, name, err, phase)
		}
		return time.Now(), phase
	}
	terminal := func(phase string, _ int64) bool {
		switch phase {
		case "Completed", "PartiallyFailed", "Failed", "FailedValidation":
			return true
		}
		return false
	}
	bigStart := create("big-beside", restoreSpec("rq-big", p.name+"-big-2"))
	until("big-beside", func(phase string, restored int64) bool {
		return terminal(phase, 0) || restored >= int64(*restoreBig/10)
	})
	smallStart := create("small", restoreSpec("rq-small", p.name+"-small"))
	row.createdAfter = smallStart.Sub(bigStart)
	smallEnd, phase := until("small", terminal)
	if phase != "Completed" {
		b.Fatalf("%s: the small restore ended %s", p.name, phase)
	}
	row.small = smallEnd.Sub(smallStart)
	bigEnd, phase := until("big-beside", terminal)
	if phase != "Completed" {
		b.Fatalf("%s: the big restore beside the small one ended %s", p.name, phase)
	}
	row.beside = bigEnd.Sub(bigStart)
	b.Logf("%s", row)
	return row
}
