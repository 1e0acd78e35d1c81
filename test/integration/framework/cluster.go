package framework

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	"github.com/backstop-io/backstop/pkg/standalone/pki"
)

// maxClusters is how many Clusters a test process runs at once (tests
// that start one run side by side with t.Parallel); one more waits for a
// slot.
const maxClusters = 8

// clusterSlot is what a Cluster has to itself in the test network
// namespace, which the clusters of one test process share: its ports
// (outside the ephemeral range, which free-port picks draw from) and the
// address its Backstop serves on, as its pod would.
type clusterSlot int

// clusterSlots are the free slots.
var clusterSlots = func() chan clusterSlot {
	free := make(chan clusterSlot, maxClusters)
	for i := range maxClusters {
		free <- clusterSlot(i)
	}
	return free
}()

func (s clusterSlot) etcdClientPort() int { return 2379 + 10*int(s) }
func (s clusterSlot) etcdPeerPort() int   { return 2380 + 10*int(s) }
func (s clusterSlot) controllerPort() int { return 10257 + int(s) }
func (s clusterSlot) schedulerPort() int  { return 10400 + int(s) }

// kubeIP is where the cluster's kube-apiserver serves, on port 443, and
// what it advertises: the first address of the cluster's service range,
// the `kubernetes` Service's cluster IP, so that pods reach it there
// without a proxy (RunInNetNS puts every slot's on lo; a pod's packets
// reach lo through its node's bridge).
func (s clusterSlot) kubeIP() string { return fmt.Sprintf("10.96.%d.1", int(s)) }

// serviceCIDR is the cluster's service IP range.
func (s clusterSlot) serviceCIDR() string { return fmt.Sprintf("10.96.%d.0/24", int(s)) }

// snapshotMetadataPort is where the CSI stack's external-snapshot-metadata
// sidecar serves.
func (s clusterSlot) snapshotMetadataPort() int { return 50051 + int(s) }

// backstopPodIP is where the harness runs this cluster's
// backstop-apiserver, as the pod of artifacts/deploy's Deployment would
// be: the address of the EndpointSlice kube-apiserver routes the
// APIServices to (RunInNetNS puts every slot's on lo).
func (s clusterSlot) backstopPodIP() string {
	return fmt.Sprintf("%s.%d", backstopPodNet, backstopPodHost+int(s))
}

// BackstopNamespace, BackstopServiceAccount and BackstopService are
// artifacts/deploy's.
const (
	BackstopNamespace      = "backstop-system"
	BackstopServiceAccount = "backstop-apiserver"
	BackstopService        = "backstop-apiserver"
)

// Cluster is a real control plane in the test's network namespace (see
// RunInNetNS): etcd, kube-apiserver (RBAC, front proxy, service account
// keys, aggregator routing to endpoints) and kube-controller-manager
// (namespace deletion, garbage collection, service accounts and their
// tokens, endpoint slices, clusterrole aggregation, the workload
// controllers (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job,
// CronJob), volume binding and protection; no scheduler or kubelet, so
// pods stay Pending, unless ClusterOptions.Nodes asks for nodes), with Backstop
// registered by the manifests of artifacts/deploy exactly as a user applies
// them and run as the pod of their Deployment would run: with its
// arguments and its ServiceAccount's token.
type Cluster struct {
	t   testing.TB
	Dir string
	// AdminKubeconfig is a cluster admin's (system:masters).
	AdminKubeconfig string
	Admin           *rest.Config
	Kube            kubernetes.Interface
	// Backstop is a clientset of Backstop's groups, through kube-apiserver,
	// as the cluster admin.
	Backstop versioned.Interface
	Dynamic  dynamic.Interface

	ca         *pki.CA
	frontProxy *pki.CA
	procs      []*process
	backstop   *process
	// kubeAPIServer runs with kubeAPIServerArgs (RestartKubeAPIServer).
	kubeAPIServer     *process
	kubeAPIServerArgs []string
	// BackstopArgs are the arguments backstop-apiserver runs with: the
	// Deployment's, with its data directory here, its address the slot's
	// pod IP and the ServiceAccount's kubeconfig.
	BackstopArgs []string
	// BackstopEnv are more environment variables of backstop-apiserver
	// (a crash point, say).
	BackstopEnv []string
	// backstopPort is the port backstop-apiserver serves on at the slot's
	// pod IP (the Deployment's container port).
	backstopPort int32
	// slot holds the cluster's ports and addresses while it runs.
	slot clusterSlot
	// CSI is the CSI stack (ClusterOptions.CSI), else nil.
	CSI *CSI
	// Nodes are the cluster's nodes (ClusterOptions.Nodes).
	Nodes []*Node
	// afterStop run, last first, once every process has stopped.
	afterStop []func()
}

// process is one control plane binary the harness runs.
type process struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
}

// StartCluster starts the control plane and Backstop, and stops them in
// reverse order when the test ends.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	return StartClusterWith(t, ClusterOptions{})
}

