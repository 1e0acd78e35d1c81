package apiserver

// The OpenAPI documents, built when first asked for and kept as bytes.

import (
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	restful "github.com/emicklei/go-restful/v3"
	"github.com/munnerz/goautoneg"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/klog/v2"
	builder2 "k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/common/restfuladapter"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
)

// lazyOpenAPI serves /openapi/v2 and /openapi/v3 as the generic server's
// PrepareRun does (k8s.io/apiserver's routes.OpenAPI, which the config
// skips: SkipOpenAPIInstallation), with kube's builders and the same
// protocol as kube's handlers (content types, ETags, v3's discovery
// document and its ?hash= URLs), but builds each document when a client
// first asks for it, and keeps it only as its serialized bytes, gzipped:
// not as the built document, which kube's handlers keep (about 10 MiB of
// an idle server's heap once kube-apiserver's aggregator has fetched
// them, which it does as soon as the APIService is available). Unlike
// routes.OpenAPI, the v3 documents keep the full list of
// group-version-kinds on the meta types every group registers
// (WatchEvent, DeleteOptions).
type lazyOpenAPI struct {
	container *restful.Container
	v2        *common.Config
	v3        *common.OpenAPIV3Config
}

// OpenAPIConfigs are the configs of the server's OpenAPI documents: kube's
// defaults (DefaultOpenAPIConfig, DefaultOpenAPIV3Config) over the
// definitions given, named by the scheme's kinds, titled Backstop and
// carrying the server's version (a document without one has no protobuf
// form). Both name operations through GetOperationIDAndTagsFromRoute set
// here: left unset, kube-openapi's builders set it on the config on first
// use to a closure over that builder, which then keeps the builder, with
// every definition and the document it built, for the server's life
// (about 2.6 MiB of an idle server's heap from the first group's install;
// a whole v2 document once one was asked for). Being set before, it is
// also never written while two documents are built at once.
func OpenAPIConfigs(definitions common.GetOpenAPIDefinitions, scheme *runtime.Scheme, version string) (*common.Config, *common.OpenAPIV3Config) {
	namer := openapi.NewDefinitionNamer(scheme)
	v2 := genericapiserver.DefaultOpenAPIConfig(definitions, namer)
	v2.Info.Title = "Backstop"
	v2.Info.Version = version
	v2.GetOperationIDAndTagsFromRoute = func(r common.Route) (string, []string, error) {
		return restfulOperation(r, v2.GetOperationIDAndTags)
	}
	v3 := genericapiserver.DefaultOpenAPIV3Config(definitions, namer)
	v3.Info.Title = "Backstop"
	v3.Info.Version = version
	v3.GetOperationIDAndTagsFromRoute = func(r common.Route) (string, []string, error) {
		return restfulOperation(r, v3.GetOperationIDAndTags)
	}
	return v2, v3
}

// restfulOperation names a go-restful route's operation as the builders do
// when a config has only GetOperationIDAndTags.
func restfulOperation(r common.Route, name func(*restful.Route) (string, []string, error)) (string, []string, error) {
	route, ok := r.(*restfuladapter.RouteAdapter)
	if !ok {
		return "", nil, fmt.Errorf("route %s is not a go-restful route", r.Path())
	}
	return name(route.Route)
}

// Content types of the OpenAPI documents, as kube serves them.
const (
	openAPIJSON            = "json"
	openAPIV2Protobuf      = "com.github.proto-openapi.spec.v2.v1.0+protobuf"
	openAPIV2ProtobufAlias = "com.github.proto-openapi.spec.v2@v1.0+protobuf"
	openAPIV3Protobuf      = "com.github.proto-openapi.spec.v3.v1.0+protobuf"
	openAPIV3ProtobufAlias = "com.github.proto-openapi.spec.v3@v1.0+protobuf"
	openAPIV2Path          = "/openapi/v2"
	// The v3 discovery document; the group versions' are below it.
	openAPIDiscoveryPath = "/openapi/v3"
)

