package apiserver

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

// TestBackupCancelSubresource: POST backups/<name>/cancel and spec.cancel
// request cancellation; a finished backup refuses both with 409.
func TestBackupCancelSubresource(t *testing.T) {
	s := apiServer(t)
	ctx := context.Background()
	backups := s.Clientset.VeleroV1().Backups(ns)
	cancel := func(name string) (*velerov1.Backup, error) {
		out := &velerov1.Backup{}
		err := s.Clientset.VeleroV1().RESTClient().Post().Namespace(ns).Resource("backups").Name(name).SubResource("cancel").Do(ctx).Into(out)
		return out, err
	}
	for _, name := range []string{"to-cancel", "cancel-done"} {
		if _, err := backups.Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	done := setBackupPhase(t, s, "cancel-done", velerov1.BackupPhaseCompleted)

	b, err := cancel("to-cancel")
	if err != nil || !b.Spec.Cancel || b.Name != "to-cancel" {
		t.Fatalf("cancel: %v, returned %+v", err, b.Spec)
	}
	if b, err = cancel("to-cancel"); err != nil || !b.Spec.Cancel {
		t.Errorf("second cancel (idempotent): %v", err)
	}

	if _, err := cancel("cancel-done"); !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "a finished backup cannot be cancelled") {
		t.Errorf("cancel of a completed backup: %v, want 409 Conflict", err)
	}
	if _, err := backups.Patch(ctx, "cancel-done", types.MergePatchType, []byte(`{"spec":{"cancel":true}}`), metav1.PatchOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("spec.cancel on a completed backup: %v, want 409 Conflict", err)
	}
	if got, _ := backups.Get(ctx, "cancel-done", metav1.GetOptions{}); got.Spec.Cancel || got.Generation != done.Generation {
		t.Errorf("the refused cancellation changed the backup: cancel=%v generation %d→%d", got.Spec.Cancel, done.Generation, got.Generation)
	}
	if _, err := cancel("missing"); !apierrors.IsNotFound(err) {
		t.Errorf("cancel of a missing backup: %v, want 404", err)
	}
}

// TestLogsSubresource: backups/<name>/logs and restores/<name>/logs serve
// the stored logs as text, authorized like any subresource.
func TestLogsSubresource(t *testing.T) {
	s := apiServer(t)
	ctx := context.Background()
	bucket := createFilesystemLocationAt(t, s, "local", filepath.Join(s.DataDir, "logs-bucket"))
	// Its location named: another default may still be marked (the new
	// one unmarks it asynchronously).
	if _, err := s.Clientset.VeleroV1().Backups(ns).Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "logs-b1", Namespace: ns},
		Spec: velerov1.BackupSpec{StorageLocation: "local"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Clientset.VeleroV1().Restores(ns).Create(ctx, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "logs-r1", Namespace: ns},
		Spec: velerov1.RestoreSpec{BackupName: "logs-b1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	logs := func(resource, name string) (string, error) {
		b, err := s.Clientset.VeleroV1().RESTClient().Get().Namespace(ns).Resource(resource).Name(name).SubResource("logs").DoRaw(ctx)
		return string(b), err
	}

	if r := do(t, s, s.Config, http.MethodGet, "/apis/velero.io/v1/namespaces/"+ns+"/backups/logs-b1/logs", "", nil); r.code != http.StatusNotFound ||
		!strings.Contains(r.body, "no log stored yet") {
		t.Errorf("logs before any were stored: %d %s, want 404 saying so", r.code, truncate(r.body))
	}
	putGzip(t, filepath.Join(bucket, "backups", "logs-b1", "logs-b1-logs.gz"), "line one\nline two\n")
	putGzip(t, filepath.Join(bucket, "restores", "logs-r1", "restore-logs-r1-logs.gz"), "restored fine\n")
	if out, err := logs("backups", "logs-b1"); err != nil || out != "line one\nline two\n" {
		t.Errorf("backup logs: %q, %v", out, err)
	}
	if out, err := logs("restores", "logs-r1"); err != nil || out != "restored fine\n" {
		t.Errorf("restore logs: %q, %v", out, err)
	}
	// The same as log, from an offset, refused a bad one.
	for _, resource := range []string{"backups", "restores"} {
		name := map[string]string{"backups": "logs-b1", "restores": "logs-r1"}[resource]
		if b, err := s.Clientset.VeleroV1().RESTClient().Get().Namespace(ns).Resource(resource).Name(name).SubResource("log").Param("offset", "5").DoRaw(ctx); err != nil ||
			string(b) != map[string]string{"backups": "one\nline two\n", "restores": "red fine\n"}[resource] {
			t.Errorf("%s/%s/log?offset=5: %q, %v", resource, name, b, err)
		}
		if _, err := s.Clientset.VeleroV1().RESTClient().Get().Namespace(ns).Resource(resource).Name(name).SubResource("log").Param("offset", "-1").DoRaw(ctx); !apierrors.IsBadRequest(err) {
			t.Errorf("%s/%s/log?offset=-1: %v, want 400", resource, name, err)
		}
	}
	if _, err := logs("backups", "missing"); !apierrors.IsNotFound(err) {
		t.Errorf("logs of a missing backup: %v, want 404", err)
	}
	// kubectl reads them too.
	if out, err := s.Kubectl(nil, "get", "--raw", "/apis/velero.io/v1/namespaces/"+ns+"/backups/logs-b1/logs"); err != nil || !strings.Contains(out, "line two") {
		t.Errorf("kubectl get --raw .../logs: %q, %v", out, err)
	}
	// Authorized like any subresource.
	alice := s.IssueKubeconfig("alice")
	if _, err := s.KubectlAs(alice, nil, "get", "--raw", "/apis/velero.io/v1/namespaces/"+ns+"/backups/logs-b1/logs"); err == nil ||
		!strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("logs for a user without rights: %v, want Forbidden", err)
	}
}

