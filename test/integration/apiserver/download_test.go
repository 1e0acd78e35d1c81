package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestDownloadRequests: a DownloadRequest gets a signed link that anyone
// holding it can fetch (the velero CLI sends no credentials), that serves
// the object or 404, that is refused once tampered with, and that still
// opens after the server restarted.
func TestDownloadRequests(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{Args: withoutBackupEngine})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bucket := createFilesystemLocation(t, s, "local")

	bsl, err := s.Clientset.VeleroV1().BackupStorageLocations(ns).Get(ctx, "local", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The location carries the server's CA, which the CLI trusts for downloads.
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bsl.Spec.ObjectStorage.CACert) {
		t.Fatalf("the filesystem location has no CA certificate: %q", bsl.Spec.ObjectStorage.CACert)
	}
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	if _, err := s.Clientset.VeleroV1().Backups(ns).Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "b1", Namespace: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	putGzip(t, filepath.Join(bucket, "backups", "b1", "b1-logs.gz"), "the log")

	link := func(kind velerov1.DownloadTargetKind, name string) string {
		t.Helper()
		dr, err := s.Clientset.VeleroV1().DownloadRequests(ns).Create(ctx, &velerov1.DownloadRequest{
			ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-", Namespace: ns},
			Spec:       velerov1.DownloadRequestSpec{Target: velerov1.DownloadTarget{Kind: kind, Name: name}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			dr, err = s.Clientset.VeleroV1().DownloadRequests(ns).Get(ctx, dr.Name, metav1.GetOptions{})
			return err == nil && dr.Status.Phase == velerov1.DownloadRequestPhaseProcessed, err
		})
		if err != nil {
			t.Fatalf("download request not processed: %v", err)
		}
		if dr.Status.Expiration == nil || dr.Status.DownloadURL == "" {
			t.Fatalf("processed request lacks URL or expiration: %+v", dr.Status)
		}
		return dr.Status.DownloadURL
	}
	get := func(u string) (int, string) {
		t.Helper()
		resp, err := anon.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	logs := link(velerov1.DownloadTargetKindBackupLog, "b1")
	if code, body := get(logs); code != http.StatusOK || !isGzipOf(body, "the log") {
		t.Errorf("download of the log: %d %q", code, body)
	}
	if code, _ := get(link(velerov1.DownloadTargetKindBackupResults, "b1")); code != http.StatusNotFound {
		t.Errorf("download of a file the backup does not have: %d, want 404", code)
	}
	if code, _ := get(link(velerov1.DownloadTargetKindBackupLog, "no-such-backup")); code != http.StatusNotFound {
		t.Errorf("download for an unknown backup: %d, want 404", code)
	}

	// A tampered link: another object with the same signature, or no signature.
	u, err := url.Parse(logs)
	if err != nil {
		t.Fatal(err)
	}
	other := *u
	other.Path = filepath.Dir(u.Path) + "/other"
	if code, _ := get(other.String()); code != http.StatusForbidden {
		t.Errorf("link with a changed path: %d, want 403", code)
	}
	unsigned := *u
	unsigned.RawQuery = ""
	if code, _ := get(unsigned.String()); code != http.StatusForbidden {
		t.Errorf("link without signature: %d, want 403", code)
	}
	// Download links are the only anonymous API access.
	if code, _ := get(s.URL() + "/apis/velero.io/v1/namespaces/" + ns + "/backups"); code != http.StatusUnauthorized {
		t.Errorf("anonymous API request beside the download links: %d, want 401", code)
	}

	// The signing key is kept (<data-dir>/pki/download-signing.key): a link
	// minted before a restart opens after it.
	s.Restart(false)
	if code, body := get(logs); code != http.StatusOK || !isGzipOf(body, "the log") {
		t.Errorf("download of the log with a link minted before a restart: %d %q", code, body)
	}
}

func isGzipOf(body, want string) bool {
	r, err := gzipReader(body)
	if err != nil {
		return false
	}
	b, err := io.ReadAll(r)
	return err == nil && string(b) == want
}
