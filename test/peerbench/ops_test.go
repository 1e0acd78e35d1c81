package peerbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/backstop-io/backstop/test/integration/framework"
)

// QueueConcurrency is --concurrent-backups of both peers in the burst.
const QueueConcurrency = 5

// burstNamespace is the namespace of the burst's i-th backup: each has
// its own, as backups of one namespace run one after the other on both
// peers (a backup waits for those whose namespaces overlap its own).
func burstNamespace(i int) string { return fmt.Sprintf("burst-%03d", i) }

// burstRow is a peer's burst: backups Backups created at once, each of
// its burstNamespace, with QueueConcurrency.
type burstRow struct {
	backups int
	// drain is from the first create to the last backup's end (seen).
	drain time.Duration
	// maxWait is the longest from a backup's creation to its start
	// (status.startTimestamp; seconds).
	maxWait time.Duration
	// maxRunning is the most backups seen InProgress at once.
	maxRunning int
	// stuck did not end within the deadline; notCompleted ended otherwise
	// than Completed (name: phase).
	stuck        int
	notCompleted []string
}

// makeBurstNamespaces creates the burst's n namespaces, each with ten
// ConfigMaps.
func makeBurstNamespaces(tb testing.TB, c *framework.Cluster, n int) {
	tb.Helper()
	ctx := context.Background()
	framework.Parallel(tb, 16, n, func(i int) error {
		ns := burstNamespace(i)
		if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		for j := range 10 {
			if _, err := c.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm", j)},
				Data: map[string]string{"value": "x"}}, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
}

// finalPhases end a Backup.
var finalPhases = map[string]bool{"Completed": true, "PartiallyFailed": true, "Failed": true, "FailedValidation": true}

// burst creates n Backups, each of its burstNamespace, from 16 clients at once and
// follows them (a list every 100 ms) until all have ended or deadline
// has passed.
func (p peer) burst(tb testing.TB, c *framework.Cluster, n int, deadline time.Duration) burstRow {
	tb.Helper()
	ctx := context.Background()
	backups := unlimited(tb, c.Admin).Resource(framework.VeleroResource("backups")).Namespace(p.namespace)
	start := time.Now()
	framework.Parallel(tb, 16, n, func(i int) error {
		_, err := backups.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "velero.io/v1", "kind": "Backup",
			"metadata": map[string]any{"name": fmt.Sprintf("burst-%03d", i), "labels": map[string]any{"bench": "burst"}},
			"spec":     map[string]any{"includedNamespaces": []any{burstNamespace(i)}},
		}}, metav1.CreateOptions{})
		return err
	})
	r := burstRow{backups: n}
	var last *unstructured.UnstructuredList
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, deadline, true, func(ctx context.Context) (bool, error) {
		list, err := backups.List(ctx, metav1.ListOptions{LabelSelector: "bench=burst"})
		if err != nil {
			return false, nil
		}
		last = list
		running, ended := 0, 0
		for _, b := range list.Items {
			phase, _, _ := unstructured.NestedString(b.Object, "status", "phase")
			switch {
			case phase == "InProgress":
				running++
			case finalPhases[phase]:
				ended++
			}
		}
		r.maxRunning = max(r.maxRunning, running)
		return ended == n, nil
	})
	r.drain = time.Since(start)
	if err != nil && !wait.Interrupted(err) || last == nil {
		tb.Fatalf("%s: following the burst: %v", p.name, err)
	}
	for _, b := range last.Items {
		phase, _, _ := unstructured.NestedString(b.Object, "status", "phase")
		switch {
		case !finalPhases[phase]:
			r.stuck++
			continue
		case phase != "Completed":
			r.notCompleted = append(r.notCompleted, b.GetName()+": "+phase)
		}
		started, _, _ := unstructured.NestedString(b.Object, "status", "startTimestamp")
		if t, err := time.Parse(time.RFC3339, started); err == nil {
			r.maxWait = max(r.maxWait, t.Sub(b.GetCreationTimestamp().Time))
		}
	}
	r.stuck += n - len(last.Items)
	return r
}

// opRow is the outcome of a cancel or delete request: how long until the
// backup was over with its data gone, or why there is no such time.
type opRow struct {
	took    time.Duration
	outcome string
}

func (o opRow) String() string {
	if o.took == 0 {
		return o.outcome
	}
	return fmt.Sprintf("%.2f s", o.took.Seconds())
}

// startBackup creates Backup name of the workload and waits until it is
// InProgress; false if it ended first.
func (p peer) startBackup(tb testing.TB, c *framework.Cluster, w workload, name string) bool {
	tb.Helper()
	ctx := context.Background()
	if _, err := p.backups(c).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "velero.io/v1", "kind": "Backup", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"includedNamespaces": w.namespaceList(), "includedResources": []any{"configmaps", "secrets", "deployments"}},
	}}, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	return p.waitPhase(tb, c, name, func(phase string) bool { return phase == "InProgress" || finalPhases[phase] }) == "InProgress"
}

// waitEnded waits until backup name has ended.
func (p peer) waitEnded(tb testing.TB, c *framework.Cluster, name string) {
	tb.Helper()
	p.waitPhase(tb, c, name, func(phase string) bool { return finalPhases[phase] })
}

