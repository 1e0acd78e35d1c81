package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResolveMemory: a flag given wins, then GOGC and GOMEMLIMIT (left to
// the runtime), then the default GC percent and 90% of the cgroup's
// memory limit (v2 or v1; none when it says there is none).
func TestResolveMemory(t *testing.T) {
	cgroup := func(t *testing.T, file, content string) string {
		root := t.TempDir()
		if file != "" {
			path := filepath.Join(root, file)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	for _, tc := range []struct {
		name         string
		gcPercent    int
		memoryLimit  string
		env          map[string]string
		file, limit  string
		wantGC       int
		wantLimit    int64
		wantGCFrom   string
		wantLimitErr string
	}{
		{name: "defaults, no cgroup limit", file: "memory.max", limit: "max\n", wantGC: DefaultGCPercent, wantGCFrom: "default"},
		{name: "cgroup v2 limit", file: "memory.max", limit: "1073741824\n", wantGC: DefaultGCPercent, wantLimit: 966367641, wantGCFrom: "default"},
		{name: "cgroup v1 limit", file: "memory/memory.limit_in_bytes", limit: "536870912\n", wantGC: DefaultGCPercent, wantLimit: 483183820, wantGCFrom: "default"},
		{name: "cgroup v1 without a limit", file: "memory/memory.limit_in_bytes", limit: "9223372036854771712\n", wantGC: DefaultGCPercent, wantGCFrom: "default"},
		{name: "no cgroup files", wantGC: DefaultGCPercent, wantGCFrom: "default"},
		{name: "the environment's", env: map[string]string{"GOGC": "200", "GOMEMLIMIT": "1GiB"}, file: "memory.max", limit: "1073741824", wantGC: -1, wantGCFrom: "GOGC"},
		{name: "flags win", gcPercent: 80, memoryLimit: "512Mi", env: map[string]string{"GOGC": "200", "GOMEMLIMIT": "1GiB"}, wantGC: 80, wantLimit: 483183820, wantGCFrom: "--gc-percent"},
		{name: "a bad limit", memoryLimit: "lots", wantLimitErr: `--memory-limit "lots"`},
		{name: "a bad cgroup file", file: "memory.max", limit: "many", wantLimitErr: `the cgroup's memory limit "many"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := cgroup(t, tc.file, tc.limit)
			s, err := resolveMemory(tc.gcPercent, tc.memoryLimit, func(k string) string { return tc.env[k] }, root)
			if tc.wantLimitErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantLimitErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantLimitErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.gcPercent != tc.wantGC || s.gcFrom != tc.wantGCFrom || s.limit != tc.wantLimit {
				t.Errorf("gc %d from %q, limit %d from %q; want gc %d from %q, limit %d", s.gcPercent, s.gcFrom, s.limit, s.limitFrom, tc.wantGC, tc.wantGCFrom, tc.wantLimit)
			}
		})
	}
}
