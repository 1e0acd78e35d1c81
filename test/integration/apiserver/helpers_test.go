package apiserver

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/backstop-io/backstop/test/integration/framework"
)

// response is a raw HTTP answer.
type response struct {
	code    int
	body    string
	warning string
}

// do sends a raw request with the given client configuration.
func do(t *testing.T, s *framework.Server, cfg *rest.Config, method, path, contentType string, body []byte) response {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatalf("http client: %v", err)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, s.URL()+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{code: resp.StatusCode, body: string(b), warning: resp.Header.Get("Warning")}
}

func gzipReader(s string) (io.Reader, error) { return gzip.NewReader(strings.NewReader(s)) }
