package rootdir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/backstop-io/backstop/pkg/rootdir/rootdirtest"
)

// FuzzNames: whatever names a request carries, a path Dir.Join makes of
// them is under the root, and a removal never touches a file outside it;
// every name admission lets through (a DNS-1123 subdomain: spec.pvcName,
// spec.source.name, the PVC annotation) is a name here.
func FuzzNames(f *testing.F) {
	for _, s := range append(append([]string{"vm-backups", "a.b"}, rootdirtest.Hostile...), rootdirtest.Lookalikes...) {
		f.Add(s, "b1")
	}
	base := f.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	canary := filepath.Join(outside, "canary")
	if err := os.WriteFile(canary, []byte("x"), 0o600); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		f.Fatal(err)
	}
	d := Dir(root)
	f.Fuzz(func(t *testing.T, a, b string) {
		if len(validation.IsDNS1123Subdomain(a)) == 0 {
			if err := Name(a); err != nil {
				t.Fatalf("admission takes %q, rootdir refuses it: %v", a, err)
			}
		}
		if p, err := d.Join("ns", a, b); err == nil {
			rel, err := filepath.Rel(root, p)
			if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
				t.Fatalf("Join(ns, %q, %q) = %s, outside %s", a, b, p, root)
			}
		}
		_ = d.RemoveAll(a, b)
		_ = d.RemoveAll("link", a)
		if _, err := os.Stat(canary); err != nil {
			t.Fatalf("RemoveAll(%q, %q) removed a file outside the root: %v", a, b, err)
		}
	})
}
