package framework

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Heap is a Go server's live heap: a profile of net/http/pprof's
// /debug/pprof/heap taken after a collection (?gc=1), in bytes, split by
// who holds it. Engines and WatchCache are Backstop's shares (the split
// knows Backstop's packages); of another server's heap, such as
// Velero's, only Total means anything.
type Heap struct {
	// Engines: their informers' caches, decoded from their watches and
	// lists, and the engines' own packages.
	Engines int64
	// WatchCache: the apiserver's cacher in front of the storage, its
	// store and the history of events it keeps for watchers that resume.
	WatchCache int64
	Total      int64
}

// ParseHeap splits a heap profile (the body of /debug/pprof/heap) by who
// holds its live bytes.
func ParseHeap(body []byte) (Heap, error) {
	p, err := profile.ParseData(body)
	if err != nil {
		return Heap{}, fmt.Errorf("parsing the heap profile: %w", err)
	}
	inuse := -1
	for i, st := range p.SampleType {
		if st.Type == "inuse_space" {
			inuse = i
		}
	}
	if inuse < 0 {
		return Heap{}, fmt.Errorf("no inuse_space in the heap profile")
	}
	var h Heap
	for _, sample := range p.Sample {
		bytes := sample.Value[inuse]
		h.Total += bytes
		switch heldBy(sample) {
		case "engines":
			h.Engines += bytes
		case "watch cache":
			h.WatchCache += bytes
		}
	}
	return h, nil
}

// heldBy names who allocated a sample, by the frames of its stack: the
// watch cache (the cacher, and the objects the storage's watch decodes for
// it), or the engines (their packages, and the in-process clients' watch
// and list decoding, which feeds their informers).
func heldBy(sample *profile.Sample) string {
	engines := false
	for _, loc := range sample.Location {
		for _, line := range loc.Line {
			fn := line.Function.Name
			switch {
			case strings.Contains(fn, "k8s.io/apiserver/pkg/storage/cacher"), strings.Contains(fn, "backstop/pkg/storage/pebble.(*watchChan)"):
				return "watch cache"
			case strings.Contains(fn, "backstop/pkg/engine"), strings.Contains(fn, "k8s.io/client-go/rest/watch"), strings.Contains(fn, "k8s.io/client-go/tools/cache.(*Reflector)"):
				engines = true
			}
		}
	}
	if engines {
		return "engines"
	}
	return ""
}

// HeapOf reads the live heap of the Kubernetes-style server config
// reaches (its /debug/pprof/heap, after a collection).
func HeapOf(t testing.TB, config *rest.Config) Heap {
	t.Helper()
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	body, err := client.Discovery().RESTClient().Get().AbsPath("/debug/pprof/heap").Param("gc", "1").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("reading the heap profile of %s: %v", config.Host, err)
	}
	h, err := ParseHeap(body)
	if err != nil {
		t.Fatalf("%s: %v", config.Host, err)
	}
	return h
}

// HeapAt reads the live heap of a Go server whose net/http/pprof listens
// at addr without authentication (Velero's --profiler-address).
func HeapAt(t testing.TB, addr string) Heap {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?gc=1")
	if err != nil {
		t.Fatalf("reading the heap profile at %s: %v", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("reading the heap profile at %s: %s %v", addr, resp.Status, err)
	}
	h, err := ParseHeap(body)
	if err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	return h
}
