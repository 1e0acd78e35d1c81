package apiserver

import (
	"context"
	"net/http"
	"strings"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authorizerunion "k8s.io/apiserver/pkg/authorization/union"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"

	"github.com/backstop-io/backstop/pkg/engine/download"
)

// publicPaths may be read without credentials: the health endpoints, so
// that probes work, and download links, which carry their own signature.
// Every other path needs an authenticated user. This is the
// anonymous-with-paths behaviour kube-apiserver offers through its
// authentication configuration.
var publicPaths = []string{"/healthz", "/livez", "/readyz", strings.TrimSuffix(download.PathPrefix, "/")}

func isPublicPath(p string) bool {
	for _, h := range publicPaths {
		if p == h || strings.HasPrefix(p, h+"/") {
			return true
		}
	}
	return false
}

// PublicPaths are the public paths in the form of the delegated
// authorizer's --authorization-always-allow-paths.
func PublicPaths() []string {
	var out []string
	for _, p := range publicPaths {
		out = append(out, p, p+"/*")
	}
	return out
}

// StandaloneAuthenticator authenticates client certificates signed by the
// server's CA (user = CN, groups = O), and lets anonymous requests reach the
// public paths only. Everything else without a valid certificate is 401.
func StandaloneAuthenticator(clientCA dynamiccertificates.CAContentProvider) authenticator.Request {
	certs := x509request.NewDynamic(clientCA.VerifyOptions, x509request.CommonNameUserConversion)
	public := authenticator.RequestFunc(func(req *http.Request) (*authenticator.Response, bool, error) {
		if !isPublicPath(req.URL.Path) {
			return nil, false, nil
		}
		return &authenticator.Response{User: &user.DefaultInfo{
			Name:   user.Anonymous,
			Groups: []string{user.AllUnauthenticated},
		}}, true, nil
	})
	return union.New(certs, public)
}

// discoveryPaths are what kube-apiserver's system:discovery role lets every
// authenticated user read: API discovery, OpenAPI and the version.
var discoveryPaths = []string{"/api", "/apis", "/openapi", "/version"}

func isDiscoveryPath(p string) bool {
	for _, d := range discoveryPaths {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// StandaloneAuthorizer allows everything to system:masters, the public
// paths to anyone, discovery to authenticated users (as kube-apiserver's
// system:discovery role does), and refuses every other request with 403.
func StandaloneAuthorizer() (authorizer.Authorizer, error) {
	return authorizerunion.New(
		authorizerunion.NamedAuthorizer{AuthorizerName: "system-masters", Authorizer: authorizerfactory.NewPrivilegedGroups(user.SystemPrivilegedGroup)},
		authorizerunion.NamedAuthorizer{AuthorizerName: "public-paths", Authorizer: authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
			if a.IsResourceRequest() || a.GetVerb() != "get" {
				return authorizer.DecisionNoOpinion, "", nil
			}
			if isPublicPath(a.GetPath()) {
				return authorizer.DecisionAllow, "health endpoints and download links are public", nil
			}
			if isDiscoveryPath(a.GetPath()) && a.GetUser() != nil && a.GetUser().GetName() != user.Anonymous {
				return authorizer.DecisionAllow, "discovery is open to authenticated users", nil
			}
			return authorizer.DecisionNoOpinion, "", nil
		})},
		authorizerunion.NamedAuthorizer{AuthorizerName: "deny", Authorizer: authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
			return authorizer.DecisionDeny, "only members of system:masters may use a standalone Backstop server", nil
		})},
	)
}
