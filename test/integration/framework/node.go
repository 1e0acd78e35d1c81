package framework

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The images every node has (hack/install-node.sh builds them; no
// registry is reachable, so pods name them with imagePullPolicy Never or
// IfNotPresent).
const (
	// PauseImage is the pod sandbox: Kubernetes' own pause.c.
	PauseImage = "localhost/pause:harness"
	// ShellImage is a small shell: Debian's busybox-static.
	ShellImage = "localhost/busybox:harness"
)

// nodeImages are the image tarballs under _output/images a node imports.
var nodeImages = []string{"pause.tar", "busybox.tar"}

// BackstopImage is the server's image the nodes import with
// ClusterOptions.BackstopImage: the binary the tests run, packed by
// hack/build-image.sh.
const BackstopImage = BackstopImageRepository + ":" + BackstopImageTag

// BackstopImageRepository and BackstopImageTag are BackstopImage's parts,
// as the chart's image values name them.
const (
	BackstopImageRepository = "localhost/backstop-apiserver"
	BackstopImageTag        = "harness"
)

var backstopImageOnce struct {
	sync.Once
	path string
	err  error
}

// backstopImage packs the server's image once per test process and
// returns its tarball.
func backstopImage(t testing.TB) string {
	t.Helper()
	bin := Binary(t, "backstop-apiserver")
	backstopImageOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			backstopImageOnce.err = err
			return
		}
		// Beside the nodes' other images, replaced by each test process
		// (mkimage renames a complete tarball into place).
		out := filepath.Join(imagesDir(t), "backstop-apiserver-harness.tar")
		cmd := exec.Command("bash", filepath.Join(root, "hack", "build-image.sh"), bin, BackstopImage, out)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			backstopImageOnce.err = fmt.Errorf("hack/build-image.sh: %w\n%s", err, b)
			return
		}
		backstopImageOnce.path = out
	})
	if backstopImageOnce.err != nil {
		t.Fatal(backstopImageOnce.err)
	}
	return backstopImageOnce.path
}

//go:embed node-init.sh
var nodeInit string

// Node is a machine of a Cluster (ClusterOptions.Nodes): kubelet with
// containerd (runc) and the CNI bridge plugin, in a PID and mount
// namespace of its own made for it, so that what kubelet and containerd
// hard-wire (/run, /var/lib/kubelet, /var/lib/cni, /var/log, sysctls) is
// the node's own, and its pods' cgroups live under a cgroup root of its
// own. Its network is the test's: its IP is on lo there, its pods on a
// bridge of their own.
type Node struct {
	c *Cluster
	// Name is the Node's name; IP its InternalIP, where kubelet serves.
	Name, IP string
	// Dir holds the node's configuration and state; its logs are in the
	// cluster's logs directory.
	Dir string
	// PodCIDR is the range of the node's pod IPs, on its bridge.
	PodCIDR string
	// index is the node's place among the cluster's (nodeName).
	index      int
	bridge     string
	cgroupRoot string
	// logs holds the node's daemons' logs (<name>.log).
	logs string
	init *process
}

// nodeIP and podCIDR are the i-th node's of the cluster in a slot (its
// bridge is named after both too).
func (s clusterSlot) nodeIP(i int) string { return fmt.Sprintf("10.250.%d.%d", int(s), i+1) }
func (s clusterSlot) podCIDR(i int) string {
	return fmt.Sprintf("10.%d.%d.0/24", 200+int(s), i)
}

// startNodes starts n nodes and kube-scheduler, and waits until every
// node is Ready. The nodes import the image tarballs extra too.
func (c *Cluster) startNodes(n int, extra ...string) {
	c.startKubeScheduler()
	for i := range n {
		c.Nodes = append(c.Nodes, c.startNode(i, extra))
	}
	for _, node := range c.Nodes {
		node.waitReady()
	}
}

func (c *Cluster) startKubeScheduler() {
	kubeconfig := c.writeKubeconfig("kube-scheduler.kubeconfig", c.clientAuth("system:kube-scheduler"))
	c.start("kube-scheduler", Binary(c.t, "kube-scheduler"),
		"--kubeconfig="+kubeconfig, "--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", c.slot.schedulerPort()), "--leader-elect=false")
}

