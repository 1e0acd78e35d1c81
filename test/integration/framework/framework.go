// Package framework starts the real backstop-apiserver binary for
// integration tests: on a free loopback port, with a temporary data
// directory, and hands tests a generated clientset, a dynamic client, the
// admin kubeconfig and a kubectl runner. Later engines' tests use it too.
//
// Binaries come from $BACKSTOP_BIN_DIR (make test builds them once into
// _output/bin); without it they are built into the test's cache on first use.
package framework

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
)

// Server is one running backstop-apiserver process.
type Server struct {
	t       testing.TB
	DataDir string
	Port    int // chosen by the server at its first start, kept after
	args    []string
	env     []string
	// storageArgs choose the storage backend (none: Pebble).
	storageArgs []string

	// KubeconfigPath is the admin kubeconfig (user in system:masters).
	KubeconfigPath string
	Config         *rest.Config
	Clientset      versioned.Interface
	Dynamic        dynamic.Interface

	cmd    *exec.Cmd
	exited chan struct{}
	log    *os.File

	engineOnce sync.Once
	engine     versioned.Interface

	// Etcd is the server's etcd when the tests run on etcd3 (StorageEnv):
	// the one the test binary's servers share, each under its own prefix.
	Etcd *Etcd
}

// EngineGroup is the group test servers accept as the server's engines
// (--engine-groups): tests that turned an engine off make its status
// writes through EngineClientset.
const EngineGroup = "backstop:test-engines"

// Options change how the server is started.
type Options struct {
	// Args are extra flags for backstop-apiserver.
	Args []string
	// DataDir reuses a data directory (default: a new temporary one).
	DataDir string
	// Env is added to the server's environment (failpoint.EnvVar, say).
	Env []string
}

// Start starts a server and stops it (SIGTERM) when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	dataDir := opts.DataDir
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	s := newServer(t, dataDir, opts)
	s.start()
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			s.dumpLog()
		}
	})
	return s
}

func newServer(t testing.TB, dataDir string, opts Options) *Server {
	// Port 0: the server listens on a port of its choosing and names it in
	// its kubeconfig, where waitReady reads it (no free-port race).
	s := &Server{t: t, DataDir: dataDir, args: opts.Args, env: opts.Env}
	if Storage() == "etcd3" && !slices.ContainsFunc(opts.Args, func(a string) bool { return strings.HasPrefix(a, "--storage-backend") }) {
		s.Etcd = sharedEtcd(t)
		s.storageArgs = []string{"--storage-backend=etcd3", "--etcd-servers=" + s.Etcd.Endpoints(), "--etcd-prefix=" + storagePrefix(dataDir)}
	}
	return s
}

// Shared is the server the tests of the binary that name the same key
// share, started with opts by the first of them and stopped by Main when
// the tests end (its start and its storage are paid once). A test on it
// does not run in parallel with another on it, never stops or restarts
// it, and names its objects so that no other test on it uses those names.
func Shared(t testing.TB, key string, opts Options) *Server {
	t.Helper()
	sharedMu.Lock()
	runs := mainRuns
	sharedMu.Unlock()
	serversMu.Lock()
	defer serversMu.Unlock()
	if !runs {
		t.Fatal("framework.Shared: the package's TestMain must run framework.Main, which stops the servers its tests share")
	}
	s := sharedServers[key]
	if s == nil {
		dir, err := os.MkdirTemp("", "backstop-test-shared-")
		if err != nil {
			t.Fatal(err)
		}
		s = newServer(t, dir, opts)
		// Kept before it starts, so that Main stops what a failed start
		// left; the tests after a failed start fail at once.
		sharedServers[key] = s
		s.start()
	}
	if s.Config == nil { // set once it answered ready
		t.Fatalf("the shared server %q did not start (in an earlier test)", key)
	}
	select {
	case <-s.exited:
		t.Fatalf("the shared server %q exited (its log: %s)", key, filepath.Join(s.DataDir, "server.log"))
	default:
	}
	// Its helpers report to the test using it now.
	s.t = t
	t.Cleanup(func() {
		if t.Failed() {
			s.dumpLog()
		}
	})
	return s
}

// storagePrefix is the etcd prefix of the servers on dataDir: one per
// directory, so that servers share one etcd without seeing each other's
// objects, and a server started again on its directory finds its own.
func storagePrefix(dataDir string) string {
	sum := sha256.Sum256([]byte(dataDir))
	return "/backstop-" + hex.EncodeToString(sum[:8])
}

// URL is the server's address.
func (s *Server) URL() string { return "https://127.0.0.1:" + strconv.Itoa(s.Port) }

