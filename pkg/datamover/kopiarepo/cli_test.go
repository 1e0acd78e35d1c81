package kopiarepo

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kopia/kopia/repo/blob"

	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestKopiaCLIReadsTheRepository: the repository the data mover writes in
// an S3 bucket (the loopback S3 server) is a kopia repository as Velero
// keeps it: the kopia CLI built from the same module connects to it at
// <prefix>/kopia/<namespace>/ with the password, as default@default, lists
// the snapshots of snapshot-data-upload-download/kopia/<namespace>/<claim>
// and restores one byte for byte.
func TestKopiaCLIReadsTheRepository(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the kopia CLI and versitygw that make tools builds: not in the fast tier (make test-unit); make test runs it")
	}
	ctx := context.Background()
	srv := framework.StartS3(t)
	prefix := Prefix("cluster-a", "shop")
	st, endpoint := s3Storage(t, srv, "velero", prefix)
	volume := t.TempDir()
	files := map[string][]byte{"README.txt": []byte("orders\n"), "data/orders.json": []byte(`{"orders":[1,2,3]}`)}
	writeTree(t, volume, files)
	r, err := Open(ctx, Config{Storage: st, Password: "static-passw0rd", Dir: t.TempDir(), Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	up, err := r.Upload(ctx, volume, SourcePath("shop", "data"), map[string]string{"velero.io/async-operation-id": "du-1"}, nil)
	if err != nil {
		t.Fatal(err)
	}

	config := filepath.Join(t.TempDir(), "kopia.config")
	kopia := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, framework.Binary(t, "kopia"), append(args, "--config-file="+config)...)
		cmd.Env = append(os.Environ(), "KOPIA_CHECK_FOR_UPDATES=false", "KOPIA_PASSWORD=static-passw0rd", "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kopia %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	connect := []string{"repository", "connect", "s3", "--bucket=velero", "--prefix=" + prefix, "--endpoint=" + endpoint.Host,
		"--access-key=" + srv.AccessKey, "--secret-access-key=" + srv.SecretKey, "--region=us-east-1",
		"--override-username=default", "--override-hostname=default", "--cache-directory=" + t.TempDir()}
	if endpoint.Scheme == "http" {
		connect = append(connect, "--disable-tls")
	}
	kopia(connect...)

	var listed []struct {
		ID     string `json:"id"`
		Source struct {
			Host, UserName, Path string
		} `json:"source"`
		Tags map[string]string `json:"tags"`
	}
	if err := json.Unmarshal([]byte(kopia("snapshot", "list", "--all", "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, s := range listed {
		ids = append(ids, s.ID)
		if s.ID == up.SnapshotID && (s.Source.Path != "snapshot-data-upload-download/kopia/shop/data" || s.Source.UserName != "default" || s.Source.Host != "default" ||
			s.Tags[RequesterTag] != Requester || s.Tags[UploaderTag] != Uploader) {
			t.Errorf("kopia lists the snapshot as %+v", s)
		}
	}
	if !slices.Contains(ids, up.SnapshotID) {
		t.Fatalf("kopia snapshot list: %v, want %s", ids, up.SnapshotID)
	}
	target := t.TempDir()
	kopia("snapshot", "restore", up.SnapshotID, target)
	sameTree(t, "restored by the kopia CLI", files, readTree(t, target))
}

// s3Storage makes a bucket of srv and returns the blob storage of prefix
// in it, and srv's endpoint.
func s3Storage(t *testing.T, srv *framework.S3Server, bucket, prefix string) (blob.Storage, *url.URL) {
	t.Helper()
	srv.MakeBucket(t, bucket)
	endpoint, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	st, err := S3Storage(context.Background(), S3{Bucket: bucket, Prefix: prefix, Endpoint: endpoint.Host, DisableTLS: endpoint.Scheme == "http",
		Region: "us-east-1", AccessKeyID: srv.AccessKey, SecretKey: srv.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	return st, endpoint
}
