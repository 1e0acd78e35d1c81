package server

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
)

// DefaultGCPercent is --gc-percent's default: the heap may grow by half
// its live size between collections (Go's default is 100): an API server
// that is idle most of the time and runs a backup now and then holds less
// memory for a few more collections (docs/benchmarks.md).
const DefaultGCPercent = 50

// memoryLimitShare is the part of the container's memory limit the Go
// heap is kept within (the rest: stacks, the runtime's own, buffers
// outside the heap).
const memoryLimitShare = 0.9

// memorySettings are the garbage collector's settings the server runs
// with, and where each came from (for the log).
type memorySettings struct {
	// gcPercent < 0: leave the runtime's (GOGC in the environment).
	gcPercent int
	// limit 0: leave the runtime's (GOMEMLIMIT, or none).
	limit     int64
	gcFrom    string
	limitFrom string
}

// resolveMemory decides the collector's settings: a flag given wins; else
// GOGC and GOMEMLIMIT in the environment, which the runtime has read; else
// --gc-percent's default and 90% of the container's memory limit (its
// cgroup's, read under cgroupRoot), if it has one.
// gcPercent 0 and memoryLimit "" are flags not given.
func resolveMemory(gcPercent int, memoryLimit string, getenv func(string) string, cgroupRoot string) (memorySettings, error) {
	s := memorySettings{gcPercent: -1}
	switch {
	case gcPercent > 0:
		s.gcPercent, s.gcFrom = gcPercent, "--gc-percent"
	case getenv("GOGC") != "":
		s.gcFrom = "GOGC"
	default:
		s.gcPercent, s.gcFrom = DefaultGCPercent, "default"
	}
	switch {
	case memoryLimit != "":
		limit, err := parseMemoryLimit(memoryLimit)
		if err != nil {
			return s, err
		}
		s.limit, s.limitFrom = int64(float64(limit)*memoryLimitShare), "--memory-limit"
	case getenv("GOMEMLIMIT") != "":
		s.limitFrom = "GOMEMLIMIT"
	default:
		limit, err := cgroupMemoryLimit(cgroupRoot)
		if err != nil {
			return s, err
		}
		if limit > 0 {
			s.limit, s.limitFrom = int64(float64(limit)*memoryLimitShare), "the container's memory limit"
		}
	}
	return s, nil
}

// parseMemoryLimit reads --memory-limit, in bytes.
func parseMemoryLimit(memoryLimit string) (int64, error) {
	q, err := resource.ParseQuantity(memoryLimit)
	if err != nil || q.Sign() <= 0 {
		return 0, fmt.Errorf("--memory-limit %q: want a positive quantity such as 512Mi", memoryLimit)
	}
	return q.Value(), nil
}

// restoreScratchSize is --restore-scratch-size in bytes (0: not given).
func (o *Options) restoreScratchSize() (int64, error) {
	if o.RestoreScratchSize == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(o.RestoreScratchSize)
	if err != nil || q.Sign() <= 0 {
		return 0, fmt.Errorf("--restore-scratch-size %q: want a positive quantity such as 20Gi", o.RestoreScratchSize)
	}
	return q.Value(), nil
}

// apply sets what s decides in the runtime.
func (s memorySettings) apply() {
	if s.gcPercent >= 0 {
		debug.SetGCPercent(s.gcPercent)
	}
	if s.limit > 0 {
		debug.SetMemoryLimit(s.limit)
	}
	klog.InfoS("Garbage collector", "gcPercent", s.gcPercent, "gcPercentFrom", s.gcFrom, "memoryLimitBytes", s.limit, "memoryLimitFrom", s.limitFrom)
}

// cgroupMemoryLimit reads the memory limit of the process's cgroup: v2's
// memory.max, or v1's memory.limit_in_bytes, under root (/sys/fs/cgroup in
// a container); 0 when there is none.
func cgroupMemoryLimit(root string) (int64, error) {
	for _, file := range []string{"memory.max", filepath.Join("memory", "memory.limit_in_bytes")} {
		data, err := os.ReadFile(filepath.Join(root, file))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("reading the cgroup's memory limit: %w", err)
		}
		text := strings.TrimSpace(string(data))
		if text == "max" {
			return 0, nil
		}
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("the cgroup's memory limit %q: %w", text, err)
		}
		// cgroup v1 says "no limit" with the largest page-aligned value.
		if n <= 0 || n >= math.MaxInt64/2 {
			return 0, nil
		}
		return n, nil
	}
	return 0, nil
}
