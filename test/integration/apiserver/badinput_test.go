package apiserver

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestBadInput sends malformed and invalid requests: each gets a clear 4xx,
// nothing is stored, and the server keeps serving.
func TestBadInput(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	const backups = "/apis/velero.io/v1/namespaces/" + ns + "/backups"
	huge := `{"apiVersion":"velero.io/v1","kind":"Backup","metadata":{"name":"huge","annotations":{"a":"` +
		strings.Repeat("x", 4<<20) + `"}}}`
	cases := []struct {
		name        string
		path        string
		contentType string
		body        string
		wantCode    int
		wantInBody  []string
	}{
		{name: "malformed JSON", path: backups, contentType: "application/json",
			body: `{"apiVersion":"velero.io/v1","kind":"Backup","metadata":{"name":"x"`, wantCode: http.StatusBadRequest},
		{name: "malformed YAML", path: backups, contentType: "application/yaml",
			body: "apiVersion: velero.io/v1\nkind: Backup\nmetadata:\n  name: [x\n", wantCode: http.StatusBadRequest},
		{name: "unknown fields, strict", path: backups + "?fieldValidation=Strict", contentType: "application/json",
			body:     `{"apiVersion":"velero.io/v1","kind":"Backup","metadata":{"name":"x"},"spec":{"bogus":1,"includedNamespaces":["a"],"ttll":"1h"}}`,
			wantCode: http.StatusBadRequest, wantInBody: []string{`unknown field \"spec.bogus\"`, `unknown field \"spec.ttll\"`}},
		{name: "wrong apiVersion", path: backups, contentType: "application/json",
			body: `{"apiVersion":"velero.io/v2","kind":"Backup","metadata":{"name":"x"}}`, wantCode: http.StatusBadRequest},
		{name: "wrong kind", path: backups, contentType: "application/json",
			body: `{"apiVersion":"velero.io/v1","kind":"Schedule","metadata":{"name":"x"},"spec":{"schedule":"@daily"}}`, wantCode: http.StatusBadRequest},
		{name: "invalid name", path: backups, contentType: "application/json",
			body: `{"apiVersion":"velero.io/v1","kind":"Backup","metadata":{"name":"Not_A_Name"}}`, wantCode: http.StatusUnprocessableEntity,
			wantInBody: []string{`"field":"metadata.name"`}},
		{name: "wrong type for a field", path: backups, contentType: "application/json",
			body: `{"apiVersion":"velero.io/v1","kind":"Backup","metadata":{"name":"x"},"spec":{"ttl":42}}`, wantCode: http.StatusBadRequest},
		{name: "oversized object", path: backups, contentType: "application/json", body: huge, wantCode: http.StatusRequestEntityTooLarge},
		{name: "unknown resource", path: "/apis/velero.io/v1/namespaces/" + ns + "/frobs", contentType: "application/json",
			body: `{}`, wantCode: http.StatusNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, s, s.Config, http.MethodPost, c.path, c.contentType, []byte(c.body))
			if r.code != c.wantCode {
				t.Fatalf("got %d %s, want %d", r.code, truncate(r.body), c.wantCode)
			}
			for _, w := range c.wantInBody {
				if !strings.Contains(r.body, w) {
					t.Errorf("response %s does not contain %s", truncate(r.body), w)
				}
			}
			if !strings.Contains(r.body, `"kind":"Status"`) && c.wantCode != http.StatusRequestEntityTooLarge {
				t.Errorf("the error is not a Status object: %s", truncate(r.body))
			}
		})
	}

	// Unknown fields without strict validation: accepted, dropped, warned about.
	r := do(t, s, s.Config, http.MethodPost, backups, "application/json",
		[]byte(`{"apiVersion":"velero.io/v1","kind":"Backup","metadata":{"name":"lenient"},"spec":{"bogus":1}}`))
	if r.code != http.StatusCreated || !strings.Contains(r.warning, "unknown field") || !strings.Contains(r.warning, "spec.bogus") {
		t.Errorf("lenient create: %d, warning %q", r.code, r.warning)
	}

	// Nothing but the lenient backup was stored, and the server still serves.
	list, err := s.Clientset.VeleroV1().Backups(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list after bad input: %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "lenient" {
		var names []string
		for _, b := range list.Items {
			names = append(names, b.Name)
		}
		t.Errorf("stored backups %v, want only [lenient]", names)
	}
}

func truncate(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return string(bytes.TrimSpace([]byte(s)))
}

// TestAdminNamespaceOnly: the Velero objects the engines process are
// refused outside the admin namespace, with the reason.
func TestAdminNamespaceOnly(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	for _, c := range []struct{ resource, body string }{
		{"backups", `{"apiVersion":"velero.io/v1","kind":"Backup","metadata":{"name":"x"}}`},
		{"schedules", `{"apiVersion":"velero.io/v1","kind":"Schedule","metadata":{"name":"x"},"spec":{"schedule":"@daily"}}`},
		{"restores", `{"apiVersion":"velero.io/v1","kind":"Restore","metadata":{"name":"x"},"spec":{"backupName":"b"}}`},
		{"deletebackuprequests", `{"apiVersion":"velero.io/v1","kind":"DeleteBackupRequest","metadata":{"name":"x"},"spec":{"backupName":"b"}}`},
		{"backupstoragelocations", `{"apiVersion":"velero.io/v1","kind":"BackupStorageLocation","metadata":{"name":"x"},"spec":{"provider":"filesystem","objectStorage":{"bucket":"/tmp/x"}}}`},
	} {
		r := do(t, s, s.Config, http.MethodPost, "/apis/velero.io/v1/namespaces/apps/"+c.resource, "application/json", []byte(c.body))
		if r.code != http.StatusUnprocessableEntity || !strings.Contains(r.body, `"field":"metadata.namespace"`) ||
			!strings.Contains(r.body, `admin namespace \"backstop-system\"`) {
			t.Errorf("%s outside the admin namespace: %d %s", c.resource, r.code, truncate(r.body))
		}
	}
}
