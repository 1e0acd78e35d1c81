// Package console is the registry of console.backstop.io consoles: every
// namespace has one console, named ui, that nothing stores (get answers
// it; there is no list, so that backups, Velero's too, which take every
// listable resource, leave it out), and consoles/ui/static/<path> serves the web console's pages
// (pkg/console) to whoever may get that subresource in the namespace. The
// pages then call the API as their user: what they show is what the user's
// own rights let them read.
package console

import (
	"context"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/backstop-io/backstop/pkg/apis/console"
	consolev1 "github.com/backstop-io/backstop/pkg/apis/console/v1"
)

// Path is the path of namespace's console start page.
func Path(namespace string) string {
	return "/apis/" + consolev1.SchemeGroupVersion.String() + "/namespaces/" + namespace + "/" +
		console.ResourceConsoles + "/" + console.ConsoleName + "/" + console.SubresourceStatic + "/"
}

// REST answers the console of a namespace.
type REST struct {
	rest.TableConvertor
}

// NewREST returns the consoles' storage.
func NewREST() *REST {
	return &REST{TableConvertor: rest.NewDefaultTableConvertor(console.Resource(console.ResourceConsoles))}
}

var (
	_ rest.Getter               = &REST{}
	_ rest.Scoper               = &REST{}
	_ rest.SingularNameProvider = &REST{}
)

// New returns an empty console.
func (r *REST) New() runtime.Object { return &console.Console{} }

// Destroy has nothing to release.
func (r *REST) Destroy() {}

// NamespaceScoped: a console per namespace.
func (r *REST) NamespaceScoped() bool { return true }

// GetSingularName is console.
func (r *REST) GetSingularName() string { return "console" }

// Get answers the namespace's console ui; any other name is NotFound.
func (r *REST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	namespace, ok := genericapirequest.NamespaceFrom(ctx)
	if !ok || namespace == "" || name != console.ConsoleName {
		return nil, apierrors.NewNotFound(console.Resource(console.ResourceConsoles), name)
	}
	return of(namespace), nil
}

func of(namespace string) *console.Console {
	return &console.Console{ObjectMeta: metav1.ObjectMeta{Name: console.ConsoleName, Namespace: namespace},
		Status: console.ConsoleStatus{Path: Path(namespace)}}
}

// StaticREST is consoles/ui/static/<path>: GET serves the console's pages.
type StaticREST struct {
	// Pages serves a page: its path below static/ ("" for the start page).
	Pages http.Handler
}

var (
	_ rest.Connecter       = &StaticREST{}
	_ rest.StorageMetadata = &StaticREST{}
)

// New returns an empty console.
func (s *StaticREST) New() runtime.Object { return &console.Console{} }

// Destroy has nothing to release.
func (s *StaticREST) Destroy() {}

// ConnectMethods: GET only.
func (s *StaticREST) ConnectMethods() []string { return []string{http.MethodGet} }

// NewConnectOptions: a path below the subresource, read from the URL by
// Connect (no options object).
func (s *StaticREST) NewConnectOptions() (runtime.Object, bool, string) { return nil, true, "" }

// ProducesMIMETypes: pages, scripts and styles.
func (s *StaticREST) ProducesMIMETypes(string) []string {
	return []string{"text/html", "text/javascript", "text/css"}
}

// ProducesObject: a file, not an object.
func (s *StaticREST) ProducesObject(string) any { return "" }

// Connect serves the page the URL names below consoles/ui/static.
func (s *StaticREST) Connect(ctx context.Context, name string, _ runtime.Object, _ rest.Responder) (http.Handler, error) {
	namespace, _ := genericapirequest.NamespaceFrom(ctx)
	if name != console.ConsoleName {
		return nil, apierrors.NewNotFound(console.Resource(console.ResourceConsoles), name)
	}
	prefix := strings.TrimSuffix(Path(namespace), "/")
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rest, ok := strings.CutPrefix(req.URL.Path, prefix)
		if !ok {
			http.NotFound(w, req)
			return
		}
		page := req.Clone(req.Context())
		page.URL.Path = rest // "", "/" or "/<file>"
		s.Pages.ServeHTTP(w, page)
	}), nil
}
