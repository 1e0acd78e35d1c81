package apiserver

import (
	"context"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/backstop-io/backstop/pkg/apis/console"
	consoleregistry "github.com/backstop-io/backstop/pkg/registry/console/console"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestConsole: every namespace has a console, ui, whose static subresource
// serves the web console's pages with their security headers, to whoever
// may view the namespace (view, edit, admin aggregate it) and to no one
// else: a tenant opens its own namespace's console, not another's.
func TestConsole(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	alice := newTenant(t, s, "alice", "alice")
	aliceConfig, err := clientcmd.BuildConfigFromFlags("", alice.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	get := func(cfg *rest.Config, path string) response {
		t.Helper()
		return do(t, s, cfg, http.MethodGet, path, "", nil)
	}

	t.Run("the console of a namespace says where its pages are", func(t *testing.T) {
		c, err := s.Clientset.ConsoleV1().Consoles("alice").Get(ctx, console.ConsoleName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := "/apis/console.backstop.io/v1/namespaces/alice/consoles/ui/static/"; c.Status.Path != want {
			t.Errorf("status.path %q, want %q", c.Status.Path, want)
		}
		if _, err := s.Clientset.ConsoleV1().Consoles("alice").Get(ctx, "other", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a console named other: %v, want NotFound", err)
		}
		out, err := s.Kubectl(nil, "get", "console", "ui", "-n", "alice", "-o", "jsonpath={.status.path}")
		if err != nil || out != c.Status.Path {
			t.Errorf("kubectl get console ui: %q, %v", out, err)
		}
		// No list: backups, which take every listable resource, leave
		// consoles out.
		if _, err := s.Clientset.ConsoleV1().RESTClient().Get().Namespace("alice").Resource("consoles").DoRaw(ctx); !apierrors.IsNotFound(err) {
			t.Errorf("a list of consoles: %v, want 404 (no such route)", err)
		}
	})

	t.Run("the pages, with their types and security headers", func(t *testing.T) {
		for _, tc := range []struct{ path, wantType, wantBody string }{
			{"", "text/html", `<base href="static/">`},
			{"/", "text/html", `<base href="./">`},
			{"/app.js", "text/javascript", "getElementById"},
			{"/app.css", "text/css", "body"},
		} {
			resp := get(s.Config, strings.TrimSuffix(consoleregistry.Path("alice"), "/")+tc.path)
			if resp.code != http.StatusOK || !strings.HasPrefix(resp.header.Get("Content-Type"), tc.wantType) || !strings.Contains(resp.body, tc.wantBody) {
				t.Errorf("static%s: %d %q, want 200 %s holding %q", tc.path, resp.code, resp.header.Get("Content-Type"), tc.wantType, tc.wantBody)
			}
			if csp := resp.header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self'") {
				t.Errorf("static%s: Content-Security-Policy %q", tc.path, csp)
			}
		}
		if resp := get(s.Config, consoleregistry.Path("alice")+"missing.js"); resp.code != http.StatusNotFound {
			t.Errorf("a file the bundle does not have: %d, want 404", resp.code)
		}
		if resp := get(s.Config, "/apis/console.backstop.io/v1/namespaces/alice/consoles/other/static/"); resp.code != http.StatusNotFound {
			t.Errorf("the pages of a console named other: %d, want 404", resp.code)
		}
	})

	t.Run("a tenant opens its own namespace's console, not another's", func(t *testing.T) {
		if resp := get(aliceConfig, consoleregistry.Path("alice")); resp.code != http.StatusOK {
			t.Errorf("alice's console, as alice: %d, want 200", resp.code)
		}
		if resp := get(aliceConfig, consoleregistry.Path("bob")); resp.code != http.StatusForbidden {
			t.Errorf("bob's console, as alice: %d, want 403", resp.code)
		}
		if _, err := alice.client.ConsoleV1().Consoles("bob").Get(ctx, console.ConsoleName, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("bob's console object, as alice: %v, want 403", err)
		}
	})
}
