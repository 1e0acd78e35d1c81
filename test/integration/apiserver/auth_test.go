package apiserver

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestStandaloneAuth: nobody gets in without a certificate signed by the
// server's CA (but for health probes), and only system:masters may act.
func TestStandaloneAuth(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	anon := rest.AnonymousClientConfig(s.Config)

	for _, c := range []struct {
		name string
		cfg  *rest.Config
		path string
		want int
	}{
		{"anonymous API request", anon, "/apis/velero.io/v1/namespaces/" + ns + "/backups", http.StatusUnauthorized},
		{"anonymous discovery", anon, "/apis", http.StatusUnauthorized},
		{"anonymous metrics", anon, "/metrics", http.StatusUnauthorized},
		{"anonymous healthz", anon, "/healthz", http.StatusOK},
		{"anonymous livez", anon, "/livez", http.StatusOK},
		{"anonymous readyz", anon, "/readyz", http.StatusOK},
		{"admin metrics", s.Config, "/metrics", http.StatusOK},
		{"admin readyz of the storage", s.Config, map[string]string{"pebble": "/readyz/pebble", "etcd3": "/readyz/etcd-readiness"}[framework.Storage()], http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, s, c.cfg, http.MethodGet, c.path, "", nil)
			if r.code != c.want {
				t.Errorf("GET %s: %d %s, want %d", c.path, r.code, truncate(r.body), c.want)
			}
		})
	}
	if r := do(t, s, s.Config, http.MethodGet, "/metrics", "", nil); !strings.Contains(r.body, "apiserver_request_total") {
		t.Errorf("/metrics has no apiserver_request_total")
	}
	// OpenAPI v2 and v3 are published with the Backstop additions.
	for _, path := range []string{"/openapi/v2", "/openapi/v3/apis/velero.io/v1"} {
		r := do(t, s, s.Config, http.MethodGet, path, "", nil)
		if r.code != http.StatusOK || !strings.Contains(r.body, "FinalizingCancelled") || !strings.Contains(r.body, `"x-kubernetes-group-version-kind"`) {
			t.Errorf("GET %s: %d, %d bytes, lacking the Backup schema with spec.cancel", path, r.code, len(r.body))
		}
	}
	// And in protobuf, as kubectl and kube-apiserver may ask for them.
	httpClient, err := rest.HTTPClientFor(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	for path, accept := range map[string]string{"/openapi/v2": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
		"/openapi/v3/apis/velero.io/v1": "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"} {
		req, err := http.NewRequest(http.MethodGet, s.URL()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", accept)
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), "protobuf") || !bytes.Contains(body, []byte("FinalizingCancelled")) {
			t.Errorf("GET %s as protobuf: %d %q, %d bytes, lacking the Backup schema", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
	}

	// A user outside system:masters is authenticated but refused.
	alice := s.IssueKubeconfig("alice", "tenants")
	out, err := s.KubectlAs(alice, nil, "get", "backups", "-n", ns)
	if err == nil || !strings.Contains(err.Error(), "Forbidden") || !strings.Contains(err.Error(), `User "alice" cannot list resource "backups"`) {
		t.Errorf("alice listing backups: out %q err %v, want Forbidden", out, err)
	}
	// A second admin issued by the subcommand may act.
	root := s.IssueKubeconfig("root", "system:masters")
	if _, err := s.KubectlAs(root, nil, "get", "backups", "-n", ns); err != nil {
		t.Errorf("a system:masters user issued by the kubeconfig subcommand: %v", err)
	}

	// A certificate from another CA is not accepted.
	other := framework.Start(t, framework.Options{})
	foreign := other.IssueKubeconfig("root", "system:masters")
	// Point the foreign credentials at the first server, trusting its CA.
	if _, err := s.KubectlAs(foreign, nil, "--server", s.URL(), "--insecure-skip-tls-verify", "get", "backups", "-n", ns); err == nil ||
		!strings.Contains(err.Error(), "Unauthorized") && !strings.Contains(err.Error(), "must be logged in") {
		t.Errorf("a certificate signed by another CA: err %v, want Unauthorized", err)
	}
}

// TestKubeconfigWithoutCA: the subcommand explains what is missing.
func TestKubeconfigWithoutCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(framework.Binary(t, "backstop-apiserver"), "kubeconfig", "--data-dir", dir, "--user", "bob")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "start the server once") {
		t.Errorf("kubeconfig without a CA: err %v, output %s", err, out)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the subcommand created files in an empty data dir: %v", entries)
	}
}

// TestSecondServerOnSameDataDir: the second process is refused at start
// with a clear message and the first keeps serving.
func TestSecondServerOnSameDataDir(t *testing.T) {
	t.Parallel()
	// The data directory's lock, taken before the storage is opened.
	s := framework.Start(t, framework.Options{Args: []string{"--storage-backend=pebble"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, framework.Binary(t, "backstop-apiserver"), "--data-dir", s.DataDir, "--secure-port", "0")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "locked by another process") {
		t.Errorf("second server: err %v, output %s", err, truncate(string(out)))
	}
	if r := do(t, s, s.Config, http.MethodGet, "/readyz", "", nil); r.code != http.StatusOK {
		t.Errorf("first server after the second was refused: readyz %d", r.code)
	}
}