// TestCrossOriginWrites: a browser's write sent by a page of another site
// (through `kubectl proxy`, which answers any page with the user's
// credentials) is refused with 403 before it reaches the API, whatever
// its form: an HTML form's POST to backups/<name>/cancel (no preflight),
// a same-site page of another port, an old browser's Origin without
// Sec-Fetch-Site, a DELETE; the backup is left as it was. Reads, the
// console's own same-origin writes and clients that are not browsers pass.
func TestCrossOriginWrites(t *testing.T) {
	s := apiServer(t)
	ctx := context.Background()
	backups := s.Clientset.VeleroV1().Backups(ns)
	if _, err := backups.Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rest := s.Clientset.VeleroV1().RESTClient()
	form := func(headers map[string]string) error {
		req := rest.Post().Namespace(ns).Resource("backups").Name("forged").SubResource("cancel").
			SetHeader("Content-Type", "application/x-www-form-urlencoded").Body([]byte("confirm=yes"))
		for k, v := range headers {
			req.SetHeader(k, v)
		}
		return req.Do(ctx).Error()
	}
	for _, tc := range []struct {
		name    string
		request func() error
	}{
		{"a form of another site", func() error {
			return form(map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://attacker.example"})
		}},
		{"a page of another port", func() error {
			return form(map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:9999"})
		}},
		{"an old browser's Origin", func() error { return form(map[string]string{"Origin": "https://attacker.example"}) }},
		{"a DELETE of another site", func() error {
			return rest.Delete().Namespace(ns).Resource("backups").Name("forged").SetHeader("Sec-Fetch-Site", "cross-site").Do(ctx).Error()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.request(); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cross-origin") {
				t.Errorf("%v, want 403 refusing a cross-origin write", err)
			}
			b, err := backups.Get(ctx, "forged", metav1.GetOptions{})
			if err != nil || b.Spec.Cancel {
				t.Errorf("the backup after the refused request: %v, cancel=%v", err, b != nil && b.Spec.Cancel)
			}
		})
	}
	t.Run("reads and same-origin writes pass", func(t *testing.T) {
		if err := rest.Get().Namespace(ns).Resource("backups").Name("forged").SetHeader("Sec-Fetch-Site", "cross-site").Do(ctx).Error(); err != nil {
			t.Errorf("a cross-site read: %v (reads are CORS's to guard: no Access-Control-Allow-Origin is ever sent)", err)
		}
		out := &velerov1.Backup{}
		if err := rest.Post().Namespace(ns).Resource("backups").Name("forged").SubResource("cancel").SetHeader("Sec-Fetch-Site", "same-origin").
			Do(ctx).Into(out); err != nil || !out.Spec.Cancel {
			t.Errorf("a same-origin cancel: %v, cancel=%v", err, out.Spec.Cancel)
		}
	})
}
