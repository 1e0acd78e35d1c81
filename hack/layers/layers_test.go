// Package layers holds the tests of the rules of the house that span
// packages. TestLayers keeps the module's layers apart:
// every package of pkg/ and cmd/ belongs to one layer of the table below,
// and its dependencies (transitive, as `go list -deps` finds them) stay in
// the layers that layer may use. The table is the architecture's "data
// flows down" rule written as data: the registry never reaches an engine,
// an engine never reaches the storage, the storage knows nothing of
// backups, and only the wiring sees everything. TestTestNamesUnique keeps
// each test's name its own.
package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/backstop-io/backstop/"

// layer is a group of packages (import path prefixes under the module)
// and the layers their dependencies may come from, besides their own.
type layer struct {
	name     string
	prefixes []string
	uses     []string
}

// The layers, each with what it may use. A package of no layer fails the
// test: a new package is placed here on purpose.
var layers = []layer{
	{name: "api", prefixes: []string{"pkg/apis/"}},
	{name: "generated", prefixes: []string{"pkg/generated/"}, uses: []string{"api"}},
	{name: "leaf", prefixes: []string{"pkg/version", "pkg/failpoint", "pkg/atomicfile", "pkg/rootdir", "pkg/archive", "pkg/volumeinfo", "pkg/resourcemodifiers", "pkg/encryption", "pkg/livelog"}},
	// Storage knows nothing of backup semantics.
	{name: "storage", prefixes: []string{"pkg/storage/"}},
	{name: "objectstore", prefixes: []string{"pkg/objectstore"}, uses: []string{"api", "leaf"}},
	{name: "virt", prefixes: []string{"pkg/virt", "pkg/vmmanifest", "pkg/vmchain", "pkg/vmrestore"}, uses: []string{"api", "leaf"}},
	// The data mover's data path (kopia repositories): no API objects.
	{name: "datamover", prefixes: []string{"pkg/datamover/"}, uses: []string{"leaf"}},
	{name: "standalone", prefixes: []string{"pkg/standalone/"}, uses: []string{"leaf"}},
	// The registry is the API's rules: no engine, no storage backend.
	{name: "registry", prefixes: []string{"pkg/registry/"}, uses: []string{"api", "generated", "leaf", "objectstore"}},
	// Engines are clients of the API: no registry, no storage backend.
	{name: "engine", prefixes: []string{"pkg/engine/"}, uses: []string{"api", "generated", "leaf", "objectstore", "virt", "datamover"}},
	{name: "artifacts", prefixes: []string{"artifacts"}},
	// The web console's pages: files, no API.
	{name: "console", prefixes: []string{"pkg/console"}},
	{name: "wiring", prefixes: []string{"pkg/apiserver"}, uses: []string{"api", "generated", "leaf", "storage", "objectstore", "virt", "datamover", "standalone", "registry", "engine", "artifacts", "console"}},
	{name: "command", prefixes: []string{"pkg/cmd/", "cmd/"}, uses: []string{"api", "generated", "leaf", "storage", "objectstore", "virt", "datamover", "standalone", "registry", "engine", "artifacts", "console", "wiring"}},
}

// layerOf is the layer of a package path relative to the module ("" when
// it has none).
func layerOf(rel string) string {
	for _, l := range layers {
		for _, p := range l.prefixes {
			dir := strings.TrimSuffix(p, "/")
			if rel == dir || strings.HasPrefix(rel, dir+"/") {
				return l.name
			}
		}
	}
	return ""
}

func mayUse(from, to string) bool {
	if from == to {
		return true
	}
	for _, l := range layers {
		if l.name == from {
			return slices.Contains(l.uses, to)
		}
	}
	return false
}

// listed is what go list says of a package (the fields asked for).
type listed struct {
	ImportPath, Dir           string
	Deps                      []string
	TestGoFiles, XTestGoFiles []string
	Error                     *struct{ Err string }
	DepsErrors                []*struct{ Err string }
}

