package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	apischeme "github.com/backstop-io/backstop/pkg/apis/scheme"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/apiserver"
	"github.com/backstop-io/backstop/pkg/storage/storedlist"
	"github.com/backstop-io/backstop/test/integration/conformance"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// listRequest is one list request of TestListsFromStorage.
type listRequest struct {
	name   string // what it asks, for messages
	path   string
	query  url.Values
	accept string
	// pages: follow metadata.continue to the end, each page an answer.
	pages bool
}

// listAnswer is a request's answer: its status and the decoded body of
// each page.
type listAnswer struct {
	code  int
	pages []any
}

// TestListsFromStorage: JSON lists written from the objects' stored bytes
// (the default on Pebble) say exactly what the same lists encoded object
// by object say (--lists-from-storage=false), for every resource, with
// label and field selectors, pages (limit and continue), every
// resourceVersion match, tables and `kubectl get -o name`; lists of
// Backups waiting in the queue carry their queue positions (those items
// are encoded: they differ from what is stored). The server's
// backstop_apiserver_list_items_total shows which items came from storage.
func TestListsFromStorage(t *testing.T) {
	if framework.Storage() == "etcd3" {
		t.Skip("lists are written from stored bytes on Pebble only: on etcd3 both ways are the same encoding, there is nothing to compare")
	}
	t.Parallel()
	// Nothing writes but the test (no engines, no leases): the lists'
	// resourceVersions and continue tokens are the same in both runs.
	args := []string{"--disable-controllers=" + strings.Join(apiserver.EngineNames(), ","), "--leader-elect=false"}
	s := framework.Start(t, framework.Options{Args: args})
	ctx := context.Background()
	target := conformance.Target{Client: s.Clientset, Engine: s.EngineClientset()}
	conformance.Prerequisites(t, target)
	scheme := apischeme.New()

	// Four objects of every resource, two labelled tier=a and two tier=b.
	type served struct {
		gvr        schema.GroupVersionResource
		kind       string
		namespace  string
		namespaced bool
	}
	resources := map[string]served{}
	for i := range 4 {
		for resource, obj := range conformance.ValidObjects(target, fmt.Sprintf("list-%d", i)) {
			gvks, _, err := scheme.ObjectKinds(obj)
			if err != nil {
				t.Fatal(err)
			}
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			if err != nil {
				t.Fatal(err)
			}
			m := obj.(metav1.Object)
			gvr := gvks[0].GroupVersion().WithResource(resource)
			resources[resource] = served{gvr: gvr, kind: gvks[0].Kind, namespace: m.GetNamespace(), namespaced: m.GetNamespace() != ""}
			o := &unstructured.Unstructured{Object: u}
			o.SetGroupVersionKind(gvks[0])
			o.SetLabels(map[string]string{"tier": []string{"a", "b"}[i%2]})
			body, err := o.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			// As an engine: some resources are made by the server alone.
			collection := "/apis/" + gvr.Group + "/" + gvr.Version + "/" + resource
			if m.GetNamespace() != "" {
				collection = "/apis/" + gvr.Group + "/" + gvr.Version + "/namespaces/" + m.GetNamespace() + "/" + resource
			}
			if err := s.EngineClientset().VeleroV1().RESTClient().Post().AbsPath(collection).Body(body).Do(ctx).Error(); err != nil {
				t.Fatalf("creating %s %s: %v", resource, m.GetName(), err)
			}
		}
	}
	// Two Backups wait in the queue: their positions are filled in on
	// read, so those items are encoded.
	setBackupPhase(t, s, "list-0", velerov1.BackupPhaseQueued)
	setBackupPhase(t, s, "list-2", velerov1.BackupPhaseQueued)
	// Restores wait until the restore engine takes them (it is off): two
	// of them end, so that their lists hold items as stored too.
	for _, name := range []string{"list-1", "list-3"} {
		restores := s.EngineClientset().VeleroV1().Restores(ns)
		r, err := restores.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r.Status.Phase = velerov1.RestorePhaseFailedValidation
		if _, err := restores.UpdateStatus(ctx, r, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("ending restore %s: %v", name, err)
		}
	}

	names := make([]string, 0, len(resources))
	for r := range resources {
		names = append(names, r)
	}
	sort.Strings(names)
	requests := func(listRV map[string]string) []listRequest {
		var out []listRequest
		for _, r := range names {
			sv := resources[r]
			root := "/apis/" + sv.gvr.Group + "/" + sv.gvr.Version + "/"
			paths := []string{root + r}
			if sv.namespaced {
				paths = append(paths, root+"namespaces/"+sv.namespace+"/"+r)
			}
			for _, p := range paths {
				out = append(out,
					listRequest{name: "all", path: p},
					listRequest{name: "label selector", path: p, query: url.Values{"labelSelector": {"tier=a"}}},
					listRequest{name: "set-based label selector", path: p, query: url.Values{"labelSelector": {"tier in (b),!missing"}}},
					listRequest{name: "field selector", path: p, query: url.Values{"fieldSelector": {"metadata.name=list-1"}}},
					listRequest{name: "field and label selectors", path: p, query: url.Values{"fieldSelector": {"metadata.name!=list-1"}, "labelSelector": {"tier=b"}}},
					listRequest{name: "pages of 1", path: p, query: url.Values{"limit": {"1"}}, pages: true},
					listRequest{name: "pages of 3 with a selector", path: p, query: url.Values{"limit": {"3"}, "labelSelector": {"tier"}}, pages: true},
					listRequest{name: "resourceVersion 0", path: p, query: url.Values{"resourceVersion": {"0"}}},
					listRequest{name: "table", path: p, accept: "application/json;as=Table;v=v1;g=meta.k8s.io"},
					listRequest{name: "metadata only", path: p, accept: "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"},
				)
				if rv := listRV[p]; rv != "" {
					out = append(out,
						listRequest{name: "Exact", path: p, query: url.Values{"resourceVersion": {rv}, "resourceVersionMatch": {"Exact"}}},
						listRequest{name: "NotOlderThan", path: p, query: url.Values{"resourceVersion": {rv}, "resourceVersionMatch": {"NotOlderThan"}}},
						listRequest{name: "Exact, pages of 2", path: p, query: url.Values{"resourceVersion": {rv}, "resourceVersionMatch": {"Exact"}, "limit": {"2"}}, pages: true},
					)
				}
			}
		}
		return out
	}
	client := rawLister(t, s.Config)
	// The lists' resourceVersions, for the requests at a version: the
	// same in both runs (nothing is written in between).
	listRV := map[string]string{}
	for _, req := range requests(nil) {
		if req.name == "all" {
			a := get(t, client, req)
			listRV[req.path] = a.pages[0].(map[string]any)["metadata"].(map[string]any)["resourceVersion"].(string)
		}
	}
	ask := func() (map[string]listAnswer, map[string]string) {
		answers := map[string]listAnswer{}
		for _, req := range requests(listRV) {
			answers[req.path+" "+req.name] = get(t, client, req)
		}
		byName := map[string]string{}
		for _, r := range names {
			out, err := s.Kubectl(nil, "get", resources[r].gvr.GroupResource().String(), "-A", "-o", "name")
			if err != nil {
				t.Fatalf("kubectl get %s -o name: %v: %s", r, err, out)
			}
			byName[r] = out
		}
		return answers, byName
	}

	stored, storedNames := ask()
	counts := listItemCounts(t, client)
	t.Run("items came from storage", func(t *testing.T) {
		for _, r := range names {
			resource := resources[r].gvr.GroupResource().String()
			// OADP's types put spec and status before their metadata, as
			// OADP's Go types do: their stored form does not begin with
			// what a list item does, they are encoded.
			obj, err := scheme.New(resources[r].gvr.GroupVersion().WithKind(resources[r].kind))
			if err != nil {
				t.Fatal(err)
			}
			if storedlist.BeginsWithMeta(reflect.TypeOf(obj).Elem()) {
				if counts[resource][0] == 0 {
					t.Errorf("%s: no list item was written from its stored bytes (%v)", resource, counts[resource])
				}
			} else if counts[resource] != [2]float64{} {
				t.Errorf("%s: items counted (%v), but its type does not begin with its metadata", resource, counts[resource])
			}
		}
		for _, resource := range []string{"backups.velero.io", "restores.velero.io"} {
			if n := counts[resource][1]; n == 0 {
				t.Errorf("%s: no item encoded, but two wait in the queue (their queue positions are not stored)", resource)
			}
		}
		queued := 0
		for _, item := range stored["/apis/velero.io/v1/namespaces/"+ns+"/backups all"].pages[0].(map[string]any)["items"].([]any) {
			if p, _ := item.(map[string]any)["status"].(map[string]any)["queuePosition"].(float64); p > 0 {
				queued++
			}
		}
		if queued != 2 {
			t.Errorf("the list of Backups shows %d with a queue position, want 2", queued)
		}
	})

	s.RestartWith(append(slices.Clone(args), "--lists-from-storage=false"))
	encoded, encodedNames := ask()
	t.Run("no item came from storage with --lists-from-storage=false", func(t *testing.T) {
		for resource, c := range listItemCounts(t, client) {
			if c[0] != 0 {
				t.Errorf("%s: %v items written from stored bytes", resource, c[0])
			}
		}
	})
	t.Run("the same answers", func(t *testing.T) {
		if len(stored) != len(encoded) {
			t.Fatalf("%d answers from stored bytes, %d encoded", len(stored), len(encoded))
		}
		for key, want := range encoded {
			got := stored[key]
			if got.code != want.code || !reflect.DeepEqual(got.pages, want.pages) {
				g, _ := json.MarshalIndent(got.pages, "", " ")
				w, _ := json.MarshalIndent(want.pages, "", " ")
				t.Errorf("%s: from stored bytes %d\n%s\nencoded %d\n%s", key, got.code, g, want.code, w)
			}
		}
		for r, want := range encodedNames {
			if storedNames[r] != want {
				t.Errorf("kubectl get %s -o name: from stored bytes %q, encoded %q", r, storedNames[r], want)
			}
			for i := range 4 {
				if !strings.Contains(want, fmt.Sprintf("/list-%d\n", i)) {
					t.Errorf("kubectl get %s -o name: %q, without list-%d", r, want, i)
				}
			}
		}
	})
}

