package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"
)

// StorageEnv names the storage backend the integration tests start servers
// on: pebble (unset) or etcd3 (each server then gets an etcd of its own,
// started by the framework).
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
	t       testing.TB
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
	e := &Etcd{t: t, dir: t.TempDir()}
	bin := Binary(t, "etcd")
	var initial []string
	for i := range n {
		m := &EtcdMember{
			Name:       fmt.Sprintf("m%d", i),
			ClientURL:  fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
			peerURL:    fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
			dataDir:    filepath.Join(e.dir, fmt.Sprintf("m%d", i)),
			etcdBinary: bin,
		}
		initial = append(initial, m.Name+"="+m.peerURL)
		e.Members = append(e.Members, m)
	}
	for _, m := range e.Members {
		m.initial = strings.Join(initial, ",")
		m.start(t)
	}
	t.Cleanup(func() {
		for _, m := range e.Members {
			m.stop(syscall.SIGTERM)
		}
		if t.Failed() {
			e.dumpLogs()
		}
	})
	e.WaitHealthy(t, time.Minute)
	return e
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
	var urls []string
	for _, m := range e.Members {
		if m.cmd != nil {
			urls = append(urls, m.ClientURL)
		}
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: urls, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
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
		e.dumpLogs()
		t.Fatalf("etcd did not become healthy: %v (last: %v)", err, last)
	}
}

// Kill ends member i with SIGKILL.
func (e *Etcd) Kill(i int) { e.Members[i].stop(syscall.SIGKILL) }

func (m *EtcdMember) start(t testing.TB) {
	t.Helper()
	if err := os.MkdirAll(m.dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	log, err := os.OpenFile(m.dataDir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	m.log = log
	m.cmd = exec.Command(m.etcdBinary,
		"--name", m.Name,
		"--data-dir", m.dataDir,
		"--listen-client-urls", m.ClientURL, "--advertise-client-urls", m.ClientURL,
		"--listen-peer-urls", m.peerURL, "--initial-advertise-peer-urls", m.peerURL,
		"--initial-cluster", m.initial, "--initial-cluster-state", "new", "--initial-cluster-token", "backstop-test",
		// The test machines' disks are slow to fsync at times: no spurious
		// elections under load.
		"--heartbeat-interval", "100", "--election-timeout", "1000",
	)
	m.cmd.Stdout, m.cmd.Stderr = log, log
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("starting etcd %s: %v", m.Name, err)
	}
	m.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(m.cmd, m.exited)
}

func (m *EtcdMember) stop(sig syscall.Signal) {
	if m.cmd == nil {
		return
	}
	signalAndWait(m.cmd.Process, m.exited, sig, 30*time.Second)
	m.cmd = nil
	_ = m.log.Close()
}

func (e *Etcd) dumpLogs() {
	for _, m := range e.Members {
		data, err := os.ReadFile(m.dataDir + ".log")
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) > 10 {
			lines = lines[len(lines)-10:]
		}
		e.t.Logf("last lines of etcd %s:\n%s", m.Name, strings.Join(lines, "\n"))
	}
}