func (s *Server) start() {
	t := s.t
	t.Helper()
	bin := Binary(t, "backstop-apiserver")
	logFile, err := os.OpenFile(filepath.Join(s.DataDir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatalf("opening the server log: %v", err)
	}
	s.log = logFile
	s.KubeconfigPath = filepath.Join(s.DataDir, "admin.kubeconfig")
	if s.Port == 0 {
		// A kubeconfig left by an earlier server on this directory names
		// its port: the new server writes its own.
		if err := os.Remove(s.KubeconfigPath); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	args := append([]string{
		"--data-dir", s.DataDir,
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(s.Port),
		"--engine-groups", EngineGroup,
	}, s.storageArgs...)
	args = append(args, s.args...)
	cmd := diesWithTest(exec.Command(bin, args...))
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	s.cmd = cmd
	s.exited = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(90 * time.Second); err != nil {
		s.dumpLog()
		t.Fatalf("server did not become ready: %v", err)
	}
}

// waitReady polls /readyz with the admin credentials until it answers ok.
func (s *Server) waitReady(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-s.exited:
			return false, fmt.Errorf("the server exited: %v", s.cmd.ProcessState)
		default:
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", s.KubeconfigPath)
		if err != nil {
			last = err
			return false, nil
		}
		if s.Port == 0 {
			// The port the server chose, from its kubeconfig; kept for
			// StartAgain.
			u, err := url.Parse(cfg.Host)
			if err != nil {
				return false, fmt.Errorf("the kubeconfig's server %q: %w", cfg.Host, err)
			}
			if s.Port, err = strconv.Atoi(u.Port()); err != nil {
				return false, fmt.Errorf("the kubeconfig's server %q: %w", cfg.Host, err)
			}
		}
		if cfg.Host != s.URL() {
			last = fmt.Errorf("kubeconfig names %s, want %s", cfg.Host, s.URL())
			return false, nil
		}
		// Tests issue many requests in a row: no client-side throttling.
		cfg.QPS, cfg.Burst = 1000, 1000
		cs, err := versioned.NewForConfig(cfg)
		if err != nil {
			return false, err
		}
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			last = fmt.Errorf("readyz: %w: %s", err, body)
			return false, nil
		}
		s.Config = cfg
		s.Clientset = cs
		s.Dynamic, err = dynamic.NewForConfig(cfg)
		return err == nil, err
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w (last: %v)", err, last)
	}
	return err
}

// PID is the server process's ID.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Stop ends the server with SIGTERM and waits for it.
func (s *Server) Stop() { s.stop(syscall.SIGTERM) }

// Kill ends the server with SIGKILL, as a crash would.
func (s *Server) Kill() { s.stop(syscall.SIGKILL) }

func (s *Server) stop(sig syscall.Signal) {
	if s.cmd == nil {
		return
	}
	signalAndWait(s.cmd.Process, s.exited, sig, 60*time.Second)
	s.cmd = nil
	_ = s.log.Close()
}

// Signal sends sig to the server (SIGSTOP and SIGCONT pause and wake it).
func (s *Server) Signal(sig syscall.Signal) error { return s.cmd.Process.Signal(sig) }

// WaitCrash waits until the server exits by itself (a failpoint killed
// it) and reports whether it did within timeout.
func (s *Server) WaitCrash(timeout time.Duration) bool {
	select {
	case <-s.exited:
		s.cmd = nil
		_ = s.log.Close()
		return true
	case <-time.After(timeout):
		return false
	}
}

// StartAgain starts a server that has exited on the same port and data
// directory, with env (instead of the first start's) added to its
// environment.
func (s *Server) StartAgain(env []string) {
	s.t.Helper()
	s.env = env
	s.start()
}

// Restart stops the server (SIGKILL when kill is set) and starts it again
// on the same port and data directory.
func (s *Server) Restart(kill bool) {
	s.t.Helper()
	if kill {
		s.Kill()
	} else {
		s.Stop()
	}
	s.start()
}

// RestartWith stops the server and starts it again on the same port and
// data directory with other arguments (engines turned on, for example).
func (s *Server) RestartWith(args []string) {
	s.t.Helper()
	s.Stop()
	s.args = args
	s.start()
}

func (s *Server) dumpLog() {
	data, err := os.ReadFile(filepath.Join(s.DataDir, "server.log"))
	if err != nil {
		return
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) > 25 {
		lines = lines[len(lines)-25:]
	}
	s.t.Logf("last lines of the server log:\n%s", strings.Join(lines, "\n"))
}

// Kubectl runs kubectl against the server with the admin kubeconfig and
// returns its stdout; stdin may be nil.
func (s *Server) Kubectl(stdin []byte, args ...string) (string, error) {
	return s.KubectlAs(s.KubeconfigPath, stdin, args...)
}

