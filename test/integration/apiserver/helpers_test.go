package apiserver

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"

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

// setBackupPhase sets a backup's phase through the status subresource, as
// the backup engine would, retrying when an engine wrote it meanwhile.
func setBackupPhase(t *testing.T, s *framework.Server, name string, phase velerov1.BackupPhase) *velerov1.Backup {
	t.Helper()
	ctx := context.Background()
	var out *velerov1.Backup
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		b.Status.Phase = phase
		out, err = s.Clientset.VeleroV1().Backups(ns).UpdateStatus(ctx, b, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("setting backup %s to %s: %v", name, phase, err)
	}
	return out
}

// withoutBackupEngine starts a server whose backups are not run: tests of
// the queue, deletion, downloads and the API make the backup engine's
// transitions themselves. Backup sync is off too: it would delete the
// Completed backups these tests make, which have no files in their
// location.
var withoutBackupEngine = []string{"--disable-controllers=backup,backup-sync"}
