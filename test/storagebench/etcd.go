//go:build bench

package storagebench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	// EtcdBinEnv overrides the etcd binary the benchmarks start.
	EtcdBinEnv = "ETCD_BIN"
	// defaultEtcdBin is where hack/install-etcd.sh puts etcd, relative to
	// the repository root.
	defaultEtcdBin = "_output/bin/etcd"

	etcdStartAttempts = 3
	etcdStartTimeout  = 30 * time.Second
	etcdStopTimeout   = 15 * time.Second
	etcdPollInterval  = 20 * time.Millisecond
	// etcdTryTimeout bounds one readiness check: etcd accepts connections
	// before it serves requests, so a read may wait for leader election.
	etcdTryTimeout = 5 * time.Second
)

// EtcdBinary returns the etcd binary to run: $ETCD_BIN, or
// _output/bin/etcd under the repository root. It fails, saying how to
// build it, when the binary is missing.
func EtcdBinary() (string, error) {
	bin := os.Getenv(EtcdBinEnv)
	if bin == "" {
		root, err := repoRoot()
		if err != nil {
			return "", err
		}
		bin = filepath.Join(root, defaultEtcdBin)
	}
	st, err := os.Stat(bin)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("etcd binary %s not found: run hack/install-etcd.sh (or make bench) first, or set %s", bin, EtcdBinEnv)
	}
	if err != nil {
		return "", fmt.Errorf("checking the etcd binary: %w", err)
	}
	if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("etcd binary %s is not an executable file: run hack/install-etcd.sh (or make bench), or set %s", bin, EtcdBinEnv)
	}
	return bin, nil
}

// repoRoot is the closest directory holding go.mod, from the working
// directory up (go test runs in the package directory).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("finding the repository root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Etcd is a single-member etcd server process listening on loopback.
type Etcd struct {
	// ClientURL is the URL clients connect to (http://127.0.0.1:port).
	ClientURL string

	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has been waited for
	waitErr error         // the process's exit status, set before exited closes
	logPath string
}

// StartEtcd starts the etcd binary with its data (and log) in dataDir, on
// free loopback ports, and returns once a client read succeeds. Stop must be
// called to end it.
func StartEtcd(ctx context.Context, binary, dataDir string) (*Etcd, error) {
	var errs []error
	for attempt := 1; attempt <= etcdStartAttempts; attempt++ {
		e, err := startEtcdOnce(ctx, binary, filepath.Join(dataDir, fmt.Sprintf("attempt-%d", attempt)))
		if err == nil {
			return e, nil
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w", attempt, err))
		// A port picked free may have been taken meanwhile: retry only
		// when the process died on its own.
		if !errors.Is(err, errEtcdExited) || ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("starting etcd %s: %w", binary, errors.Join(errs...))
}

var errEtcdExited = errors.New("etcd exited before it was ready")

func startEtcdOnce(ctx context.Context, binary, dir string) (*Etcd, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the etcd directory: %w", err)
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	logPath := filepath.Join(dir, "etcd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating the etcd log: %w", err)
	}
	defer logFile.Close() // the child keeps its own descriptor

	// Defaults otherwise (fsync on, snapshot count, quota): what a
	// Kubernetes control plane runs, minus TLS.
	cmd := exec.Command(binary,
		"--name=bench",
		"--data-dir="+filepath.Join(dir, "data"),
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=bench="+peerURL,
		"--initial-cluster-state=new",
		"--log-level=warn",
	)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("running %s: %w", binary, err)
	}
	e := &Etcd{ClientURL: clientURL, cmd: cmd, exited: make(chan struct{}), logPath: logPath}
	go func() {
		e.waitErr = cmd.Wait()
		close(e.exited)
	}()
	if err := e.waitReady(ctx); err != nil {
		stopErr := e.Stop()
		return nil, errors.Join(err, stopErr)
	}
	return e, nil
}

// waitReady waits, polling until a deadline, for the client port to accept
// connections and then for a linearizable read to succeed (a leader is
// elected), failing early if the process exits. Dialing first keeps the
// gRPC client out of its reconnect backoff while etcd is still starting.
func (e *Etcd) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, etcdStartTimeout)
	defer cancel()
	tick := time.NewTicker(etcdPollInterval)
	defer tick.Stop()
	poll := func(what string, try func(context.Context) error) error {
		for {
			tryCtx, tryCancel := context.WithTimeout(ctx, etcdTryTimeout)
			err := try(tryCtx)
			tryCancel()
			if err == nil {
				return nil
			}
			select {
			case <-e.exited:
				return fmt.Errorf("%w (%v) while waiting for %s; log:\n%s", errEtcdExited, e.waitErr, what, e.logTail())
			case <-ctx.Done():
				return fmt.Errorf("etcd at %s: no %s after %s: %w; log:\n%s", e.ClientURL, what, etcdStartTimeout, err, e.logTail())
			case <-tick.C:
			}
		}
	}
	host := strings.TrimPrefix(e.ClientURL, "http://")
	var dialer net.Dialer
	err := poll("listening client port", func(ctx context.Context) error {
		conn, err := dialer.DialContext(ctx, "tcp", host)
		if err != nil {
			return err
		}
		return conn.Close()
	})
	if err != nil {
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.ClientURL}, DialTimeout: etcdStartTimeout, Context: ctx})
	if err != nil {
		return fmt.Errorf("creating a client for %s: %w", e.ClientURL, err)
	}
	defer cli.Close()
	return poll("successful read", func(ctx context.Context) error {
		_, err := cli.Get(ctx, "/storagebench/ready")
		return err
	})
}

// Stop sends SIGTERM and waits for the process to exit, killing it if it
// does not within a deadline.
func (e *Etcd) Stop() error {
	select {
	case <-e.exited:
		return nil
	default:
	}
	if err := e.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping etcd (pid %d): %w", e.cmd.Process.Pid, err)
	}
	select {
	case <-e.exited:
		return nil
	case <-time.After(etcdStopTimeout):
	}
	if err := e.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing etcd (pid %d): %w", e.cmd.Process.Pid, err)
	}
	<-e.exited
	return fmt.Errorf("etcd (pid %d) ignored SIGTERM for %s and was killed", e.cmd.Process.Pid, etcdStopTimeout)
}

// logTail is the end of the server's log, for error messages.
func (e *Etcd) logTail() string {
	const max = 4 << 10
	b, err := os.ReadFile(e.logPath)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", e.logPath, err)
	}
	if len(b) > max {
		b = b[len(b)-max:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return strings.TrimRight(string(b), "\n")
}

// freePorts returns n loopback TCP ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free loopback port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
