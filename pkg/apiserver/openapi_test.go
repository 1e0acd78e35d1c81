package apiserver

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"weak"

	restful "github.com/emicklei/go-restful/v3"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/server/mux"
	builder2 "k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/common/restfuladapter"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	backstopopenapi "github.com/backstop-io/backstop/pkg/generated/openapi"
)

// TestLazyOpenAPI: the OpenAPI documents are built when first asked for,
// once, and served as kube's handlers serve them: the same bytes and
// headers for each content type, v3's discovery and hash URLs, 304 for
// a request with the ETag, gzip to a client that accepts it.
func TestLazyOpenAPI(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := velerov1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	// A document's build names each route's operation: counted.
	var built atomic.Int32
	operation := func(r *restful.Route) (string, []string, error) {
		built.Add(1)
		return openapi.GetOperationIDAndTags(r)
	}
	v2, v3 := OpenAPIConfigs(backstopopenapi.GetOpenAPIDefinitions, scheme, "test")
	v2.GetOperationIDAndTags = operation
	v3.GetOperationIDAndTags = operation
	container, ws := backupRoutes()
	m := mux.NewPathRecorderMux("test")
	if err := (lazyOpenAPI{container: container, v2: v2, v3: v3}).install(m); err != nil {
		t.Fatal(err)
	}
	if n := built.Load(); n != 0 {
		t.Fatalf("installed: %d operations named, want none until a document is asked for", n)
	}
	get := func(path string) string {
		t.Helper()
		rec := httptest.NewRecorder()
		m.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body.String())
		}
		return rec.Body.String()
	}
	for _, path := range []string{"/openapi/v2", "/openapi/v2", "/openapi/v3/apis/velero.io/v1", "/openapi/v3/apis/velero.io/v1"} {
		if body := get(path); !strings.Contains(body, `"io.velero.v1.Backup"`) {
			t.Errorf("GET %s lacks the Backup definition: %.200s", path, body)
		}
	}
	if n := built.Load(); n != 2 {
		t.Errorf("after two requests of each document: %d operations named, want 2 (each document built once)", n)
	}

	// kube's own handlers over the same routes: what they answer is what
	// is answered, byte for byte.
	kube := mux.NewPathRecorderMux("kube")
	handler.NewOpenAPIServiceLazy(cached.Func(func() (*spec.Swagger, string, error) {
		sw, err := builder2.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices(container.RegisteredWebServices()), v2)
		if err == nil {
			sw.Definitions = handler.PruneDefaults(sw.Definitions)
		}
		return sw, "v2", err
	})).RegisterOpenAPIVersionedService("/openapi/v2", kube)
	kube3 := handler3.NewOpenAPIService()
	if err := kube3.RegisterOpenAPIV3VersionedService("/openapi/v3", kube); err != nil {
		t.Fatal(err)
	}
	kube3.UpdateGroupVersionLazy("apis/velero.io/v1", cached.Func(func() (*spec3.OpenAPI, string, error) {
		doc, err := builder3.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices([]*restful.WebService{ws}), v3)
		return doc, "v3", err
	}))
	request := func(m http.Handler, path string, header map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		m.ServeHTTP(rec, req)
		return rec
	}
	discovery := request(m, "/openapi/v3", nil)
	for _, tc := range []struct {
		name, path string
		header     map[string]string
	}{
		{"v2 JSON", "/openapi/v2", nil},
		{"v2 protobuf", "/openapi/v2", map[string]string{"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"}},
		{"v2 protobuf, kube's name", "/openapi/v2", map[string]string{"Accept": "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"}},
		{"v3 discovery", "/openapi/v3", nil},
		{"v3 JSON", "/openapi/v3/apis/velero.io/v1", map[string]string{"Accept": "application/json"}},
		{"v3 protobuf", "/openapi/v3/apis/velero.io/v1", map[string]string{"Accept": "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"}},
		{"v3 by its hash", strings.TrimPrefix(between(discovery.Body.String(), `"serverRelativeURL":"`, `"`), ""), nil},
		{"v3 by an old hash", "/openapi/v3/apis/velero.io/v1?hash=0123", nil},
		{"not acceptable", "/openapi/v2", map[string]string{"Accept": "text/html"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, want := request(m, tc.path, tc.header), request(kube, tc.path, tc.header)
			if got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
				t.Errorf("GET %s: %d, %d bytes; kube's handler: %d, %d bytes", tc.path, got.Code, got.Body.Len(), want.Code, want.Body.Len())
			}
			for _, h := range []string{"Content-Type", "Etag", "Cache-Control", "Location"} {
				if got.Header().Get(h) != want.Header().Get(h) {
					t.Errorf("GET %s: %s %q, kube's handler %q", tc.path, h, got.Header().Get(h), want.Header().Get(h))
				}
			}
			if got.Code == http.StatusOK {
				etag := got.Header().Get("Etag")
				if again := request(m, tc.path, merged(tc.header, "If-None-Match", etag)); again.Code != http.StatusNotModified {
					t.Errorf("GET %s with If-None-Match its ETag: %d, want 304", tc.path, again.Code)
				}
				zipped := request(m, tc.path, merged(tc.header, "Accept-Encoding", "gzip"))
				zr, err := gzip.NewReader(zipped.Body)
				if err != nil || zipped.Header().Get("Content-Encoding") != "gzip" {
					t.Fatalf("GET %s accepting gzip: Content-Encoding %q, %v", tc.path, zipped.Header().Get("Content-Encoding"), err)
				}
				if body, err := io.ReadAll(zr); err != nil || !bytes.Equal(body, got.Body.Bytes()) {
					t.Errorf("GET %s accepting gzip: %d bytes unzipped (%v), want the %d bytes sent unzipped", tc.path, len(body), err, got.Body.Len())
				}
			}
		})
	}
}

