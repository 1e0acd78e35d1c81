package apiserver

import (
	"context"
	"net/http"
	"strings"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
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
// server's CA (user = CN, groups = O, plus system:authenticated), and lets anonymous requests reach the
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
	// As kube-apiserver: every authenticated user is in system:authenticated,
	// which the bootstrap policy binds discovery and self-reviews to.
	return union.New(group.NewAuthenticatedGroupAdder(certs), public)
}

// StandaloneAuthorizer decides the requests of a standalone server as
// kube-apiserver does with --authorization-mode=RBAC: system:masters may do
// anything, then RBAC decides (kube's bootstrap policy lets every
// authenticated user read discovery, health and their own access). The
// public paths are allowed to anyone before RBAC is asked: health probes
// need no credentials, and download links carry their own signature.
func StandaloneAuthorizer(rbac authorizer.Authorizer) (authorizer.Authorizer, error) {
	return authorizerunion.New(
		authorizerunion.NamedAuthorizer{AuthorizerName: "system-masters", Authorizer: authorizerfactory.NewPrivilegedGroups(user.SystemPrivilegedGroup)},
		authorizerunion.NamedAuthorizer{AuthorizerName: "public-paths", Authorizer: authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
			if !a.IsResourceRequest() && a.GetVerb() == "get" && isPublicPath(a.GetPath()) {
				return authorizer.DecisionAllow, "health endpoints and download links are public", nil
			}
			return authorizer.DecisionNoOpinion, "", nil
		})},
		authorizerunion.NamedAuthorizer{AuthorizerName: "rbac", Authorizer: rbac},
	)
}
