package apiserver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	restful "github.com/emicklei/go-restful/v3"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/mux"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	backstopopenapi "github.com/backstop-io/backstop/pkg/generated/openapi"
)

// TestLazyOpenAPI: the OpenAPI documents are built when first asked for,
// once, and served as kube's handlers serve them.
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
	namer := openapi.NewDefinitionNamer(scheme)
	v2 := genericapiserver.DefaultOpenAPIConfig(backstopopenapi.GetOpenAPIDefinitions, namer)
	v2.GetOperationIDAndTags = operation
	v3 := genericapiserver.DefaultOpenAPIV3Config(backstopopenapi.GetOpenAPIDefinitions, namer)
	v3.GetOperationIDAndTags = operation

	container := restful.NewContainer()
	ws := new(restful.WebService).Path("/apis/velero.io/v1").Produces(restful.MIME_JSON)
	gvk := velerov1.SchemeGroupVersion.WithKind("Backup")
	ws.Route(ws.GET("/namespaces/{namespace}/backups/{name}").To(func(*restful.Request, *restful.Response) {}).
		Operation("readVeleroV1NamespacedBackup").Writes(&velerov1.Backup{}).
		Metadata("x-kubernetes-group-version-kind", schema.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}).
		Returns(http.StatusOK, "OK", &velerov1.Backup{}))
	container.Add(ws)
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
}