// install registers the handlers on the server's mux (its
// NonGoRestfulMux); every API group must be installed before (their routes
// are read when a document is built).
func (o lazyOpenAPI) install(mux *mux.PathRecorderMux) error {
	if o.v3 != nil {
		// The groups' installs built their models from the definitions
		// kube's DefaultOpenAPIV3Config made up front (about 2.3 MiB if
		// kept); the documents are built from GetDefinitions.
		o.v3.Definitions = nil
	}
	if o.v2 != nil {
		v2 := &openAPIDocument{build: o.buildV2, toProto: handler.ToProtoBinary}
		mux.Handle(openAPIV2Path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			serveOpenAPI(w, r, v2, nil, openAPIV2Protobuf, openAPIV2ProtobufAlias)
		}))
	}
	if o.v3 == nil {
		return nil
	}
	groups := map[string]*openAPIDocument{}
	for _, ws := range o.container.RegisteredWebServices() {
		// "/apis/velero.io/v1" serves as "apis/velero.io/v1".
		groups[ws.RootPath()[1:]] = &openAPIDocument{build: func() ([]byte, error) { return o.buildV3(ws) }, toProto: handler3.ToV3ProtoBinary}
	}
	discovery := &openAPIDocument{build: func() ([]byte, error) { return v3Discovery(groups) }}
	mux.Handle(openAPIDiscoveryPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serveOpenAPI(w, r, discovery, nil)
	}))
	mux.HandlePrefix(openAPIDiscoveryPath+"/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gv := strings.TrimPrefix(r.URL.Path, openAPIDiscoveryPath+"/")
		doc, ok := groups[gv]
		if !ok {
			http.NotFound(w, r)
			return
		}
		serveOpenAPI(w, r, doc, func(etag string) bool {
			// As kube's handler: a URL of the discovery document, whose
			// content never changes; an old hash is sent to the current.
			hash := r.URL.Query().Get("hash")
			switch {
			case hash == "":
			case hash != etag:
				http.Redirect(w, r, groupVersionURL(gv, etag), http.StatusMovedPermanently)
				return false
			default:
				w.Header().Set("Cache-Control", "public, immutable")
				w.Header().Set("Expires", time.Now().AddDate(1, 0, 0).Format(time.RFC1123))
			}
			return true
		}, openAPIV3Protobuf, openAPIV3ProtobufAlias)
	}))
	return nil
}

// buildV2 builds the v2 document of every route, as JSON.
func (o lazyOpenAPI) buildV2() ([]byte, error) {
	swagger, err := builder2.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices(o.container.RegisteredWebServices()), o.v2)
	if err != nil {
		return nil, fmt.Errorf("building the OpenAPI v2 document: %w", err)
	}
	swagger.Definitions = handler.PruneDefaults(swagger.Definitions)
	return swagger.MarshalJSON()
}

// buildV3 builds the v3 document of one group version's routes, as JSON.
func (o lazyOpenAPI) buildV3(ws *restful.WebService) ([]byte, error) {
	doc, err := builder3.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices([]*restful.WebService{ws}), o.v3)
	if err != nil {
		return nil, fmt.Errorf("building the OpenAPI v3 document of %s: %w", ws.RootPath(), err)
	}
	// As kube's handler: encoding/json over the document's MarshalJSON
	// (compacted, HTML characters escaped).
	return json.Marshal(doc)
}

// v3Discovery is the v3 discovery document: each group version's URL with
// the hash of its document (each is built for it).
func v3Discovery(groups map[string]*openAPIDocument) ([]byte, error) {
	d := handler3.OpenAPIV3Discovery{Paths: map[string]handler3.OpenAPIV3DiscoveryGroupVersion{}}
	for gv, doc := range groups {
		_, etag, err := doc.jsonForm()
		if err != nil {
			return nil, err
		}
		d.Paths[gv] = handler3.OpenAPIV3DiscoveryGroupVersion{ServerRelativeURL: groupVersionURL(gv, etag)}
	}
	return json.Marshal(d)
}

// groupVersionURL is a v3 document's URL with its hash, as kube's.
func groupVersionURL(gv, etag string) string {
	u := url.URL{Path: path.Join(openAPIDiscoveryPath, gv), RawQuery: url.Values{"hash": {etag}}.Encode()}
	return u.String()
}