// waitPhase waits until backup name's phase is one that done takes, and
// returns it.
func (p peer) waitPhase(tb testing.TB, c *framework.Cluster, name string, done func(string) bool) string {
	tb.Helper()
	backups := p.backups(c)
	phase := ""
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := backups.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		phase, _, _ = unstructured.NestedString(got.Object, "status", "phase")
		return done(phase), nil
	}); err != nil {
		tb.Fatalf("%s: backup %s: waiting, at phase %q: %v", p.name, name, phase, err)
	}
	return phase
}

// dataGone reports whether the storage holds nothing of backup name but
// its log (a cancelled backup keeps its log).
func (p peer) dataGone(name string) bool {
	entries, err := os.ReadDir(filepath.Join(p.store, "backups", name))
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	for _, e := range entries {
		if e.Name() != name+"-logs.gz" {
			return false
		}
	}
	return err == nil
}

// waitOver waits until backup name is over (its phase final, or the
// object gone when gone is set) and its data is gone.
func (p peer) waitOver(tb testing.TB, c *framework.Cluster, name string, gone bool, start time.Time) opRow {
	tb.Helper()
	backups := p.backups(c)
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := backups.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil || gone:
			return false, nil
		default:
			if phase, _, _ := unstructured.NestedString(got.Object, "status", "phase"); !finalPhases[phase] {
				return false, nil
			}
		}
		return p.dataGone(name), nil
	})
	if err != nil {
		tb.Fatalf("%s: backup %s is not over with its data gone: %v", p.name, name, err)
	}
	return opRow{took: time.Since(start)}
}

// deleteRequest asks for backup name's deletion as `velero backup delete`
// does, and returns the request's name.
func (p peer) deleteRequest(tb testing.TB, c *framework.Cluster, name string) string {
	tb.Helper()
	got, err := p.backups(c).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	req, err := c.Dynamic.Resource(framework.VeleroResource("deletebackuprequests")).Namespace(p.namespace).Create(context.Background(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "velero.io/v1", "kind": "DeleteBackupRequest",
		"metadata": map[string]any{"generateName": name + "-", "labels": map[string]any{"velero.io/backup-name": name, "velero.io/backup-uid": string(got.GetUID())}},
		"spec":     map[string]any{"backupName": name},
	}}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return req.GetName()
}

// refused reports the errors of a processed deletion request, if any,
// once it is processed (or the backup gone).
func (p peer) refused(tb testing.TB, c *framework.Cluster, request, backup string) []string {
	tb.Helper()
	requests := c.Dynamic.Resource(framework.VeleroResource("deletebackuprequests")).Namespace(p.namespace)
	backups := p.backups(c)
	var errs []string
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, err := backups.Get(ctx, backup, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return true, nil
		}
		got, err := requests.Get(ctx, request, metav1.GetOptions{})
		if err != nil {
			return apierrors.IsNotFound(err), nil
		}
		phase, _, _ := unstructured.NestedString(got.Object, "status", "phase")
		errs, _, _ = unstructured.NestedStringSlice(got.Object, "status", "errors")
		return phase == "Processed" && len(errs) > 0, nil
	}); err != nil {
		tb.Fatalf("%s: the deletion of %s neither happened nor was refused: %v", p.name, backup, err)
	}
	return errs
}

// cancelDelete measures, for the peer: the cancel of a running backup of
// the workload, the deletion of a running one, and the deletion of the
// completed backup "peers".
func (p peer) cancelDelete(tb testing.TB, c *framework.Cluster, w workload, canCancel bool) (cancel, deleteRunning, deleteCompleted opRow) {
	tb.Helper()
	ctx := context.Background()
	backups := p.backups(c)
	cancel = opRow{outcome: "n/a (no cancel)"}
	if canCancel {
		if p.startBackup(tb, c, w, "cancelled") {
			start := time.Now()
			if _, err := backups.Patch(ctx, "cancelled", types.MergePatchType, []byte(`{"spec":{"cancel":true}}`), metav1.PatchOptions{}); err != nil {
				tb.Fatal(err)
			}
			cancel = p.waitOver(tb, c, "cancelled", false, start)
		} else {
			cancel = opRow{outcome: "ended before the cancel"}
		}
	}

	if p.startBackup(tb, c, w, "deleted-running") {
		start := time.Now()
		req := p.deleteRequest(tb, c, "deleted-running")
		if errs := p.refused(tb, c, req, "deleted-running"); len(errs) > 0 {
			deleteRunning = opRow{outcome: fmt.Sprintf("refused (%q)", errs[0])}
			// Asked again once it has ended, as its user would.
			p.waitEnded(tb, c, "deleted-running")
			p.deleteRequest(tb, c, "deleted-running")
			p.waitOver(tb, c, "deleted-running", true, start)
		} else {
			deleteRunning = p.waitOver(tb, c, "deleted-running", true, start)
		}
	} else {
		deleteRunning = opRow{outcome: "ended before the request"}
	}

	start := time.Now()
	p.deleteRequest(tb, c, "peers")
	deleteCompleted = p.waitOver(tb, c, "peers", true, start)
	return cancel, deleteRunning, deleteCompleted
}
