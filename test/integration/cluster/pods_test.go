package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestPods: the harness's node runs pods as a cluster does. A pod with an
// emptyDir, placed by kube-scheduler, runs on the node with an IP of its
// pod range and its service account's token; kubectl exec (stdin too) and
// logs reach it through kube-apiserver and kubelet; its volume is on the
// node where kubelet put it; deleted, it leaves no container and no
// volume behind.
func TestPods(t *testing.T) {
	t.Parallel()
	c := framework.StartClusterWith(t, framework.ClusterOptions{WithoutBackstop: true, Nodes: 1})
	node := c.Nodes[0]
	ctx := context.Background()
	const ns = "default"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ns},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: new(int64(1)),
			Containers: []corev1.Container{{
				Name: "shell", Image: framework.ShellImage, ImagePullPolicy: corev1.PullNever,
				Command:      []string{"sh", "-c", "echo started; echo hello > /data/f; exec sleep 3600"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	created, err := c.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the pod: %v", err)
	}

	t.Run("runs where the scheduler put it", func(t *testing.T) {
		running := waitPodReady(t, c, ns, pod.Name)
		if running.Spec.NodeName != node.Name {
			t.Errorf("scheduled to %q, want %q", running.Spec.NodeName, node.Name)
		}
		_, podNet, _ := net.ParseCIDR(node.PodCIDR)
		if ip := net.ParseIP(running.Status.PodIP); ip == nil || !podNet.Contains(ip) {
			t.Errorf("pod IP %q, want one of %s", running.Status.PodIP, node.PodCIDR)
		}
	})

	t.Run("exec and logs through kube-apiserver", func(t *testing.T) {
		out, err := c.Kubectl(c.AdminKubeconfig, []byte("from stdin\n"), "exec", "-i", "-n", ns, pod.Name, "--",
			"sh", "-c", "cat > /data/in; cat /data/f /data/in; ls /var/run/secrets/kubernetes.io/serviceaccount")
		if err != nil {
			t.Fatalf("kubectl exec: %v\n%s", err, out)
		}
		for _, want := range []string{"hello\nfrom stdin\n", "ca.crt", "token"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl exec printed %q, want %q in it", out, want)
			}
		}
		if out, err := c.Kubectl(c.AdminKubeconfig, nil, "logs", "-n", ns, pod.Name); err != nil || out != "started\n" {
			t.Errorf("kubectl logs: %q (%v), want %q", out, err, "started\n")
		}
	})

	volume := filepath.Join(node.Dir, "kubelet", "pods", string(created.UID), "volumes", "kubernetes.io~empty-dir", "data")
	t.Run("the emptyDir is where kubelet put it", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(volume, "in"))
		if err != nil || string(data) != "from stdin\n" {
			t.Errorf("%s/in on the node: %q (%v), want what exec wrote", volume, data, err)
		}
	})

	t.Run("deleted, it leaves nothing behind", func(t *testing.T) {
		if err := c.Kube.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting the pod: %v", err)
		}
		var left string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := c.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				left = fmt.Sprintf("the pod (%v)", err)
				return false, nil
			}
			containers, err := node.Containers()
			if err != nil {
				return false, err
			}
			if len(containers) > 0 {
				left = fmt.Sprintf("containers %v", containers)
				return false, nil
			}
			if _, err := os.Stat(volume); !os.IsNotExist(err) {
				left = fmt.Sprintf("the volume %s (%v)", volume, err)
				return false, nil
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("after the pod's deletion: %v; left: %s", err, left)
		}
	})
}

// waitPodReady waits until a pod is Ready, and returns it.
func waitPodReady(t *testing.T, c *framework.Cluster, namespace, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := c.Kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = got
		for _, cond := range got.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		last = fmt.Sprintf("phase %s, conditions %v, containers %v", got.Status.Phase, got.Status.Conditions, got.Status.ContainerStatuses)
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s Ready: %v (last: %s)", namespace, name, err, last)
	}
	return pod
}