// KubectlAs runs kubectl with the given kubeconfig.
func (s *Server) KubectlAs(kubeconfig string, stdin []byte, args ...string) (string, error) {
	s.t.Helper()
	return kubectl(s.t, kubeconfig, nil, stdin, args...)
}

// kubectl runs kubectl with kubeconfig and returns its stdout; a failure
// carries its stderr. stdin may be nil.
func kubectl(t testing.TB, kubeconfig string, env []string, stdin []byte, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(Binary(t, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// EngineClientset is a clientset of a user in EngineGroup: its status
// writes are the server's engines' (the status rules still apply).
func (s *Server) EngineClientset() versioned.Interface {
	s.t.Helper()
	s.engineOnce.Do(func() {
		cfg, err := clientcmd.BuildConfigFromFlags("", s.IssueKubeconfig("test-engine", "system:masters", EngineGroup))
		if err != nil {
			s.t.Fatalf("engine kubeconfig: %v", err)
		}
		// As the admin clientset: tests and benchmarks are not throttled.
		cfg.QPS, cfg.Burst = 1000, 1000
		if s.engine, err = versioned.NewForConfig(cfg); err != nil {
			s.t.Fatalf("engine clientset: %v", err)
		}
	})
	if s.engine == nil {
		s.t.Fatal("no engine clientset (its creation failed earlier)")
	}
	return s.engine
}

// IssueKubeconfig writes a kubeconfig for user and groups (signed by the
// server's CA, through the `kubeconfig` subcommand) and returns its path.
func (s *Server) IssueKubeconfig(user string, groups ...string) string {
	s.t.Helper()
	args := []string{"kubeconfig", "--data-dir", s.DataDir, "--user", user, "--server", s.URL()}
	for _, g := range groups {
		args = append(args, "--group", g)
	}
	out, err := exec.Command(Binary(s.t, "backstop-apiserver"), args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			s.t.Fatalf("backstop-apiserver kubeconfig: %v: %s", err, ee.Stderr)
		}
		s.t.Fatalf("backstop-apiserver kubeconfig: %v", err)
	}
	path := filepath.Join(s.t.TempDir(), user+".kubeconfig")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		s.t.Fatal(err)
	}
	return path
}

func freePort(t testing.TB) int {
	t.Helper()
	port, err := pickPort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// pickPort is a loopback port free at the time of the call.
func pickPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var (
	buildMu  sync.Mutex
	binaries = map[string]string{}
)

// packages of the binaries tests may ask for.
var binaryPackages = map[string]string{
	"backstop-apiserver": "./cmd/backstop-apiserver",
	"kubectl":            "./hack/tools/kubectl",
}

// binaryScripts install binaries built from outside this module into
// _output/bin.
var binaryScripts = map[string]string{
	"velero":                               "hack/install-velero.sh",
	"velero-plugins/velero-plugin-for-aws": "hack/install-velero.sh",
	"versitygw":                            "hack/install-versitygw.sh",
	"kopia":                                "hack/install-kopia.sh",
	"helm":                                 "hack/install-helm.sh",
	"etcd":                                 "hack/install-etcd.sh",
	"kube-apiserver":                       "hack/install-kube.sh",
	"kube-controller-manager":              "hack/install-kube.sh",
	"kube-scheduler":                       "hack/install-kube.sh",
	"kubelet":                              "hack/install-kube.sh",
	"containerd":                           "hack/install-node.sh",
	"hostpathplugin":                       "hack/install-csi.sh",
	"snapshot-controller":                  "hack/install-csi.sh",
	"csi-snapshotter":                      "hack/install-csi.sh",
	"csi-provisioner":                      "hack/install-csi.sh",
}

// Binary returns the path of a binary: from $BACKSTOP_BIN_DIR when set,
// else built once per test process into a temporary directory.
func Binary(t testing.TB, name string) string {
	t.Helper()
	p, err := binaryPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// binaryPath is Binary without a test.
func binaryPath(name string) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := binaries[name]; ok {
		return p, nil
	}
	if dir := os.Getenv("BACKSTOP_BIN_DIR"); dir != "" {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("BACKSTOP_BIN_DIR is set but %s is missing: %w", p, err)
		}
		binaries[name] = p
		return p, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	if script, ok := binaryScripts[name]; ok {
		cmd := exec.Command("bash", script)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("installing %s: %w\n%s", name, err, b)
		}
		binaries[name] = filepath.Join(root, "_output", "bin", name)
		return binaries[name], nil
	}
	pkg, ok := binaryPackages[name]
	if !ok {
		return "", fmt.Errorf("no binary %q: set BACKSTOP_BIN_DIR to a directory holding it (make test does)", name)
	}
	out := filepath.Join(os.TempDir(), fmt.Sprintf("backstop-test-bin-%d", os.Getpid()), name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", name, err, b)
	}
	binaries[name] = out
	return out, nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}