// startNode writes the node's configuration and starts its init
// (node-init.sh) in new PID and mount namespaces.
func (c *Cluster) startNode(i int, extraImages []string) *Node {
	t := c.t
	n := &Node{c: c, index: i, Name: nodeName(i), IP: c.slot.nodeIP(i), PodCIDR: c.slot.podCIDR(i),
		bridge: fmt.Sprintf("bs%dn%d", int(c.slot), i)}
	// Not under the test's directory, whose name carries the test's: the
	// paths of containerd's snapshots and kubelet's volumes stay short.
	dir, err := os.MkdirTemp("", "node")
	if err != nil {
		t.Fatal(err)
	}
	n.Dir = dir
	n.cgroupRoot = "/backstop-" + filepath.Base(dir)
	// The directory, the cgroups and the IP go once the node has stopped
	// (its init is one of c's processes).
	c.afterStop = append(c.afterStop, func() {
		n.removeCgroups()
		_ = os.RemoveAll(dir)
	})
	if out, err := exec.Command("ip", "addr", "add", n.IP+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("node %s: its IP on lo: %v: %s", n.Name, err, out)
	}
	c.afterStop = append(c.afterStop, func() { _ = exec.Command("ip", "addr", "del", n.IP+"/32", "dev", "lo").Run() })

	// containerd and the CNI plugins (hack/install-node.sh) beside
	// kubelet (hack/install-kube.sh).
	bin := filepath.Dir(Binary(t, "kubelet"))
	if containerd := Binary(t, "containerd"); filepath.Dir(containerd) != bin {
		t.Fatalf("containerd is at %s, kubelet in %s: a node wants them in one directory", containerd, bin)
	}
	images := ""
	for _, image := range nodeImages {
		images += filepath.Join(imagesDir(t), image) + "\n"
	}
	for _, image := range extraImages {
		images += image + "\n"
	}
	files := map[string]string{
		"bin-dir":          bin,
		"images":           images,
		"containerd.toml":  n.containerdConfig(bin),
		"cni/net.conflist": n.cniConfig(),
		"kubelet.yaml":     n.kubeletConfig(),
		"kubelet-flags":    fmt.Sprintf("--hostname-override=%s --node-ip=%s --v=2", n.Name, n.IP),
		"daemons":          n.daemons(),
		"node-init.sh":     nodeInit,
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c.writeKubeconfigFile(filepath.Join(dir, "node.kubeconfig"), c.clientAuth("system:node:"+n.Name, "system:nodes"))
	n.logs = c.path(filepath.Join("logs", n.Name))
	if err := os.MkdirAll(n.logs, 0o755); err != nil {
		t.Fatal(err)
	}
	n.init = c.startProc("node-init-"+n.Name, "bash", nil, syscall.CLONE_NEWNS|syscall.CLONE_NEWPID,
		filepath.Join(dir, "node-init.sh"), dir, n.cgroupRoot, n.logs)
	return n
}

// nodeName is the name of a cluster's i-th node.
func nodeName(i int) string { return fmt.Sprintf("node-%d", i) }

// daemons are the lines of the node's daemons file: what it runs besides
// containerd and kubelet (the CSI driver and its registration, on the
// node that runs them), started by node-init.sh after kubelet.
func (n *Node) daemons() string {
	var b strings.Builder
	if n.c.CSI == nil {
		return ""
	}
	for _, argv := range n.c.CSI.nodeDaemons(n.index) {
		b.WriteString("start")
		for _, arg := range argv {
			b.WriteString(" " + shellQuote(arg))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// shellQuote quotes s for bash: in single quotes, each ' as '\”.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// imagesDir is _output/images of this module, where
// hack/install-node.sh puts the node images.
func imagesDir(t testing.TB) string {
	if dir := os.Getenv("BACKSTOP_BIN_DIR"); dir != "" {
		return filepath.Join(filepath.Dir(dir), "images")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "_output", "images")
}

// containerdConfig is containerd's configuration (version 3): its CRI
// plugin with runc (cgroupfs), the local pause image, the node's CNI
// configuration; its root in the node dir, its state in the node's /run.
func (n *Node) containerdConfig(bin string) string {
	return fmt.Sprintf(`version = 3
root = %[1]q
state = "/run/containerd"
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins.'io.containerd.internal.v1.opt']
  path = %[2]q

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "@SNAPSHOTTER@"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[3]q

[plugins.'io.containerd.cri.v1.runtime']
  # Root here may lack CAP_SYS_RESOURCE: runc cannot lower a sandbox's
  # oom_score_adj (-998) and fails every sandbox ("can't get final child's
  # PID from pipe: EOF"). Clamped at containerd's own.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[4]q]
    conf_dir = %[5]q

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, filepath.Join(n.Dir, "containerd"), filepath.Join(n.Dir, "containerd-opt"), PauseImage,
		filepath.Join(bin, "cni"), filepath.Join(n.Dir, "cni"))
}

// cniConfig is the node's pod network: a bridge of its own (its gateway
// the first address of PodCIDR), addresses from host-local, no masquerade
// (nothing routes out of the test's network namespace).
func (n *Node) cniConfig() string {
	return fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "harness", "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}}]}
`, n.bridge, n.PodCIDR, filepath.Join(n.Dir, "cni-ipam"))
}

// kubeletConfig is kubelet's KubeletConfiguration: cgroupfs under the
// node's cgroup root (cgroup v1 allowed: these machines mount cgroups in
// hybrid mode), client certificates of the cluster CA and webhook
// authorization for its API, served on the node's IP; no image garbage
// collection or disk eviction (the images are imported, not pulled back).
func (n *Node) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[1]s
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
failSwapOn: false
protectKernelDefaults: true
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[2]q}
authorization: {mode: Webhook}
address: %[3]s
healthzBindAddress: %[3]s
readOnlyPort: 0
resolvConf: ""
volumePluginDir: %[4]q
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, imagefs.available: 1%%, nodefs.inodesFree: 1%%}
`, n.cgroupRoot, n.c.CAFile(), n.IP, filepath.Join(n.Dir, "volume-plugins"))
}

// waitReady waits until the Node is Ready.
func (n *Node) waitReady() {
	n.c.waitFor("node "+n.Name+" Ready", n.init, 2*time.Minute, func(ctx context.Context) error {
		node, err := n.c.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status != corev1.ConditionTrue {
					return fmt.Errorf("Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
				}
				// The node lifecycle controller lifts the not-ready taint.
				for _, taint := range node.Spec.Taints {
					if taint.Key == corev1.TaintNodeNotReady {
						return fmt.Errorf("taint %s", taint.Key)
					}
				}
				return nil
			}
		}
		return fmt.Errorf("no Ready condition")
	})
}

// Mounts are the mount points in the node's mount namespace (kubelet's,
// containerd's, the CSI driver's) under dir, the deepest first.
func (n *Node) Mounts(dir string) ([]string, error) {
	under, err := mountsUnder(fmt.Sprintf("/proc/%d/mountinfo", n.init.cmd.Process.Pid), dir)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	return under, nil
}

// Containers lists the node's running containers (containerd's tasks in
// kubelet's namespace), pause containers included.
func (n *Node) Containers() ([]string, error) {
	out, err := n.Exec(filepath.Join(filepath.Dir(Binary(n.c.t, "kubelet")), "ctr"),
		"--address", "/run/containerd/containerd.sock", "--namespace", "k8s.io", "tasks", "ls", "-q")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// Exec runs a command in the node's mount namespace (as a process of
// the test's PID namespace), and returns its standard output.
func (n *Node) Exec(name string, args ...string) (string, error) {
	cmd := exec.Command("nsenter", append([]string{"--mount=" + fmt.Sprintf("/proc/%d/ns/mnt", n.init.cmd.Process.Pid), "--", name}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s in node %s: %w: %s", name, strings.Join(args, " "), n.Name, err, stderr.String())
	}
	return string(out), nil
}

// dumpLogs shows the last lines of each of the node's daemons' logs.
func (n *Node) dumpLogs() {
	entries, err := os.ReadDir(n.logs)
	if err != nil {
		return
	}
	for _, e := range entries {
		n.c.dumpLogFile(n.Name+"/"+strings.TrimSuffix(e.Name(), ".log"), filepath.Join(n.logs, e.Name()), 8)
	}
}

// removeCgroups removes the node's cgroup root from every hierarchy, the
// deepest first (what kubelet and runc made under it).
func (n *Node) removeCgroups() {
	mounts, err := readMountinfo("/proc/self/mountinfo")
	if err != nil {
		return
	}
	for _, m := range mounts {
		if m.fsType != "cgroup" && m.fsType != "cgroup2" {
			continue
		}
		root := m.point + n.cgroupRoot
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !os.IsNotExist(err) {
				n.c.t.Logf("node %s: cgroup %s left: %v", n.Name, dirs[i], err)
			}
		}
	}
}
