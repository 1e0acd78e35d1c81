package apiserver

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/virt/virttest"

	"github.com/backstop-io/backstop/test/integration/conformance"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// response is a raw HTTP answer.
type response struct {
	code    int
	body    string
	warning string
	header  http.Header
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
	return response{code: resp.StatusCode, body: string(b), warning: resp.Header.Get("Warning"), header: resp.Header}
}

func gzipReader(s string) (io.Reader, error) { return gzip.NewReader(strings.NewReader(s)) }

// setBackupPhase brings a backup to phase through the status subresource,
// as the engines would: one transition of velerov1.BackupLifecycle at a
// time, as an engine (framework.EngineClientset), from wherever the
// running engines have taken it meanwhile.
func setBackupPhase(t *testing.T, s *framework.Server, name string, phase velerov1.BackupPhase) *velerov1.Backup {
	t.Helper()
	return walkBackup(t, s, name, phase, nil)
}

// walkBackup is setBackupPhase; mutate, if set, changes the status with
// the last step.
func walkBackup(t *testing.T, s *framework.Server, name string, phase velerov1.BackupPhase, mutate func(*velerov1.BackupStatus)) *velerov1.Backup {
	t.Helper()
	ctx := context.Background()
	backups := s.EngineClientset().VeleroV1().Backups(ns)
	for range 50 {
		b, err := backups.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("setting backup %s to %s: %v", name, phase, err)
		}
		path := velerov1.BackupLifecycle.Path(b.Status.Phase, phase)
		if path == nil {
			t.Fatalf("backup %s cannot go from %q to %s", name, b.Status.Phase, phase)
		}
		if len(path) == 0 && mutate == nil {
			return b
		}
		if len(path) == 0 || len(path) == 1 {
			b.Status.Phase = phase
			if mutate != nil {
				mutate(&b.Status)
			}
		} else {
			b.Status.Phase = path[0]
		}
		out, err := backups.UpdateStatus(ctx, b, metav1.UpdateOptions{})
		switch {
		case apierrors.IsConflict(err):
			continue // an engine moved it: walk on from there
		case err != nil:
			t.Fatalf("setting backup %s to %s (step %s): %v", name, phase, b.Status.Phase, err)
		case len(path) <= 1:
			return out
		}
	}
	t.Fatalf("setting backup %s to %s: still moving after 50 steps", name, phase)
	return nil
}

// withoutBackupEngine starts a server whose backups are not run: tests of
// the queue, deletion, downloads and the API make the backup engine's
// transitions themselves. Backup sync is off too: it would delete the
// Completed backups these tests make, which have no files in their
// location.
var withoutBackupEngine = []string{"--disable-controllers=backup,backup-sync"}

// apiServer is the server the tests of the API alone share (without the
// backup engine, as withoutBackupEngine): started once for them. Each of
// them names its objects so that no other uses those names. They run one
// after another (a shared server serves one test at a time); every other
// test of this package starts a server of its own and runs beside the
// others (t.Parallel). The system libvirt is shared too: a server's backup
// engine takes every domain named <namespace>_<vm> of a namespace it backs
// up, so a test that runs VMs keeps them in namespaces of its own, which
// no other test's backup takes (by name, glob or all namespaces).
func apiServer(t *testing.T) *framework.Server {
	return framework.Shared(t, "api", framework.Options{Args: withoutBackupEngine})
}

// invalidAt reports whether err is a 422 with a cause at field whose
// message contains detail.
func invalidAt(err error, field, detail string) bool {
	return conformance.InvalidAt(err, field, detail)
}

func TestMain(m *testing.M) { os.Exit(framework.Main(m)) }

// vmVolumeRoot is the volume root of a test of VM disk backups, which run
// on Pebble only (framework.StorageIndependent).
func vmVolumeRoot(t *testing.T) string {
	t.Helper()
	framework.StorageIndependent(t, "VM disk backups (libvirt, QEMU and the volumes)")
	return virttest.Dir(t)
}
