package framework

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// netnsEnv marks a test process that runs in the network namespace
// RunInNetNS made for it.
const netnsEnv = "BACKSTOP_TEST_NETNS"

// Addresses inside the test network namespace (on lo; nothing routes out).
const (
	// backstopPodNet and backstopPodHost: the first cluster's Backstop
	// serves on 10.244.0.10, the next on .11, and so on (clusterSlot).
	backstopPodNet  = "10.244.0"
	backstopPodHost = 10
)

// RunInNetNS is a TestMain for tests that run a control plane: as root, it
// runs the test binary again inside a new network namespace of its own
// (`unshare --net`), with only a loopback interface carrying the addresses
// above, and returns its exit code; inside that namespace it runs the
// tests. Nothing the tests start can reach, or be reached from, outside the
// machine. It gets a mount namespace of its own too (private propagation):
// what the CSI driver mounts for a test (a volume published on a
// directory) is seen by the test's processes only, and goes with them, also
// when a test fails before unmounting. Not as root, the tests run where they are and RequireNetNS says
// why each one cannot.
func RunInNetNS(m *testing.M) int {
	if os.Getenv(netnsEnv) == "" {
		if os.Geteuid() != 0 {
			return m.Run()
		}
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintf(os.Stderr, "finding the test binary: %v\n", err)
			return 1
		}
		cmd := diesWithTest(exec.Command("unshare", append([]string{"--net", "--mount", "--", self}, os.Args[1:]...)...))
		cmd.Env = append(os.Environ(), netnsEnv+"=1")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				return ee.ExitCode()
			}
			fmt.Fprintf(os.Stderr, "unshare --net: %v\n", err)
			return 1
		}
		return 0
	}
	setup := [][]string{
		{"link", "set", "lo", "up"},
	}
	for slot := range clusterSlot(maxClusters) {
		setup = append(setup, []string{"addr", "add", slot.kubeIP() + "/32", "dev", "lo"},
			[]string{"addr", "add", slot.backstopPodIP() + "/32", "dev", "lo"})
	}
	for _, args := range setup {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "ip %v in the test network namespace: %v: %s\n", args, err, out)
			return 1
		}
	}
	return m.Run()
}

// RequireNetNS stops a test that needs the network namespace of
// RunInNetNS: a skip with the reason in the fast tier (make test-unit, not
// root), a failure otherwise (make test runs as root).
func RequireNetNS(t testing.TB) {
	t.Helper()
	if os.Getenv(netnsEnv) != "" {
		return
	}
	reason := "runs a control plane (etcd, kube-apiserver, kube-controller-manager) in a network namespace of its own: needs root"
	if testing.Short() {
		t.Skipf("%s; not in the fast tier (make test-unit), make test runs it", reason)
	}
	t.Fatalf("%s; run the tests as root (make test)", reason)
}