// ClusterOptions change what StartClusterWith starts.
type ClusterOptions struct {
	// WithoutBackstop: the control plane only (InstallBackstop later, a
	// peer such as Velero first).
	WithoutBackstop bool
	// CSI: the CSI stack too (hostpath driver, snapshot-controller,
	// csi-snapshotter, csi-provisioner), before Backstop; with Nodes, the
	// driver runs in the first node and requires attach (CSI.OnNode).
	CSI bool
	// BackstopImage: the nodes also import the server's image
	// (BackstopImage, hack/build-image.sh of the binary the tests run).
	BackstopImage bool
	// Nodes: this many nodes (kubelet, containerd) and kube-scheduler,
	// so that pods run; kube-controller-manager then also runs the node
	// lifecycle controller and publishes kube-root-ca.crt for the pods'
	// service account tokens.
	Nodes int
}

// StartClusterWith starts the control plane, and Backstop unless told
// not to, and stops them in reverse order when the test ends.
func StartClusterWith(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	RequireNetNS(t)
	c := &Cluster{t: t, Dir: t.TempDir(), slot: <-clusterSlots}
	// Cleanups run last-in first-out: the slot is free once every process
	// has stopped.
	t.Cleanup(func() { clusterSlots <- c.slot })
	t.Cleanup(c.stopAll)
	c.pki()
	c.startEtcd()
	c.startKubeAPIServer()
	c.startKubeControllerManager(opts.Nodes > 0)
	if opts.CSI {
		c.CSI = c.newCSI(opts.Nodes > 0)
	}
	if opts.Nodes > 0 {
		var extra []string
		if opts.BackstopImage {
			extra = append(extra, backstopImage(t))
		}
		c.startNodes(opts.Nodes, extra...)
	}
	if opts.CSI {
		c.startCSI()
	}
	if !opts.WithoutBackstop {
		c.InstallBackstop(c.DataMoverArgs()...)
	}
	return c
}

// DataMoverArgs are the flags that give Backstop's data mover the CSI
// driver's node service (none without the CSI stack), as a node's
// DaemonSet pod would mount its socket.
func (c *Cluster) DataMoverArgs() []string {
	if c.CSI == nil {
		return nil
	}
	return []string{"--data-mover-csi-endpoint=" + CSIDriver + "=unix://" + c.CSI.Socket}
}

func (c *Cluster) path(name string) string { return filepath.Join(c.Dir, name) }