// goList runs `go list -e -json=<fields> <args>` at the module's root and
// returns the packages it names.
func goList(t *testing.T, fields string, args ...string) []listed {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("skipping: the go command is not on PATH (%v)", err)
	}
	cmd := exec.Command("go", append([]string{"list", "-e", "-json=" + fields}, args...)...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
}

// TestLayers: no import cycle, every package in a layer, and no package
// depending on a layer above its own.
func TestLayers(t *testing.T) {
	pkgs := goList(t, "ImportPath,Deps,Error,DepsErrors", module+"pkg/...", module+"cmd/...", module+"artifacts")
	for _, p := range pkgs {
		if p.Error != nil {
			t.Errorf("%s: %s", p.ImportPath, p.Error.Err)
		}
		for _, e := range p.DepsErrors {
			t.Errorf("%s: %s", p.ImportPath, e.Err)
		}
		rel := strings.TrimPrefix(p.ImportPath, module)
		from := layerOf(rel)
		if from == "" {
			t.Errorf("%s is in no layer: place it in the table of hack/layers", rel)
			continue
		}
		for _, dep := range p.Deps {
			if !strings.HasPrefix(dep, module) {
				continue
			}
			depRel := strings.TrimPrefix(dep, module)
			to := layerOf(depRel)
			if !mayUse(from, to) {
				t.Errorf("%s (layer %s) depends on %s (layer %q)", rel, from, depRel, to)
			}
		}
	}
	if len(pkgs) < 50 {
		t.Fatalf("go list named %d packages; the module has more: is the working directory the module's root?", len(pkgs))
	}
}

// TestLayerOf: the table's prefixes match what they should, and only that.
func TestLayerOf(t *testing.T) {
	for rel, want := range map[string]string{
		"pkg/apis/velero/v1":         "api",
		"pkg/engine/restore":         "engine",
		"pkg/registry/resource":      "registry",
		"pkg/storage/pebble":         "storage",
		"pkg/virt":                   "virt",
		"pkg/virt/virttest":          "virt",
		"pkg/vmchain":                "virt",
		"pkg/apiserver":              "wiring",
		"pkg/apiserverx":             "",
		"pkg/rootdir/rootdirtest":    "leaf",
		"cmd/backstop-apiserver":     "command",
		"pkg/objectstore":            "objectstore",
		"pkg/datamover/kopiarepo":    "datamover",
		"pkg/datamover/csivolume":    "datamover",
		"pkg/objectstoreextra":       "",
		"pkg/something/new/and/open": "",
	} {
		if got := layerOf(rel); got != want {
			t.Errorf("layerOf(%q) = %q, want %q", rel, got, want)
		}
	}
	if mayUse("registry", "engine") || mayUse("engine", "registry") || mayUse("engine", "storage") || mayUse("storage", "api") {
		t.Error("the table lets the registry and the engines reach each other, or the storage reach the API types")
	}
}

// TestTestNamesUnique: a test's name says which test it is, in `go test`
// output and in `-run`: no two packages have a test of the same name
// (TestMain and fuzz targets' seeds aside).
func TestTestNamesUnique(t *testing.T) {
	decl := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]*)\(`)
	where := map[string][]string{}
	for _, p := range goList(t, "ImportPath,Dir,TestGoFiles,XTestGoFiles", "-tags=libvirt_dlopen,bench", "./...") {
		seen := map[string]bool{}
		for _, f := range slices.Concat(p.TestGoFiles, p.XTestGoFiles) {
			src, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range decl.FindAllSubmatch(src, -1) {
				name := string(m[1])
				if name != "TestMain" && !seen[name] {
					seen[name] = true
					where[name] = append(where[name], strings.TrimPrefix(p.ImportPath, module))
				}
			}
		}
	}
	if len(where) < 100 {
		t.Fatalf("found %d test names; the module has more", len(where))
	}
	for name, pkgs := range where {
		if len(pkgs) > 1 {
			t.Errorf("%s is a test of %d packages: %v", name, len(pkgs), pkgs)
		}
	}
}
