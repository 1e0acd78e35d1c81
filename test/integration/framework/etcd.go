package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"
)

// StorageEnv names the storage backend the integration tests start servers
// on: pebble (unset) or etcd3 (the servers of a test binary then share one
// etcd, started by the framework on first need, each server under a prefix
// of its own; the package's TestMain runs framework.Main, which stops it).
const StorageEnv = "BACKSTOP_TEST_STORAGE"

// Storage is the backend servers are started on (StorageEnv).
func Storage() string {
	if s := os.Getenv(StorageEnv); s != "" {
		return s
	}
	return "pebble"
}

// Etcd is an etcd cluster of real processes on loopback ports.
type Etcd struct {
	dir     string
	Members []*EtcdMember
}

// EtcdMember is one etcd process.
type EtcdMember struct {
	Name       string
	ClientURL  string
	peerURL    string
	dataDir    string
	initial    string
	cmd        *exec.Cmd
	exited     chan struct{}
	log        *os.File
	etcdBinary string
}

// StartEtcd starts an etcd cluster of n members and stops it when the
// test ends.
func StartEtcd(t testing.TB, n int) *Etcd {
	t.Helper()
	e, err := newEtcd(t.TempDir(), n)
	if e != nil {
		t.Cleanup(func() {
			e.stop()
			if t.Failed() {
				e.dumpLogs(t.Logf)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// newEtcd starts an etcd cluster of n members under dir and waits until it
// is healthy; on an error, the members it started are running still (stop
// them).
func newEtcd(dir string, n int) (*Etcd, error) {
	bin, err := binaryPath("etcd")
	if err != nil {
		return nil, err
	}
	e := &Etcd{dir: dir}
	var initial []string
	for i := range n {
		client, err := pickPort()
		if err != nil {
			return e, err
		}
		peer, err := pickPort()
		if err != nil {
			return e, err
		}
		m := &EtcdMember{
			Name:       fmt.Sprintf("m%d", i),
			ClientURL:  fmt.Sprintf("http://127.0.0.1:%d", client),
			peerURL:    fmt.Sprintf("http://127.0.0.1:%d", peer),
			dataDir:    filepath.Join(e.dir, fmt.Sprintf("m%d", i)),
			etcdBinary: bin,
		}
		initial = append(initial, m.Name+"="+m.peerURL)
		e.Members = append(e.Members, m)
	}
	for _, m := range e.Members {
		m.initial = strings.Join(initial, ",")
		if err := m.startErr(); err != nil {
			return e, err
		}
	}
	if err := e.waitHealthy(time.Minute); err != nil {
		return e, err
	}
	return e, nil
}

func (e *Etcd) stop() {
	for _, m := range e.Members {
		m.stop(syscall.SIGTERM)
	}
}

// Endpoints is the client URLs of the members, comma-separated
// (--etcd-servers).
func (e *Etcd) Endpoints() string {
	var urls []string
	for _, m := range e.Members {
		urls = append(urls, m.ClientURL)
	}
	return strings.Join(urls, ",")
}

// WaitHealthy waits until a linearizable read through the running members
// succeeds (a quorum is up and has a leader).
func (e *Etcd) WaitHealthy(t testing.TB, timeout time.Duration) {
	t.Helper()
	if err := e.waitHealthy(timeout); err != nil {
		e.dumpLogs(t.Logf)
		t.Fatal(err)
	}
}

func (e *Etcd) waitHealthy(timeout time.Duration) error {
	var urls []string
	for _, m := range e.Members {
		if m.cmd != nil {
			urls = append(urls, m.ClientURL)
		}
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: urls, DialTimeout: 5 * time.Second})
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		get, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, last = client.Get(get, "health")
		return last == nil, nil
	}); err != nil {
		return fmt.Errorf("etcd did not become healthy: %w (last: %v)", err, last)
	}
	return nil
}

// Kill ends member i with SIGKILL.
func (e *Etcd) Kill(i int) { e.Members[i].stop(syscall.SIGKILL) }

func (m *EtcdMember) startErr() error {
	if err := os.MkdirAll(m.dataDir, 0o700); err != nil {
		return err
	}
	log, err := os.OpenFile(m.dataDir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	m.log = log
	m.cmd = diesWithTest(exec.Command(m.etcdBinary,
		"--name", m.Name,
		"--data-dir", m.dataDir,
		"--listen-client-urls", m.ClientURL, "--advertise-client-urls", m.ClientURL,
		"--listen-peer-urls", m.peerURL, "--initial-advertise-peer-urls", m.peerURL,
		"--initial-cluster", m.initial, "--initial-cluster-state", "new", "--initial-cluster-token", "backstop-test",
		// The test machines' disks are slow to fsync at times: no spurious
		// elections under load.
		"--heartbeat-interval", "100", "--election-timeout", "1000",
	))
	m.cmd.Stdout, m.cmd.Stderr = log, log
	if err := m.cmd.Start(); err != nil {
		m.cmd = nil
		_ = log.Close()
		return fmt.Errorf("starting etcd %s: %w", m.Name, err)
	}
	m.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(m.cmd, m.exited)
	return nil
}

func (m *EtcdMember) stop(sig syscall.Signal) {
	if m.cmd == nil {
		return
	}
	signalAndWait(m.cmd.Process, m.exited, sig, 30*time.Second)
	m.cmd = nil
	_ = m.log.Close()
}

func (e *Etcd) dumpLogs(logf func(string, ...any)) {
	for _, m := range e.Members {
		data, err := os.ReadFile(m.dataDir + ".log")
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) > 10 {
			lines = lines[len(lines)-10:]
		}
		logf("last lines of etcd %s:\n%s", m.Name, strings.Join(lines, "\n"))
	}
}

var (
	sharedMu sync.Mutex
	// mainRuns is set while framework.Main runs the tests.
	mainRuns bool
	shared   *Etcd
)

var (
	serversMu sync.Mutex
	// sharedServers are the servers tests share (Shared), by key.
	sharedServers = map[string]*Server{}
)

// Main is the TestMain of a package whose tests share servers (Shared) or
// whose servers may run on etcd3: it runs the tests, then stops the
// servers and the etcd they shared.
func Main(m *testing.M) int {
	sharedMu.Lock()
	mainRuns = true
	sharedMu.Unlock()
	code := m.Run()
	serversMu.Lock()
	for key, s := range sharedServers {
		s.Stop()
		_ = os.RemoveAll(s.DataDir)
		delete(sharedServers, key)
	}
	serversMu.Unlock()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.stop()
		_ = os.RemoveAll(shared.dir)
		shared = nil
	}
	return code
}

// sharedEtcd is the etcd the test binary's servers share, started on first
// need.
func sharedEtcd(t testing.TB) *Etcd {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		return shared
	}
	if !mainRuns {
		t.Fatalf("%s=etcd3: the package's TestMain must run framework.Main, which stops the etcd its servers share", StorageEnv)
	}
	dir, err := os.MkdirTemp("", "backstop-test-etcd-")
	if err != nil {
		t.Fatal(err)
	}
	e, err := newEtcd(dir, 1)
	if err != nil {
		if e != nil {
			e.dumpLogs(t.Logf)
			e.stop()
		}
		_ = os.RemoveAll(dir)
		t.Fatalf("the shared etcd: %v", err)
	}
	shared = e
	return e
}

// StorageIndependent marks a test whose subject the storage backend does
// not change (VM disks, object stores, an engine's own logic): on Pebble it
// runs, on any other backend it is skipped with the reason, so that the
// suite's pass on etcd3 (make test) runs only what the backend can change.
func StorageIndependent(t testing.TB, why string) {
	t.Helper()
	if Storage() != "pebble" {
		t.Skipf("skipping on %s: %s, which the storage backend does not change (it runs on pebble)", Storage(), why)
	}
}
