//go:build bench && !linux

package storagebench

import "syscall"

// sysProcAttr: outside Linux there is no parent-death signal; Stop must run.
func sysProcAttr() *syscall.SysProcAttr { return nil }