// rawLister sends requests whose answers are read as bytes, without
// client-side rate limits.
func rawLister(t *testing.T, cfg *rest.Config) rest.Interface {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c.Discovery().RESTClient()
}

// get sends req (following its pages) and decodes the answers; in a
// table, the cells of date columns (ages, relative to now) are blanked.
func get(t *testing.T, c rest.Interface, req listRequest) listAnswer {
	t.Helper()
	query := url.Values{}
	for k, v := range req.query {
		query[k] = v
	}
	var a listAnswer
	for {
		r := c.Get().AbsPath(req.path)
		for k, v := range query {
			for _, x := range v {
				r = r.Param(k, x)
			}
		}
		if req.accept != "" {
			r = r.SetHeader("Accept", req.accept)
		}
		res := r.Do(context.Background())
		body, err := res.Raw()
		res.StatusCode(&a.code)
		if err != nil && a.code == 0 {
			t.Fatalf("%s %s: %v", req.path, req.name, err)
		}
		var page any
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatalf("%s %s: %v: %s", req.path, req.name, err, body)
		}
		blankDates(page)
		a.pages = append(a.pages, page)
		next, _ := page.(map[string]any)["metadata"].(map[string]any)["continue"].(string)
		if !req.pages || next == "" || a.code != 200 {
			return a
		}
		query.Set("continue", next)
	}
}