// openAPIDocument is one document: its JSON, built once when first asked
// for, and its protobuf form (made from the JSON when first asked for),
// each kept gzipped only.
type openAPIDocument struct {
	build   func() ([]byte, error)
	toProto func([]byte) ([]byte, error)
	json    packedForm
	proto   packedForm
}

// packedForm is a document's form: gzipped, with the ETag of the
// document's JSON (as kube's handlers: the same for both forms, told apart
// by Vary: Accept).
type packedForm struct {
	once     sync.Once
	gz       []byte
	etag     string
	modified time.Time
	err      error
}

// jsonForm returns the document's JSON, gzipped, and its ETag.
func (d *openAPIDocument) jsonForm() (*packedForm, string, error) {
	f := &d.json
	f.once.Do(func() {
		data, err := d.build()
		if err != nil {
			f.err = err
			return
		}
		f.etag, f.modified = fmt.Sprintf("%X", sha512.Sum512(data)), time.Now()
		f.gz, f.err = gzipped(data)
	})
	return f, f.etag, f.err
}

// protoForm returns the document's protobuf form, gzipped.
func (d *openAPIDocument) protoForm() (*packedForm, error) {
	j, etag, err := d.jsonForm()
	if err != nil {
		return nil, err
	}
	f := &d.proto
	f.once.Do(func() {
		data, err := gunzipped(j.gz)
		if err == nil {
			data, err = d.toProto(data)
		}
		if err != nil {
			f.err = fmt.Errorf("the OpenAPI document in protobuf: %w", err)
			return
		}
		f.etag, f.modified = etag, j.modified
		f.gz, f.err = gzipped(data)
	})
	return f, f.err
}

// serveOpenAPI answers with the form of doc the request accepts: JSON, or
// one of the protobuf content types when doc has that form (the first
// is the one answered); 406 for another. The body is sent gzipped to a
// client that accepts it, as kube's handlers do; conditional requests are
// answered by http.ServeContent. check (nil: none), told the ETag once the
// headers are set, says whether to send the body (false: it has answered).
func serveOpenAPI(w http.ResponseWriter, r *http.Request, doc *openAPIDocument, check func(etag string) bool, protobuf ...string) {
	accept := r.Header.Get("Accept")
	if accept == "" {
		accept = "*/*"
	}
	w.Header().Add("Vary", "Accept")
	for _, clause := range goautoneg.ParseAccept(accept) {
		if clause.Type != "application" && clause.Type != "*" {
			continue
		}
		var form *packedForm
		var contentType string
		var err error
		switch {
		case clause.SubType == openAPIJSON || clause.SubType == "*":
			form, _, err = doc.jsonForm()
			contentType = "application/json"
		case len(protobuf) > 0 && (clause.SubType == protobuf[0] || clause.SubType == protobuf[1]):
			form, err = doc.protoForm()
			contentType = "application/" + protobuf[0]
		default:
			continue
		}
		if err != nil {
			openAPIUnavailable(w, r.URL.Path, err)
			return
		}
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Etag", strconv.Quote(form.etag))
		if check != nil && !check(form.etag) {
			return
		}
		w.Header().Add("Vary", "Accept-Encoding")
		body := form.gz
		if acceptsGzip(r) {
			w.Header().Set("Content-Encoding", "gzip")
		} else if body, err = gunzipped(form.gz); err != nil {
			openAPIUnavailable(w, r.URL.Path, err)
			return
		}
		http.ServeContent(w, r, "", form.modified, bytes.NewReader(body))
		return
	}
	w.WriteHeader(http.StatusNotAcceptable)
}

func openAPIUnavailable(w http.ResponseWriter, what string, err error) {
	klog.ErrorS(err, "Serving an OpenAPI document", "path", what)
	w.WriteHeader(http.StatusServiceUnavailable)
}

// acceptsGzip reports whether the request's Accept-Encoding takes gzip.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") && strings.ReplaceAll(params, " ", "") != "q=0" {
			return true
		}
	}
	return false
}

func gzipped(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return bytes.Clone(buf.Bytes()), nil
}

func gunzipped(gz []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}