// pki makes the cluster CA (serving and client certificates), the front
// proxy CA (kube-apiserver's identity towards aggregated servers) and the
// service account signing key.
func (c *Cluster) pki() {
	t := c.t
	var err error
	if c.ca, err = pki.New(c.path("kube-ca")).EnsureCA(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pki.New(c.path("kube-ca")).EnsureServing(c.ca,
		[]string{"127.0.0.1", c.slot.kubeIP(), "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}); err != nil {
		t.Fatal(err)
	}
	if c.frontProxy, err = pki.New(c.path("front-proxy-ca")).EnsureCA(); err != nil {
		t.Fatal(err)
	}
	c.clientCert(c.frontProxy, "front-proxy-client", "front-proxy-client")
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	c.write("sa.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	c.write("sa.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
	c.AdminKubeconfig = c.UserKubeconfig("cluster-admin", "system:masters")
	c.writeKubeconfig("kube-controller-manager.kubeconfig", c.clientAuth("system:kube-controller-manager"))
	// kube-apiserver's identity towards kubelets (exec, logs), as
	// kubeadm's apiserver-kubelet-client.
	c.clientCert(c.ca, "kubelet-client", "kube-apiserver-kubelet-client", "system:masters")
}

func (c *Cluster) write(name string, data []byte) string {
	c.t.Helper()
	if err := os.WriteFile(c.path(name), data, 0o600); err != nil {
		c.t.Fatal(err)
	}
	return c.path(name)
}

// clientCert writes a client certificate of ca for user and groups as
// <file>.crt and <file>.key.
func (c *Cluster) clientCert(ca *pki.CA, file, user string, groups ...string) (certFile, keyFile string) {
	c.t.Helper()
	certPEM, keyPEM, err := ca.ClientCert(user, groups)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.write(file+".crt", certPEM), c.write(file+".key", keyPEM)
}

// CAFile is the cluster CA's certificate, which kube-apiserver's serving
// certificate chains to: what clients outside the cluster trust it with.
func (c *Cluster) CAFile() string { return pki.New(c.path("kube-ca")).CAFile() }

// clientAuth is a client certificate of the cluster CA for user and
// groups, in the kubeconfig itself: a client config of a certificate
// file is watched for rotation by a goroutine of client-go's transport
// cache, which outlives the test's directory (and logs its loss every few
// seconds).
func (c *Cluster) clientAuth(user string, groups ...string) *clientcmdapi.AuthInfo {
	c.t.Helper()
	certPEM, keyPEM, err := c.ca.ClientCert(user, groups)
	if err != nil {
		c.t.Fatal(err)
	}
	return &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
}

// URL is kube-apiserver's address.
func (c *Cluster) URL() string {
	return "https://" + c.slot.kubeIP()
}

func (c *Cluster) writeKubeconfig(name string, auth *clientcmdapi.AuthInfo) string {
	c.t.Helper()
	return c.writeKubeconfigFile(c.path(name), auth)
}

// writeKubeconfigFile writes a kubeconfig of kube-apiserver and auth at
// path, and returns path.
func (c *Cluster) writeKubeconfigFile(path string, auth *clientcmdapi.AuthInfo) string {
	c.t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kube"] = &clientcmdapi.Cluster{Server: c.URL(), CertificateAuthority: pki.New(c.path("kube-ca")).CAFile()}
	cfg.AuthInfos["user"] = auth
	cfg.Contexts["kube"] = &clientcmdapi.Context{Cluster: "kube", AuthInfo: "user"}
	cfg.CurrentContext = "kube"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		c.t.Fatal(err)
	}
	return path
}

// UserKubeconfig writes a kubeconfig with a client certificate of the
// cluster CA for user and groups, and returns its path.
func (c *Cluster) UserKubeconfig(user string, groups ...string) string {
	c.t.Helper()
	return c.writeKubeconfig(strings.ReplaceAll(user, ":", "_")+".kubeconfig", c.clientAuth(user, groups...))
}

// TokenKubeconfig writes a kubeconfig carrying a token of the
// ServiceAccount namespace/name (TokenRequest), and returns its path.
func (c *Cluster) TokenKubeconfig(namespace, name string) string {
	c.t.Helper()
	return c.writeKubeconfig("sa-"+namespace+"-"+name+".kubeconfig", &clientcmdapi.AuthInfo{Token: c.token(namespace, name)})
}

// token is a day's token of a ServiceAccount (TokenRequest).
func (c *Cluster) token(namespace, name string) string {
	c.t.Helper()
	expiry := int64(24 * 3600)
	tr, err := c.Kube.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("a token of ServiceAccount %s/%s: %v", namespace, name, err)
	}
	return tr.Status.Token
}

// start runs a binary with its output in <dir>/logs/<name>.log.
func (c *Cluster) start(name, bin string, args ...string) *process {
	c.t.Helper()
	return c.startEnv(name, bin, nil, args...)
}

// startEnv is start with more environment variables.
func (c *Cluster) startEnv(name, bin string, env []string, args ...string) *process {
	c.t.Helper()
	return c.startProc(name, bin, env, 0, args...)
}

// startProc is startEnv in new namespaces (cloneflags: CLONE_NEWNS and
// so on; 0 for none).
func (c *Cluster) startProc(name, bin string, env []string, cloneflags uintptr, args ...string) *process {
	c.t.Helper()
	if err := os.MkdirAll(c.path("logs"), 0o700); err != nil {
		c.t.Fatal(err)
	}
	logPath := c.path(filepath.Join("logs", name+".log"))
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := diesWithTest(exec.Command(bin, args...))
	cmd.SysProcAttr.Cloneflags = cloneflags
	cmd.Dir = c.Dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("starting %s: %v", name, err)
	}
	p := &process{name: name, cmd: cmd, exited: make(chan struct{}), log: logPath}
	go func() {
		_ = cmd.Wait()
		_ = log.Close()
		close(p.exited)
	}()
	c.procs = append(c.procs, p)
	return p
}

// stop ends p (sig, then SIGKILL after a while) and waits for it.
func (p *process) stop(sig syscall.Signal) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// stopAll stops every process in reverse order (kube-apiserver's shutdown
// hangs if etcd goes first), showing the logs of a failed test.
func (c *Cluster) stopAll() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop(syscall.SIGTERM)
	}
	if c.t.Failed() {
		for _, n := range c.Nodes {
			n.dumpLogs()
		}
	}
	for i := len(c.afterStop) - 1; i >= 0; i-- {
		c.afterStop[i]()
	}
	unmountUnder(c.t, c.Dir)
	if c.t.Failed() {
		// Each log once (a restarted process appends to its log), kept
		// short so that the test's own messages above stay within what a
		// CI excerpt shows: Backstop's longest.
		dumped := map[string]bool{}
		for _, p := range c.procs {
			if dumped[p.log] {
				continue
			}
			dumped[p.log] = true
			c.dumpLog(p)
		}
	}
}

func (c *Cluster) dumpLog(p *process) {
	keep := 8
	if p.name == "backstop-apiserver" {
		keep = 25
	}
	c.dumpLogFile(p.name, p.log, keep)
}

// dumpLogFile shows the last keep lines of the log of name at path.
func (c *Cluster) dumpLogFile(name, path string, keep int) {
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > keep {
		lines = lines[len(lines)-keep:]
	}
	c.t.Logf("last lines of %s (all of it in %s):\n%s", name, path, strings.Join(lines, "\n"))
}

