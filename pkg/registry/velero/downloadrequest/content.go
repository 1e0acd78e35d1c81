package downloadrequest

import (
	"context"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/backstop-io/backstop/pkg/apis/velero"
)

// ContentREST is downloadrequests/<name>/content: GET streams the file a
// signed download link names. It is the form links take through
// kube-apiserver's aggregator (pkg/engine/download): the link's signature,
// not the caller, authorizes the read.
type ContentREST struct {
	// Serve answers the link of the download request name in namespace.
	Serve func(w http.ResponseWriter, r *http.Request, namespace, name string)
}

var (
	_ rest.Connecter       = &ContentREST{}
	_ rest.StorageMetadata = &ContentREST{}
)

// New returns an empty download request.
func (c *ContentREST) New() runtime.Object { return &velero.DownloadRequest{} }

// Destroy has nothing to release.
func (c *ContentREST) Destroy() {}

// ConnectMethods: GET only.
func (c *ContentREST) ConnectMethods() []string { return []string{http.MethodGet} }

// NewConnectOptions: the query is the link's, read by Serve.
func (c *ContentREST) NewConnectOptions() (runtime.Object, bool, string) { return nil, false, "" }

// ProducesMIMETypes: the file's bytes.
func (c *ContentREST) ProducesMIMETypes(string) []string { return []string{"application/octet-stream"} }

// ProducesObject: a stream, not an object.
func (c *ContentREST) ProducesObject(string) any { return "" }

// Connect serves the link.
func (c *ContentREST) Connect(ctx context.Context, name string, _ runtime.Object, _ rest.Responder) (http.Handler, error) {
	namespace, _ := genericapirequest.NamespaceFrom(ctx)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { c.Serve(w, r, namespace, name) }), nil
}
