package archive

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/backstop-io/backstop/pkg/archive/archivetest"
)

func TestWriteThenRead(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddItem("roles.rbac.authorization.k8s.io", "v1", "shop", "reader", []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := w.AddItem("namespaces", "v1", "", "shop", []byte(`{"b":2}`)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, format := readAll(t, buf.Bytes())
	want := []Item{
		{GroupResource: "roles.rbac.authorization.k8s.io", Namespace: "shop", Name: "reader", Data: []byte(`{"a":1}`)},
		{GroupResource: "roles.rbac.authorization.k8s.io", Version: "v1", Preferred: true, Namespace: "shop", Name: "reader", Data: []byte(`{"a":1}`)},
		{GroupResource: "namespaces", Name: "shop", Data: []byte(`{"b":2}`)},
		{GroupResource: "namespaces", Version: "v1", Preferred: true, Name: "shop", Data: []byte(`{"b":2}`)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("items:\n got %+v\nwant %+v", got, want)
	}
	if format != FormatVersion {
		t.Errorf("format version %q", format)
	}
}

// readAll reads every item of a tarball, and its format version.
func readAll(t *testing.T, data []byte) ([]Item, string) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var got []Item
	for {
		it, err := r.Next()
		if errors.Is(err, io.EOF) {
			return got, r.FormatVersion
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, *it)
	}
}

// TestArchiveCopy: items copied from one tarball to another keep their paths,
// versioned (preferred or not) and unversioned alike.
func TestArchiveCopy(t *testing.T) {
	items := []Item{
		{GroupResource: "persistentvolumeclaims", Namespace: "shop", Name: "data", Data: []byte(`{"a":1}`)},
		{GroupResource: "persistentvolumeclaims", Version: "v1", Preferred: true, Namespace: "shop", Name: "data", Data: []byte(`{"a":1}`)},
		{GroupResource: "widgets.example.com", Version: "v1beta1", Namespace: "shop", Name: "w", Data: []byte(`{"c":3}`)},
		{GroupResource: "persistentvolumes", Version: "v1", Preferred: true, Name: "pv-1", Data: []byte(`{"b":2}`)},
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	for i := range items {
		if err := w.Copy(&items[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := readAll(t, buf.Bytes()); !reflect.DeepEqual(got, items) {
		t.Errorf("copied items:\n got %+v\nwant %+v", got, items)
	}
}

func TestParseItemPath(t *testing.T) {
	for _, c := range []struct {
		path string
		want *Item
	}{
		{"resources/pods/namespaces/ns1/p.json", &Item{GroupResource: "pods", Namespace: "ns1", Name: "p"}},
		{"resources/pods/v1-preferredversion/namespaces/ns1/p.json", &Item{GroupResource: "pods", Version: "v1", Preferred: true, Namespace: "ns1", Name: "p"}},
		{"resources/deployments.apps/v1beta1/namespaces/ns1/d.json", &Item{GroupResource: "deployments.apps", Version: "v1beta1", Namespace: "ns1", Name: "d"}},
		{"resources/nodes/cluster/n1.json", &Item{GroupResource: "nodes", Name: "n1"}},
		{"metadata/version", nil},
		{"resources/pods/namespaces/p.json", nil},
		{"resources/pods/namespaces/ns1/p.yaml", nil},
		{"resources/pods/weird/ns1/p.json", nil},
	} {
		got, ok := ParseItemPath(c.path)
		if ok != (c.want != nil) || (ok && !reflect.DeepEqual(got, c.want)) {
			t.Errorf("ParseItemPath(%q) = %+v, %v; want %+v", c.path, got, ok, c.want)
		}
	}
}

func TestReaderRefusesGarbage(t *testing.T) {
	if _, err := NewReader(bytes.NewReader([]byte("not gzip"))); err == nil {
		t.Error("a non-gzip stream was accepted")
	}
}

// TestReaderHostileTarballs: what a bucket's writer can put in a tarball
// is skipped with a reason or ends the read at its limit; the items beside
// it are still read.
func TestReaderHostileTarballs(t *testing.T) {
	good := archivetest.Item("configmaps", "v1", "team-a", "ok", []byte(`{}`))
	for _, c := range []struct {
		name    string
		entries []archivetest.Entry
		limits  Limits
		skipped string // a reason Skipped is told
		limit   bool   // the read ends with ErrLimit
	}{
		{name: "dot-dot in the path", entries: []archivetest.Entry{{Name: "resources/configmaps/v1alpha1-preferredversion/namespaces/../../../../etc/passwd.json", Data: []byte(`{}`)}}, skipped: `".."`},
		{name: "an absolute name", entries: []archivetest.Entry{{Name: "/resources/configmaps/v1alpha1-preferredversion/namespaces/team-a/x.json", Data: []byte(`{}`)}}, skipped: "absolute"},
		// (A NUL cannot be written in a tar name: it ends the name.)
		{name: "an empty element", entries: []archivetest.Entry{{Name: "resources/configmaps/v1alpha1-preferredversion/namespaces//x.json", Data: []byte(`{}`)}}, skipped: `""`},
		{name: "a dot element", entries: []archivetest.Entry{{Name: "resources/configmaps/v1alpha1-preferredversion/namespaces/./x.json", Data: []byte(`{}`)}}, skipped: `"."`},
		{name: "a symlink", entries: []archivetest.Entry{{Name: "resources/configmaps/v1alpha1-preferredversion/namespaces/team-a/x.json", Type: tar.TypeSymlink, Linkname: "/etc/shadow"}}, skipped: "not a regular file"},
		{name: "a hard link", entries: []archivetest.Entry{{Name: "resources/configmaps/v1alpha1-preferredversion/namespaces/team-a/x.json", Type: tar.TypeLink, Linkname: "resources/configmaps/v1alpha1-preferredversion/namespaces/team-a/ok.json"}}, skipped: "not a regular file"},
		{name: "a duplicate", entries: []archivetest.Entry{good}, skipped: "seen before"},
		{name: "a gzip bomb", entries: []archivetest.Entry{{Name: "junk", Zeros: 64 << 20}}, limits: Limits{Bytes: 32 << 20}, limit: true},
		{name: "too many entries", entries: []archivetest.Entry{{Name: "a"}, {Name: "b"}, {Name: "c"}}, limits: Limits{Entries: 3}, limit: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := NewReader(bytes.NewReader(archivetest.Build(t, append([]archivetest.Entry{good}, c.entries...)...)))
			if err != nil {
				t.Fatal(err)
			}
			r.Limits = c.limits
			var reasons []string
			r.Skipped = func(name, why string) { reasons = append(reasons, why) }
			var read []string
			for {
				it, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					if c.limit && errors.Is(err, ErrLimit) {
						return
					}
					t.Fatalf("after %v: %v", read, err)
				}
				read = append(read, it.Namespace+"/"+it.Name)
			}
			if c.limit {
				t.Fatalf("read to the end past its limit: %v", read)
			}
			if !reflect.DeepEqual(read, []string{"team-a/ok"}) {
				t.Errorf("items read %v, want only team-a/ok", read)
			}
			if len(reasons) != 1 || !strings.Contains(reasons[0], c.skipped) {
				t.Errorf("skipped %q, want one saying %q", reasons, c.skipped)
			}
		})
	}
}