// waitFor polls cond until it holds, failing the test after timeout or
// when p exits.
func (c *Cluster) waitFor(what string, p *process, timeout time.Duration, cond func(context.Context) error) {
	c.t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if p != nil {
			select {
			case <-p.exited:
				return false, fmt.Errorf("%s exited: %v", p.name, p.cmd.ProcessState)
			default:
			}
		}
		last = cond(ctx)
		return last == nil, nil
	})
	if err != nil {
		if p != nil {
			c.dumpLog(p)
		}
		c.t.Fatalf("waiting for %s: %v (last: %v)", what, err, last)
	}
}

func (c *Cluster) startEtcd() {
	etcdClientPort, etcdPeerPort := c.slot.etcdClientPort(), c.slot.etcdPeerPort()
	p := c.start("etcd", Binary(c.t, "etcd"),
		"--data-dir", c.path("etcd"),
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdClientPort),
		"--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdClientPort),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeerPort),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeerPort),
		"--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", etcdPeerPort),
		"--log-level", "warn")
	c.waitFor("etcd", p, time.Minute, func(ctx context.Context) error {
		return exec.CommandContext(ctx, "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d", etcdClientPort)).Run()
	})
}

func (c *Cluster) startKubeAPIServer() {
	kubeCA := pki.New(c.path("kube-ca"))
	frontProxyCA := pki.New(c.path("front-proxy-ca"))
	c.kubeAPIServerArgs = []string{
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", c.slot.etcdClientPort()),
		"--bind-address=" + c.slot.kubeIP(), "--advertise-address=" + c.slot.kubeIP(), "--secure-port=443",
		"--tls-cert-file=" + filepath.Join(kubeCA.Path, "serving.crt"), "--tls-private-key-file=" + filepath.Join(kubeCA.Path, "serving.key"),
		"--client-ca-file=" + kubeCA.CAFile(),
		"--service-cluster-ip-range=" + c.slot.serviceCIDR(),
		"--service-account-issuer=https://kubernetes.default.svc", "--service-account-key-file=" + c.path("sa.pub"),
		"--service-account-signing-key-file=" + c.path("sa.key"),
		// Kubelets are authorized as nodes, and reached at their
		// InternalIP with a client certificate (exec, logs).
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--kubelet-client-certificate=" + c.path("kubelet-client.crt"), "--kubelet-client-key=" + c.path("kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		// Aggregated servers are reached at their endpoints (there is no
		// kube-proxy to route a Service's cluster IP).
		"--enable-aggregator-routing=true",
		"--requestheader-client-ca-file=" + frontProxyCA.CAFile(),
		"--proxy-client-cert-file=" + c.path("front-proxy-client.crt"), "--proxy-client-key-file=" + c.path("front-proxy-client.key"),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-"}
	c.kubeAPIServer = c.start("kube-apiserver", Binary(c.t, "kube-apiserver"), c.kubeAPIServerArgs...)

	var err error
	if c.Admin, err = clientcmd.BuildConfigFromFlags("", c.AdminKubeconfig); err != nil {
		c.t.Fatal(err)
	}
	c.Admin.QPS, c.Admin.Burst = 1000, 1000
	if c.Kube, err = kubernetes.NewForConfig(c.Admin); err != nil {
		c.t.Fatal(err)
	}
	c.waitKubeAPIServerReady()
	if c.Backstop, err = versioned.NewForConfig(c.Admin); err != nil {
		c.t.Fatal(err)
	}
	if c.Dynamic, err = dynamic.NewForConfig(c.Admin); err != nil {
		c.t.Fatal(err)
	}
}

func (c *Cluster) waitKubeAPIServerReady() {
	c.t.Helper()
	c.waitFor("kube-apiserver /readyz", c.kubeAPIServer, 2*time.Minute, func(ctx context.Context) error {
		_, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
}

// RestartKubeAPIServer kills kube-apiserver (SIGKILL), starts it again
// with the same arguments and waits until it is ready.
func (c *Cluster) RestartKubeAPIServer() {
	c.t.Helper()
	c.kubeAPIServer.stop(syscall.SIGKILL)
	c.kubeAPIServer = c.start("kube-apiserver", Binary(c.t, "kube-apiserver"), c.kubeAPIServerArgs...)
	c.waitKubeAPIServerReady()
}

// BackstopPID is the process ID of backstop-apiserver.
func (c *Cluster) BackstopPID() int { return c.backstop.cmd.Process.Pid }

// BackstopDirect is the cluster admin's client config of
// backstop-apiserver itself, not through kube-apiserver: for what the
// aggregator does not proxy, such as /debug/pprof. It trusts the CA the
// server published in its APIService, for the name kube-apiserver's
// aggregator connects to (the Service's).
func (c *Cluster) BackstopDirect() *rest.Config {
	c.t.Helper()
	obj, err := c.Dynamic.Resource(apiServices).Get(context.Background(), apiServiceNames[0], metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	bundle, _, _ := unstructured.NestedString(obj.Object, "spec", "caBundle")
	ca, err := base64.StdEncoding.DecodeString(bundle)
	if err != nil || len(ca) == 0 {
		c.t.Fatalf("APIService %s: no caBundle (%v)", apiServiceNames[0], err)
	}
	config := rest.CopyConfig(c.Admin)
	config.Host = fmt.Sprintf("https://%s:%d", c.slot.backstopPodIP(), c.backstopPort)
	config.TLSClientConfig.CAFile = ""
	config.TLSClientConfig.CAData = ca
	config.TLSClientConfig.ServerName = BackstopService + "." + BackstopNamespace + ".svc"
	return config
}

// BackstopRunning reports whether backstop-apiserver is running (it has
// not exited, by a panic or otherwise, since it was last started).
func (c *Cluster) BackstopRunning() bool {
	select {
	case <-c.backstop.exited:
		return false
	default:
		return true
	}
}

func (c *Cluster) startKubeControllerManager(nodes bool) {
	kubeconfig := c.path("kube-controller-manager.kubeconfig")
	controllers := "namespace-controller,garbage-collector-controller,serviceaccount-controller,serviceaccount-token-controller,endpointslice-controller,clusterrole-aggregation-controller,deployment-controller,replicaset-controller,job-controller,persistentvolumeclaim-protection-controller,persistentvolume-protection-controller,statefulset-controller,daemonset-controller,cronjob-controller,persistentvolume-binder-controller"
	if nodes {
		// Nodes' taints follow their conditions; pods' service account
		// token volumes carry the cluster CA (kube-root-ca.crt); their
		// volumes are attached to their nodes (VolumeAttachments).
		controllers += ",node-lifecycle-controller,root-ca-certificate-publisher-controller,persistentvolume-attach-detach-controller"
	}
	p := c.start("kube-controller-manager", Binary(c.t, "kube-controller-manager"),
		"--kubeconfig="+kubeconfig, "--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", c.slot.controllerPort()), "--leader-elect=false",
		"--controllers="+controllers,
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+c.path("sa.key"), "--root-ca-file="+pki.New(c.path("kube-ca")).CAFile(),
		"--service-cluster-ip-range="+c.slot.serviceCIDR())
	// Service accounts exist once its controllers run.
	c.waitFor("the default ServiceAccount (kube-controller-manager)", p, 2*time.Minute, func(ctx context.Context) error {
		_, err := c.Kube.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// Mapper maps kinds to resources with kube-apiserver's discovery as it is
// now (CRDs added later need a new Mapper).
func (c *Cluster) Mapper() meta.RESTMapper {
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Kube.Discovery()))
}

// Kubectl runs kubectl against kube-apiserver with kubeconfig.
func (c *Cluster) Kubectl(kubeconfig string, stdin []byte, args ...string) (string, error) {
	c.t.Helper()
	return kubectl(c.t, kubeconfig, nil, stdin, args...)
}

// KubectlEnv is Kubectl with more environment variables (a parallel test
// may not set the process's).
func (c *Cluster) KubectlEnv(env []string, kubeconfig string, stdin []byte, args ...string) (string, error) {
	c.t.Helper()
	return kubectl(c.t, kubeconfig, env, stdin, args...)
}

// deployDir is artifacts/deploy of this module.
func deployDir(t testing.TB) string { return ArtifactsDir(t, "deploy") }

// ArtifactsDir is artifacts/<name> of this module (deploy, monitoring).
func ArtifactsDir(t testing.TB, name string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "artifacts", name)
}

// InstallBackstop applies artifacts/deploy as a user would, gives the
// Service the endpoint a running pod would give it, and starts
// backstop-apiserver as that pod: with the Deployment's arguments (and
// extra ones) and the ServiceAccount's token. It waits for the
// APIServices to be Available.
func (c *Cluster) InstallBackstop(extra ...string) {
	t := c.t
	dir := deployDir(t)
	if out, err := c.Kubectl(c.AdminKubeconfig, nil, "apply", "-f", dir); err != nil {
		t.Fatalf("applying artifacts/deploy: %v\n%s", err, out)
	}
	c.RunDeployment(readDeployment(t, filepath.Join(dir, "40-deployment.yaml")), extra...)
}

// HelmRelease is the release name InstallBackstopChart installs the chart
// as.
const HelmRelease = "backstop"

// Helm runs the helm CLI (hack/install-helm.sh) as the cluster admin.
func (c *Cluster) Helm(args ...string) (string, error) {
	c.t.Helper()
	cmd := exec.Command(Binary(c.t, "helm"), append([]string{"--kubeconfig", c.AdminKubeconfig}, args...)...)
	// helm's caches and configuration stay in the test's directory.
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+c.path("helm/cache"), "HELM_CONFIG_HOME="+c.path("helm/config"),
		"HELM_DATA_HOME="+c.path("helm/data"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ChartDir is charts/backstop of this module.
func ChartDir(t testing.TB) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "charts", "backstop")
}

// InstallBackstopChart installs the chart with helm as a user would
// (`helm install backstop charts/backstop --namespace backstop-system
// --create-namespace`, then helmArgs: --set, --values), and starts
// backstop-apiserver as the pod of the Deployment (or DaemonSet) the
// chart made.
func (c *Cluster) InstallBackstopChart(helmArgs []string, extra ...string) {
	t := c.t
	args := append([]string{"install", HelmRelease, ChartDir(t), "--namespace", BackstopNamespace, "--create-namespace"}, helmArgs...)
	if out, err := c.Helm(args...); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	c.RunDeployment(c.backstopWorkload(), extra...)
}

// UpgradeBackstopChart runs helm upgrade with helmArgs (--set,
// --values) and replaces backstop-apiserver as a rollout replaces the pod:
// stopped, and started again as the pod of the Deployment (or DaemonSet)
// as it is now.
func (c *Cluster) UpgradeBackstopChart(helmArgs []string, extra ...string) {
	t := c.t
	args := append([]string{"upgrade", HelmRelease, ChartDir(t), "--namespace", BackstopNamespace}, helmArgs...)
	if out, err := c.Helm(args...); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	c.StopBackstop(false)
	c.RunDeployment(c.backstopWorkload(), extra...)
}

// BackstopDeployment is the server's Deployment as the cluster has it.
func (c *Cluster) BackstopDeployment() *appsv1.Deployment {
	c.t.Helper()
	d, err := c.Kube.AppsV1().Deployments(BackstopNamespace).Get(context.Background(), BackstopService, metav1.GetOptions{})
	if err != nil {
		c.t.Fatalf("the Deployment %s/%s: %v", BackstopNamespace, BackstopService, err)
	}
	return d
}

// backstopWorkload is the chart's Deployment, or its DaemonSet (as
// BackstopDaemonSet gives it) when it made one instead.
func (c *Cluster) backstopWorkload() *appsv1.Deployment {
	c.t.Helper()
	ds, err := c.Kube.AppsV1().DaemonSets(BackstopNamespace).Get(context.Background(), BackstopService, metav1.GetOptions{})
	switch {
	case err == nil:
		return podOf(ds)
	case apierrors.IsNotFound(err):
		return c.BackstopDeployment()
	default:
		c.t.Fatalf("the DaemonSet %s/%s: %v", BackstopNamespace, BackstopService, err)
		return nil
	}
}

// BackstopDaemonSet reads the chart's DaemonSet (vmHost.perNode) from the
// cluster, as a Deployment of its pod template, which RunDeployment runs
// as the pod of the harness' node.
func (c *Cluster) BackstopDaemonSet() *appsv1.Deployment {
	c.t.Helper()
	ds, err := c.Kube.AppsV1().DaemonSets(BackstopNamespace).Get(context.Background(), BackstopService, metav1.GetOptions{})
	if err != nil {
		c.t.Fatalf("the DaemonSet %s/%s: %v", BackstopNamespace, BackstopService, err)
	}
	return podOf(ds)
}

// podOf is a DaemonSet as a Deployment of its pod template.
func podOf(ds *appsv1.DaemonSet) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: ds.ObjectMeta, Spec: appsv1.DeploymentSpec{Selector: ds.Spec.Selector, Template: ds.Spec.Template}}
}

// EtcdURL is the client URL of the cluster's etcd (kube-apiserver's).
func (c *Cluster) EtcdURL() string {
	return fmt.Sprintf("http://127.0.0.1:%d", c.slot.etcdClientPort())
}

// RunDeployment gives the Service the endpoint a running pod of d would
// give it, and starts backstop-apiserver as that pod: with d's arguments
// (and extra ones) and its ServiceAccount's token. It waits for the
// APIServices to be Available.
func (c *Cluster) RunDeployment(d *appsv1.Deployment, extra ...string) {
	t := c.t
	// No kubelet runs the Deployment's pod: its endpoint is made here, on
	// the address the harness runs the server on, with the container port.
	args, port := deploymentArgs(t, d)
	c.backstopPort = port
	// The slice's port carries the name of the Service's (a named port
	// routes only to endpoints of that name).
	svc, err := c.Kube.CoreV1().Services(BackstopNamespace).Get(context.Background(), BackstopService, metav1.GetOptions{})
	if err != nil || len(svc.Spec.Ports) != 1 {
		t.Fatalf("the Service %s/%s: %v (%d ports, want 1)", BackstopNamespace, BackstopService, err, len(svc.Spec.Ports))
	}
	slice := fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: backstop-apiserver-harness
  namespace: %s
  labels: {kubernetes.io/service-name: %s}
addressType: IPv4
endpoints: [{addresses: [%s], conditions: {ready: true}}]
ports: [{name: %q, port: %d, protocol: TCP}]
`, BackstopNamespace, BackstopService, c.slot.backstopPodIP(), svc.Spec.Ports[0].Name, port)
	if out, err := c.Kubectl(c.AdminKubeconfig, []byte(slice), "apply", "-f", "-"); err != nil {
		t.Fatalf("creating the EndpointSlice: %v\n%s", err, out)
	}
	account := d.Spec.Template.Spec.ServiceAccountName
	c.waitFor("the ServiceAccount "+account, nil, time.Minute, func(ctx context.Context) error {
		_, err := c.Kube.CoreV1().ServiceAccounts(BackstopNamespace).Get(ctx, account, metav1.GetOptions{})
		return err
	})
	saKubeconfig := c.TokenKubeconfig(BackstopNamespace, account)
	// The pod's volume is a directory here; its address, the slot's; its
	// ConfigMaps' and Secrets' volumes, directories of their data as the
	// kubelet writes them, at the paths the arguments name.
	// One pass over each argument, the longest mount path first: a
	// directory put in is not rewritten again (the test's directories are
	// under /tmp, which the pod mounts too).
	mounts := c.podVolumes(d)
	paths := slices.SortedFunc(maps.Keys(mounts), func(a, b string) int { return len(b) - len(a) })
	var pairs []string
	for _, p := range paths {
		pairs = append(pairs, p, mounts[p])
	}
	toHere := strings.NewReplacer(pairs...)
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--data-dir="):
			args[i] = "--data-dir=" + c.BackstopDataDir()
		case strings.HasPrefix(a, "--bind-address="):
			args[i] = "--bind-address=" + c.slot.backstopPodIP()
		default:
			args[i] = toHere.Replace(a)
		}
	}
	c.BackstopArgs = append(append(args,
		"--kubeconfig="+saKubeconfig, "--authentication-kubeconfig="+saKubeconfig, "--authorization-kubeconfig="+saKubeconfig), extra...)
	c.StartBackstop()
}

// podVolumes writes the data of the ConfigMaps and Secrets d's
// container mounts into directories of the test's, each anew (an emptyDir
// an empty one), and returns them by mount path.
func (c *Cluster) podVolumes(d *appsv1.Deployment) map[string]string {
	t := c.t
	// A volume's files, as the kubelet writes them: a key each.
	sources := map[string]func() (map[string][]byte, error){}
	for _, v := range d.Spec.Template.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			name := v.ConfigMap.Name
			sources[v.Name] = func() (map[string][]byte, error) {
				cm, err := c.Kube.CoreV1().ConfigMaps(d.Namespace).Get(context.Background(), name, metav1.GetOptions{})
				if err != nil {
					return nil, fmt.Errorf("the ConfigMap %s/%s the pod mounts: %w", d.Namespace, name, err)
				}
				files := map[string][]byte{}
				for key, value := range cm.Data {
					files[key] = []byte(value)
				}
				return files, nil
			}
		case v.EmptyDir != nil:
			// A directory of its own, empty, as the kubelet makes it.
			sources[v.Name] = func() (map[string][]byte, error) { return nil, nil }
		case v.Secret != nil:
			name := v.Secret.SecretName
			sources[v.Name] = func() (map[string][]byte, error) {
				secret, err := c.Kube.CoreV1().Secrets(d.Namespace).Get(context.Background(), name, metav1.GetOptions{})
				if err != nil {
					return nil, fmt.Errorf("the Secret %s/%s the pod mounts: %w", d.Namespace, name, err)
				}
				return secret.Data, nil
			}
		}
	}
	dirs := map[string]string{}
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		read, ok := sources[m.Name]
		if !ok {
			continue
		}
		files, err := read()
		if err != nil {
			t.Fatal(err)
		}
		dir := c.path(filepath.Join("volumes", m.Name))
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for key, value := range files {
			if err := os.WriteFile(filepath.Join(dir, key), value, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		dirs[m.MountPath] = dir
	}
	return dirs
}

// OpenToTenantRestores lets Backstop write tenants' restores in namespace,
// as a cluster admin does (artifacts/deploy's 10-rbac.yaml): a RoleBinding
// of backstop:restore-as-tenant to its ServiceAccount there.
func (c *Cluster) OpenToTenantRestores(namespace string) {
	c.t.Helper()
	_, err := c.Kube.RbacV1().RoleBindings(namespace).Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "backstop-restore-as-tenant", Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "backstop:restore-as-tenant"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: BackstopServiceAccount, Namespace: BackstopNamespace}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		c.t.Fatalf("opening namespace %s to tenants' restores: %v", namespace, err)
	}
}

// BackstopDataDir is the data directory backstop-apiserver runs with (its
// pod's volume, here a directory).
func (c *Cluster) BackstopDataDir() string { return c.path("backstop-data") }

// StartBackstop starts backstop-apiserver with BackstopArgs and waits until
// kube-apiserver reports its APIServices Available and serves its groups.
func (c *Cluster) StartBackstop() {
	c.t.Helper()
	c.backstop = c.startEnv("backstop-apiserver", Binary(c.t, "backstop-apiserver"), c.BackstopEnv, c.BackstopArgs...)
	c.WaitBackstopServing(c.backstop)
}

// WaitBackstopServing waits until kube-apiserver reports Backstop's
// APIServices Available and serves its groups, failing the test if p (the
// server's process, or nil when a pod runs it) exits first.
func (c *Cluster) WaitBackstopServing(p *process) {
	c.t.Helper()
	c.waitFor("Backstop's APIServices Available", p, 3*time.Minute, func(ctx context.Context) error {
		for _, name := range apiServiceNames {
			if cond := c.APIServiceAvailable(ctx, name); cond.Status != "True" {
				return fmt.Errorf("APIService %s: Available=%s %s: %s", name, cond.Status, cond.Reason, cond.Message)
			}
		}
		// Available can be the last process's, not yet found gone: the
		// groups answer through kube-apiserver.
		ours := map[schema.GroupVersion]bool{}
		for _, name := range apiServiceNames {
			version, group, _ := strings.Cut(name, ".")
			gv := group + "/" + version
			if _, err := c.Backstop.Discovery().ServerResourcesForGroupVersion(gv); err != nil {
				return fmt.Errorf("discovery of %s: %w", gv, err)
			}
			ours[schema.GroupVersion{Group: group, Version: version}] = true
		}
		// And in kube-apiserver's aggregated discovery, what kubectl and
		// the velero CLI read: kube-apiserver refreshes it on its own, and
		// after a restart it can still show a group's resources as failed
		// ("no matches for velero.io/v1") once the group answers.
		_, _, err := c.Backstop.Discovery().ServerGroupsAndResources()
		var failed *discovery.ErrGroupDiscoveryFailed
		switch {
		case errors.As(err, &failed):
			for gv, why := range failed.Groups {
				if ours[gv] {
					return fmt.Errorf("aggregated discovery of %s: %w", gv, why)
				}
			}
		case err != nil:
			return fmt.Errorf("aggregated discovery: %w", err)
		}
		return nil
	})
}

// StopBackstop stops backstop-apiserver (SIGKILL when kill is set).
func (c *Cluster) StopBackstop(kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	c.backstop.stop(sig)
}

// apiServiceNames are the APIServices of artifacts/deploy (the framework
// cannot import pkg/apiserver: packages it imports test through it).
var apiServiceNames = []string{"v1.velero.io", "v2alpha1.velero.io", "v1alpha1.oadp.openshift.io", "v1alpha1.backup.kubevirt.io", "v1.console.backstop.io"}

// APIServiceCondition is the Available condition of an APIService.
type APIServiceCondition struct {
	Status, Reason, Message string
	// CABundle reports whether the APIService carries a caBundle, and
	// InsecureSkipTLSVerify whether it skips verification.
	CABundle, InsecureSkipTLSVerify bool
}

var apiServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// APIServiceAvailable reads the Available condition of APIService name.
func (c *Cluster) APIServiceAvailable(ctx context.Context, name string) APIServiceCondition {
	obj, err := c.Dynamic.Resource(apiServices).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return APIServiceCondition{Status: "Unknown", Message: err.Error()}
	}
	var out APIServiceCondition
	spec, _ := obj.Object["spec"].(map[string]any)
	bundle, _ := spec["caBundle"].(string)
	out.CABundle = bundle != ""
	out.InsecureSkipTLSVerify, _ = spec["insecureSkipTLSVerify"].(bool)
	status, _ := obj.Object["status"].(map[string]any)
	conditions, _ := status["conditions"].([]any)
	for _, raw := range conditions {
		cond, _ := raw.(map[string]any)
		if cond["type"] == "Available" {
			out.Status, _ = cond["status"].(string)
			out.Reason, _ = cond["reason"].(string)
			out.Message, _ = cond["message"].(string)
		}
	}
	return out
}

// readDeployment reads a Deployment's manifest.
func readDeployment(t testing.TB, file string) *appsv1.Deployment {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(&d); err != nil {
		t.Fatalf("decoding %s: %v", file, err)
	}
	return &d
}

// deploymentArgs reads the container arguments and port of a Deployment
// of backstop-apiserver.
func deploymentArgs(t testing.TB, d *appsv1.Deployment) ([]string, int32) {
	t.Helper()
	file := "the Deployment " + d.Name
	containers := d.Spec.Template.Spec.Containers
	if len(containers) != 1 || len(containers[0].Ports) != 1 {
		t.Fatalf("%s: want one container with one port", file)
	}
	// $(VAR) references to the container's environment are expanded as
	// the kubelet would: literal values, and the pod's node (the
	// harness's host).
	var refs []string
	for _, e := range containers[0].Env {
		value := e.Value
		if f := e.ValueFrom; f != nil && f.FieldRef != nil {
			if f.FieldRef.FieldPath != "spec.nodeName" {
				t.Fatalf("%s: env %s: the harness knows only spec.nodeName", file, e.Name)
			}
			value = HarnessNode
		}
		refs = append(refs, "$("+e.Name+")", value)
	}
	args := append([]string(nil), containers[0].Args...)
	for i := range args {
		args[i] = strings.NewReplacer(refs...).Replace(args[i])
	}
	return args, containers[0].Ports[0].ContainerPort
}

// HarnessNode is the node name the harness gives the Deployment's pod.
const HarnessNode = "harness-node"