// between is the text of s between the first before and the after that
// follows it.
func between(s, before, after string) string {
	_, rest, _ := strings.Cut(s, before)
	in, _, _ := strings.Cut(rest, after)
	return strings.ReplaceAll(in, `\u0026`, "&")
}

func merged(h map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for hk, hv := range h {
		out[hk] = hv
	}
	return out
}

// backupRoutes is a container with one route, a Backup's GET, as kube's
// installer describes it.
func backupRoutes() (*restful.Container, *restful.WebService) {
	container := restful.NewContainer()
	ws := new(restful.WebService).Path("/apis/velero.io/v1").Produces(restful.MIME_JSON)
	gvk := velerov1.SchemeGroupVersion.WithKind("Backup")
	ws.Route(ws.GET("/namespaces/{namespace}/backups/{name}").To(func(*restful.Request, *restful.Response) {}).
		Operation("readVeleroV1NamespacedBackup").Writes(&velerov1.Backup{}).
		Metadata("x-kubernetes-group-version-kind", schema.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}).
		Returns(http.StatusOK, "OK", &velerov1.Backup{}))
	container.Add(ws)
	return container, ws
}

// TestOpenAPIBuildersNotKept: once the groups are installed (their models
// built from the definitions, as kube's install does) and every document
// built, nothing the builders made is kept but the documents' bytes: no
// definitions (kube's DefaultOpenAPIV3Config makes them up front), no
// builder (kube-openapi's builders set a closure over themselves on a
// config that lacks GetOperationIDAndTagsFromRoute). Each call of the
// definitions adds one with a value only it refers to, watched by a weak
// pointer: after a collection, none may be left.
func TestOpenAPIBuildersNotKept(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := velerov1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var made []weak.Pointer[[64]byte]
	definitions := func(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
		defs := backstopopenapi.GetOpenAPIDefinitions(ref)
		sentinel := new([64]byte)
		made = append(made, weak.Make(sentinel))
		defs["test/sentinel"] = common.OpenAPIDefinition{Schema: spec.Schema{VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{"x-sentinel": sentinel}}}}
		return defs
	}
	v2, v3 := OpenAPIConfigs(definitions, scheme, "test")
	// What kube's InstallAPIGroup does for each group (getOpenAPIModels).
	for range 2 {
		if _, err := builder3.BuildOpenAPIDefinitionsForResources(v3, velerov1.Backup{}.OpenAPIModelName()); err != nil {
			t.Fatal(err)
		}
	}
	container, _ := backupRoutes()
	m := mux.NewPathRecorderMux("test")
	if err := (lazyOpenAPI{container: container, v2: v2, v3: v3}).install(m); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/openapi/v2", "/openapi/v3", "/openapi/v3/apis/velero.io/v1"} {
		rec := httptest.NewRecorder()
		m.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body.String())
		}
	}
	if len(made) < 3 {
		t.Fatalf("the definitions were made %d times, want at least 3 (up front, the v2 and the v3 document)", len(made))
	}
	goruntime.GC()
	for i, p := range made {
		if p.Value() != nil {
			t.Errorf("the definitions made %d. of %d are still reachable", i+1, len(made))
		}
	}
	// The configs and the served documents stay, as in the server.
	goruntime.KeepAlive(m)
	goruntime.KeepAlive(v2)
	goruntime.KeepAlive(v3)
}
