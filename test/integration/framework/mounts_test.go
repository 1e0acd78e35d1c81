package framework

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{
		"/tmp/TestA/001/target":      "/tmp/TestA/001/target",
		`/tmp/with\040space/target`:  "/tmp/with space/target",
		`/tmp/back\134slash`:         `/tmp/back\slash`,
		`/tmp/not\09an-escape`:       `/tmp/not\09an-escape`,
		`/tmp/ends-with-backslash\\`: `/tmp/ends-with-backslash\\`,
	} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestUnmountUnder: a bind mount left under a test's directory (as a
// crashed server leaves a claim published) is detached, and the
// directory can then be removed.
func TestUnmountUnder(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root (make test runs as root)")
	}
	dir, src := t.TempDir(), t.TempDir()
	target := filepath.Join(dir, "volumes", "uid with space", "target")
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(target, syscall.MNT_DETACH) })
	unmountUnder(t, dir)
	if err := os.RemoveAll(dir); err != nil {
		t.Errorf("removing the directory after unmountUnder: %v", err)
	}
}
