package framework

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// diesWithTest makes a process the test starts get SIGKILL when the test
// process goes (killed before its cleanups ran, say), so that nothing it
// started outlives it: servers, control planes, the test binary run again
// in its network namespace.
func diesWithTest(cmd *exec.Cmd) *exec.Cmd {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// signalAndWait sends sig to a started process and waits until it exited
// (exited closes), killing it after grace.
func signalAndWait(p *os.Process, exited <-chan struct{}, sig syscall.Signal, grace time.Duration) {
	_ = p.Signal(sig)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = p.Kill()
		<-exited
	}
}

// ProcStatus reads a field (kB) of /proc/<pid>/status, such as VmRSS or
// VmHWM (peak RSS).
func ProcStatus(t testing.TB, pid int, field string) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	kb, ok := statusKB(data, field)
	if !ok {
		t.Fatalf("no %s in /proc/%d/status", field, pid)
	}
	return kb
}

// statusKB reads a field (kB) of a /proc/<pid>/status file.
func statusKB(data []byte, field string) (int64, bool) {
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb, err == nil
		}
	}
	return 0, false
}

// ResetPeakRSS makes the process's peak RSS (VmHWM) its current RSS.
func ResetPeakRSS(t testing.TB, pid int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatalf("resetting the peak RSS: %v", err)
	}
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times (100 on
// every Linux architecture Go runs on here).
const clockTicks = 100

// Tree lists a process and its descendants (a server and the plugins it
// runs), from /proc.
func Tree(t testing.TB, pid int) []int {
	t.Helper()
	pids, err := tree(pid)
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

func tree(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if fields, ok := statFields(p); ok && len(fields) > 1 {
			if ppid, err := strconv.Atoi(fields[1]); err == nil {
				children[ppid] = append(children[ppid], p)
			}
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out, nil
}

// statFields are the fields of /proc/<pid>/stat after the command name:
// [0] is the state, [1] the parent, [11] utime, [12] stime.
func statFields(pid int) ([]string, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(string(data[i+1:])), true
}

// TreeCPU is the CPU time (user and system) a process and its living
// descendants have used.
func TreeCPU(t testing.TB, pid int) time.Duration {
	t.Helper()
	var ticks int64
	for _, p := range Tree(t, pid) {
		fields, ok := statFields(p)
		if !ok || len(fields) < 13 {
			continue // gone meanwhile
		}
		u, err1 := strconv.ParseInt(fields[11], 10, 64)
		s, err2 := strconv.ParseInt(fields[12], 10, 64)
		if err1 == nil && err2 == nil {
			ticks += u + s
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// TreePeakRSS sums the peak RSS (VmHWM, kB) of a process and its
// descendants: an upper bound of what they held at once.
func TreePeakRSS(t testing.TB, pid int) int64 { return TreeStatus(t, pid, "VmHWM") }

// TreeStatus sums a field (kB) of /proc/<pid>/status over a process and
// its living descendants: RssAnon, say, their private memory now.
func TreeStatus(t testing.TB, pid int, field string) int64 {
	t.Helper()
	kb, err := ReadTreeStatus(pid, field)
	if err != nil {
		t.Fatal(err)
	}
	return kb
}

// ReadTreeStatus is TreeStatus for a goroutine other than the test's
// (which must not call t.Fatal).
func ReadTreeStatus(pid int, field string) (int64, error) {
	pids, err := tree(pid)
	if err != nil {
		return 0, err
	}
	var kb int64
	for _, p := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		if err != nil {
			continue // gone meanwhile
		}
		if n, ok := statusKB(data, field); ok {
			kb += n
		}
	}
	return kb, nil
}

// ResetTreePeakRSS resets the peak RSS of a process and its descendants.
func ResetTreePeakRSS(t testing.TB, pid int) {
	t.Helper()
	for _, p := range Tree(t, pid) {
		_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p), []byte("5"), 0)
	}
}