// blankDates empties the cells of a table's date columns.
func blankDates(page any) {
	m, ok := page.(map[string]any)
	if !ok || m["kind"] != "Table" {
		return
	}
	columns, _ := m["columnDefinitions"].([]any)
	rows, _ := m["rows"].([]any)
	for i, c := range columns {
		if c.(map[string]any)["type"] != "date" {
			continue
		}
		for _, row := range rows {
			if cells, _ := row.(map[string]any)["cells"].([]any); i < len(cells) {
				cells[i] = "(date)"
			}
		}
	}
}

// listItemCounts reads backstop_apiserver_list_items_total from the
// server's /metrics: by resource, the items written from stored bytes
// and those encoded.
func listItemCounts(t *testing.T, c rest.Interface) map[string][2]float64 {
	t.Helper()
	raw, err := c.Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("reading /metrics: %v", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	out := map[string][2]float64{}
	for _, m := range families["backstop_apiserver_list_items_total"].GetMetric() {
		var resource, source string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "resource":
				resource = l.GetValue()
			case "source":
				source = l.GetValue()
			}
		}
		c := out[resource]
		if source == "stored" {
			c[0] += m.GetCounter().GetValue()
		} else {
			c[1] += m.GetCounter().GetValue()
		}
		out[resource] = c
	}
	return out
}
