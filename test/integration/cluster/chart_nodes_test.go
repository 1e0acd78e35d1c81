package cluster

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubectl/pkg/util/podutils"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestChartOnNodes: the chart installed with helm as a cluster runs it,
// the server a pod of its Deployment on the harness's node, from its
// image (hack/build-image.sh), its database on a claim of the node's
// attach-requiring CSI driver: the pod is Ready by its probes, its process
// runs as the chart's security context says (a user without rights, no
// capabilities, no new privileges, seccomp, a read-only root),
// kube-apiserver routes Backstop's APIServices to it, and a namespace is
// backed up into a location on its data volume and restored after the
// namespace is gone.
func TestChartOnNodes(t *testing.T) {
	t.Parallel()
	c := framework.StartClusterWith(t, framework.ClusterOptions{WithoutBackstop: true, Nodes: 1, CSI: true, BackstopImage: true})
	ctx := context.Background()
	step := inOrder(t)
	const ns = "shop"

	step("install", func(t *testing.T) {
		out, err := c.Helm("install", framework.HelmRelease, framework.ChartDir(t), "--namespace", framework.BackstopNamespace, "--create-namespace",
			"--set", "image.repository="+framework.BackstopImageRepository, "--set", "image.tag="+framework.BackstopImageTag, "--set", "image.pullPolicy=Never",
			"--set", "persistence.storageClass="+framework.CSIStorageClass, "--set", "persistence.size=256Mi",
			"--set", "configuration.backupStorageLocation[0].name=primary",
			"--set", "configuration.backupStorageLocation[0].provider=filesystem",
			"--set", "configuration.backupStorageLocation[0].bucket=/var/lib/backstop/backups",
			"--set", "configuration.backupStorageLocation[0].default=true")
		if err != nil {
			t.Fatalf("helm install: %v\n%s", err, out)
		}
		c.WaitBackstopServing(nil)
		pods, err := c.Kube.CoreV1().Pods(framework.BackstopNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=backstop-apiserver"})
		if err != nil || len(pods.Items) != 1 {
			t.Fatalf("the server's pods: %v (%d, want 1)", err, len(pods.Items))
		}
		pod := pods.Items[0]
		if pod.Spec.NodeName != c.Nodes[0].Name || !podutils.IsPodReady(&pod) {
			t.Errorf("the server's pod %s on %q, ready %t", pod.Name, pod.Spec.NodeName, podutils.IsPodReady(&pod))
		}
		// The chart's security context, as the kernel applies it to the
		// server's process: its user, no capabilities, a read-only root.
		status, root := serverProcess(t, string(pod.UID))
		for _, want := range []string{"Uid:\t65532\t65532\t65532\t65532", "Gid:\t65532\t65532\t65532\t65532",
			"CapEff:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
			if !strings.Contains(status, want) {
				t.Errorf("the server's process status lacks %q:\n%s", want, status)
			}
		}
		if !slices.Contains(strings.Split(root, ","), "ro") {
			t.Errorf("the server's root is mounted %s, want ro", root)
		}
	})

	step("backup and restore", func(t *testing.T) {
		if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"},
			Data: map[string]string{"currency": "EUR"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "the location primary Available", time.Minute, func(ctx context.Context) (bool, error) {
			l, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Get(ctx, "primary", metav1.GetOptions{})
			return err == nil && l.Status.Phase == velerov1.BackupStorageLocationPhaseAvailable, nil
		})
		b := runBackup(t, c, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "shop-1", Namespace: adminNamespace},
			Spec: velerov1.BackupSpec{IncludedNamespaces: []string{ns}}})
		if b.Status.Phase != velerov1.BackupPhaseCompleted || b.Status.Progress == nil || b.Status.Progress.ItemsBackedUp == 0 {
			t.Fatalf("backup %s: %s, %+v", b.Name, b.Status.Phase, b.Status.Progress)
		}
		if err := c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "namespace "+ns+" gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
			_, err := c.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return err != nil, nil
		})
		r := runRestore(t, c, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "shop-1", Namespace: adminNamespace},
			Spec: velerov1.RestoreSpec{BackupName: b.Name}})
		if r.Status.Phase != velerov1.RestorePhaseCompleted {
			t.Fatalf("restore %s: %s (%s)", r.Name, r.Status.Phase, r.Status.FailureReason)
		}
		cm, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
		if err != nil || cm.Data["currency"] != "EUR" {
			t.Errorf("the restored ConfigMap: %v, %v", cm, err)
		}
	})
}

// serverProcess finds the server's process of the pod with UID uid (in
// the pod's cgroup) and returns its /proc status and the mount options of
// its root.
func serverProcess(t *testing.T, uid string) (status, rootOptions string) {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, comm := range procs {
		dir := filepath.Dir(comm)
		name, err := os.ReadFile(comm)
		if err != nil || strings.TrimSpace(string(name)) != "backstop-apiser" {
			continue
		}
		cgroup, err := os.ReadFile(filepath.Join(dir, "cgroup"))
		if err != nil || !strings.Contains(string(cgroup), "pod"+uid) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, "status"))
		if err != nil {
			t.Fatal(err)
		}
		mounts, err := os.ReadFile(filepath.Join(dir, "mountinfo"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(mounts), "\n") {
			if f := strings.Fields(line); len(f) > 5 && f[4] == "/" {
				rootOptions = f[5]
			}
		}
		return string(data), rootOptions
	}
	t.Fatalf("no process of the server in pod %s", uid)
	return "", ""
}
