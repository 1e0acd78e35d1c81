package apiserver

// The OpenAPI documents, built when first asked for.

import (
	"fmt"

	restful "github.com/emicklei/go-restful/v3"
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
)

// lazyOpenAPI serves /openapi/v2 and /openapi/v3 as the generic server's
// PrepareRun does (k8s.io/apiserver's routes.OpenAPI, which the config
// skips: SkipOpenAPIInstallation), with kube's own handlers, but builds
// each document when a client first asks for it rather than at start:
// the v2 document and the v3 ones of the groups were the largest share of
// an idle server's heap (about 18 of 42 MiB), and a server nobody asks for
// them never builds them. Once built, a document is kept (the handlers
// cache it and its serialized forms). Unlike routes.OpenAPI, the v3
// documents keep the full list of group-version-kinds on the meta types
// every group registers (WatchEvent, DeleteOptions).
type lazyOpenAPI struct {
	container *restful.Container
	v2        *common.Config
	v3        *common.OpenAPIV3Config
}

// install registers the handlers on the server's mux (its
// NonGoRestfulMux); every API group must be installed before (their routes
// are read when a document is built).
func (o lazyOpenAPI) install(mux *mux.PathRecorderMux) error {
	if o.v2 != nil {
		v2 := handler.NewOpenAPIServiceLazy(cached.Once(cached.Func(o.buildV2)))
		v2.RegisterOpenAPIVersionedService("/openapi/v2", mux)
	}
	if o.v3 == nil {
		return nil
	}
	v3 := handler3.NewOpenAPIService()
	if err := v3.RegisterOpenAPIV3VersionedService("/openapi/v3", mux); err != nil {
		return fmt.Errorf("registering /openapi/v3: %w", err)
	}
	for _, ws := range o.container.RegisteredWebServices() {
		// "/apis/velero.io/v1" serves as "apis/velero.io/v1".
		v3.UpdateGroupVersionLazy(ws.RootPath()[1:], cached.Once(cached.Func(func() (*spec3.OpenAPI, string, error) {
			return o.buildV3(ws)
		})))
	}
	return nil
}

// buildV2 builds the v2 document of every route.
func (o lazyOpenAPI) buildV2() (*spec.Swagger, string, error) {
	swagger, err := builder2.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices(o.container.RegisteredWebServices()), o.v2)
	if err != nil {
		return nil, "", fmt.Errorf("building the OpenAPI v2 document: %w", err)
	}
	swagger.Definitions = handler.PruneDefaults(swagger.Definitions)
	// The handler derives the served ETag from the serialized document.
	return swagger, "v2", nil
}

// buildV3 builds the v3 document of one group version's routes.
func (o lazyOpenAPI) buildV3(ws *restful.WebService) (*spec3.OpenAPI, string, error) {
	doc, err := builder3.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices([]*restful.WebService{ws}), o.v3)
	if err != nil {
		return nil, "", fmt.Errorf("building the OpenAPI v3 document of %s: %w", ws.RootPath(), err)
	}
	return doc, "v3", nil
}
