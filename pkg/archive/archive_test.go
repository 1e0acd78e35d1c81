package archive

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
	"time"
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
	r, err := NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var got []Item
	for {
		it, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, *it)
	}
	want := []Item{
		{GroupResource: "roles.rbac.authorization.k8s.io", Namespace: "shop", Name: "reader", Data: []byte(`{"a":1}`)},
		{GroupResource: "roles.rbac.authorization.k8s.io", Version: "v1", Preferred: true, Namespace: "shop", Name: "reader", Data: []byte(`{"a":1}`)},
		{GroupResource: "namespaces", Name: "shop", Data: []byte(`{"b":2}`)},
		{GroupResource: "namespaces", Version: "v1", Preferred: true, Name: "shop", Data: []byte(`{"b":2}`)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("items:\n got %+v\nwant %+v", got, want)
	}
	if r.FormatVersion != FormatVersion {
		t.Errorf("format version %q", r.FormatVersion)
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
