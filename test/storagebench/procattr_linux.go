//go:build bench && linux

package storagebench

import "syscall"

// sysProcAttr kills etcd if the benchmark process dies without stopping it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
