package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestPods: the harness's node runs pods as a cluster does. A pod with an
// emptyDir, placed by kube-scheduler, runs on the node with an IP of its
// pod range and its service account's token; kubectl exec (stdin too) and
// logs reach it through kube-apiserver and kubelet; it reaches
// kube-apiserver at the kubernetes Service; its volume is on the node
// where kubelet put it; deleted, it leaves no container and no volume
// behind.
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

	t.Run("reaches kube-apiserver at the kubernetes Service", func(t *testing.T) {
		// No proxy: the Service's cluster IP is kube-apiserver's own
		// address, which the pod reaches through its node's bridge. Plain
		// HTTP to its TLS port is answered by its TLS server (busybox's
		// TLS speaks none of kube-apiserver's cipher suites).
		out, err := c.Kubectl(c.AdminKubeconfig, nil, "exec", "-n", ns, pod.Name, "--", "sh", "-c",
			`echo "service ${KUBERNETES_SERVICE_HOST}:${KUBERNETES_SERVICE_PORT}"; wget -O- "http://${KUBERNETES_SERVICE_HOST}:${KUBERNETES_SERVICE_PORT}/" 2>&1; true`)
		want := "service " + strings.TrimPrefix(c.URL(), "https://") + ":443\n"
		if err != nil || !strings.HasPrefix(out, want) || !strings.Contains(out, "400 Bad Request") {
			t.Errorf("plain HTTP from the pod to the kubernetes Service: %v\n%s\nwant %q, then kube-apiserver's 400", err, out, want)
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
		if podutils.IsPodReady(got) {
			return true, nil
		}
		last = fmt.Sprintf("phase %s, conditions %v, containers %v", got.Status.Phase, got.Status.Conditions, got.Status.ContainerStatuses)
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s Ready: %v (last: %s)", namespace, name, err, last)
	}
	return pod
}

// TestPodsOnAttachedVolumes: the CSI driver as a cluster runs it, on a
// node, registered with kubelet, and requiring attach. A pod's claim is
// attached to its node (a VolumeAttachment, csi-attacher, the driver's
// ControllerPublishVolume, without which the driver refuses to stage),
// then staged and published by kubelet; what the pod wrote is there for
// the next pod after the first is gone, and when the last is gone the
// volume is detached and nothing of it stays mounted on the node.
func TestPodsOnAttachedVolumes(t *testing.T) {
	t.Parallel()
	c := framework.StartClusterWith(t, framework.ClusterOptions{WithoutBackstop: true, Nodes: 1, CSI: true})
	node := c.Nodes[0]
	ctx := context.Background()
	const ns = "default"

	t.Run("the driver is registered with kubelet", func(t *testing.T) {
		poll(t, "CSINode "+node.Name+" listing driver "+framework.CSIDriver, time.Minute, func(ctx context.Context) (bool, error) {
			csiNode, err := c.Kube.StorageV1().CSINodes().Get(ctx, node.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			for _, d := range csiNode.Spec.Drivers {
				if d.Name == framework.CSIDriver && d.NodeID == node.Name {
					return true, nil
				}
			}
			return false, nil
		})
	})

	claim := c.CSI.CreateClaim(ns, "data", "16Mi", nil)
	mountedOnNode := func() []string {
		t.Helper()
		mounts, err := node.Mounts("/var/lib/kubelet")
		if err != nil {
			t.Fatal(err)
		}
		var ours []string
		for _, m := range mounts {
			if strings.Contains(m, claim.Spec.VolumeName) {
				ours = append(ours, m)
			}
		}
		return ours
	}

	t.Run("a pod's volume is attached, then mounted by kubelet", func(t *testing.T) {
		runPodOnClaim(t, c, ns, "writer", claim.Name, "echo written-by-writer > /data/f")
		attachment := volumeAttachment(t, c, claim.Spec.VolumeName)
		if attachment == nil || !attachment.Status.Attached || attachment.Spec.NodeName != node.Name || attachment.Spec.Attacher != framework.CSIDriver {
			t.Fatalf("VolumeAttachment of %s: %+v, want one attached to %s by %s", claim.Spec.VolumeName, attachment, node.Name, framework.CSIDriver)
		}
		pod, err := c.Kube.CoreV1().Pods(ns).Get(ctx, "writer", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The hostpath driver stages a filesystem volume without a
		// mount; kubelet publishes it into the pod's directory.
		want := filepath.Join("/var/lib/kubelet/pods", string(pod.UID), "volumes/kubernetes.io~csi", claim.Spec.VolumeName, "mount")
		if mounts := mountedOnNode(); !slices.Contains(mounts, want) {
			t.Errorf("mounts of %s on the node: %v, want %s", claim.Spec.VolumeName, mounts, want)
		}
	})

	t.Run("the next pod reads what the first wrote", func(t *testing.T) {
		deletePodAndWait(t, c, ns, "writer")
		runPodOnClaim(t, c, ns, "reader", claim.Name, "true")
		out, err := c.Kubectl(c.AdminKubeconfig, nil, "exec", "-n", ns, "reader", "--", "cat", "/data/f")
		if err != nil || out != "written-by-writer\n" {
			t.Errorf("the reader's /data/f: %q (%v)", out, err)
		}
	})

	t.Run("the last pod gone, the volume is detached and unmounted", func(t *testing.T) {
		deletePodAndWait(t, c, ns, "reader")
		var left string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			if a := volumeAttachment(t, c, claim.Spec.VolumeName); a != nil {
				left = fmt.Sprintf("VolumeAttachment %s (attached %t)", a.Name, a.Status.Attached)
				return false, nil
			}
			if mounts := mountedOnNode(); len(mounts) > 0 {
				left = fmt.Sprintf("mounts %v", mounts)
				return false, nil
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("%v; left: %s", err, left)
		}
	})
}

// runPodOnClaim runs a pod of the shell image with a claim at /data,
// running script and then sleeping, and waits until it is Ready.
func runPodOnClaim(t *testing.T, c *framework.Cluster, namespace, name, claim, script string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: new(int64(1)),
			Containers: []corev1.Container{{
				Name: "shell", Image: framework.ShellImage, ImagePullPolicy: corev1.PullNever,
				Command:      []string{"sh", "-c", script + " && exec sleep 3600"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		},
	}
	if _, err := c.Kube.CoreV1().Pods(namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
	waitPodReady(t, c, namespace, name)
}

// deletePodAndWait deletes a pod and waits until it is gone.
func deletePodAndWait(t *testing.T, c *framework.Cluster, namespace, name string) {
	t.Helper()
	if err := c.Kube.CoreV1().Pods(namespace).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting pod %s: %v", name, err)
	}
	poll(t, "pod "+namespace+"/"+name+" gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// volumeAttachment is the VolumeAttachment of a PersistentVolume, or nil.
func volumeAttachment(t *testing.T, c *framework.Cluster, pv string) *storagev1.VolumeAttachment {
	t.Helper()
	list, err := c.Kube.StorageV1().VolumeAttachments().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing VolumeAttachments: %v", err)
	}
	for i, a := range list.Items {
		if a.Spec.Source.PersistentVolumeName != nil && *a.Spec.Source.PersistentVolumeName == pv {
			return &list.Items[i]
		}
	}
	return nil
}
