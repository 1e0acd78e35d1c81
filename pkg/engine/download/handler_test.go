package download

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	clocktesting "k8s.io/utils/clock/testing"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// secretReaders allows get on team-a's Secrets to the users named.
func secretReaders(users ...string) authorizer.Authorizer {
	return authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		for _, u := range users {
			if a.GetUser().GetName() == u && a.GetVerb() == "get" && a.GetResource() == "secrets" && a.GetNamespace() == "team-a" {
				return authorizer.DecisionAllow, "", nil
			}
		}
		return authorizer.DecisionNoOpinion, "", nil
	})
}

// TestHandlerRevocationAndSecrets: a link opens only while its download
// request exists with the UID it was made for; a link to a tenant's backup
// contents opens only for a user who may get the tenant's Secrets, never
// anonymously, whatever the signature says.
func TestHandlerRevocationAndSecrets(t *testing.T) {
	dir := t.TempDir()
	key, err := objectstore.NewLayout("").Key(velerov1.DownloadTargetKindBackupContents, "b1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, key)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, key), []byte("contents"), 0o644); err != nil {
		t.Fatal(err)
	}
	signer, err := NewSignerFromFile(filepath.Join(t.TempDir(), "key"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	requests := map[string]types.UID{"r1": "u1"}
	h := &Handler{Signer: signer, Clock: clocktesting.NewFakePassiveClock(now), Authorizer: secretReaders("alice"),
		Locations: objectstore.Locations{Get: func(_ context.Context, _, name string) (*velerov1.BackupStorageLocation, error) {
			return &velerov1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: velerov1.BackupStorageLocationSpec{Provider: objectstore.ProviderFilesystem,
					StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: dir}}}}, nil
		}},
		Requests: func(_ context.Context, _, name string) (types.UID, error) {
			uid, ok := requests[name]
			if !ok {
				return "", apierrors.NewNotFound(schema.GroupResource{Group: "velero.io", Resource: "downloadrequests"}, name)
			}
			return uid, nil
		}}
	links := Links{Signer: signer, BaseURL: "https://backstop", SecretsInBackups: true}
	fetch := func(link string, u user.Info) int {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, link, nil)
		if u != nil {
			req = req.WithContext(genericapirequest.WithUser(req.Context(), u))
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	alice, bob := &user.DefaultInfo{Name: "alice"}, &user.DefaultInfo{Name: "bob"}
	plain := links.For(Link{Namespace: "admin", Request: "r1", UID: "u1", Location: "default", Kind: velerov1.DownloadTargetKindBackupContents, Name: "b1"}, now.Add(time.Minute))
	tenant := links.For(Link{Namespace: "admin", Request: "r1", UID: "u1", Location: "default", Kind: velerov1.DownloadTargetKindBackupContents, Name: "b1", SecretsOf: "team-a"}, now.Add(time.Minute))
	for _, c := range []struct {
		name string
		link string
		user user.Info
		want int
	}{
		{"the admin's link, anonymous", plain, nil, http.StatusOK},
		{"a tenant's contents link, anonymous", tenant, nil, http.StatusForbidden},
		{"a tenant's contents link, a user who may not read its Secrets", tenant, bob, http.StatusForbidden},
		{"a tenant's contents link, a user who may", tenant, alice, http.StatusOK},
		{"a tenant's contents link with its secrets mark dropped", strings.Replace(tenant, "secrets=team-a&", "", 1), nil, http.StatusForbidden},
		{"a link of another request's UID", strings.Replace(plain, "uid=u1", "uid=u2", 1), nil, http.StatusForbidden},
	} {
		if got := fetch(c.link, c.user); got != c.want {
			t.Errorf("%s: %d, want %d (%s)", c.name, got, c.want, c.link)
		}
	}
	// The request deleted, or made again under the same name: revoked.
	requests["r1"] = "u9"
	if got := fetch(plain, nil); got != http.StatusForbidden {
		t.Errorf("a link of a request made again: %d, want 403", got)
	}
	delete(requests, "r1")
	if got := fetch(plain, nil); got != http.StatusForbidden {
		t.Errorf("a link of a deleted request: %d, want 403", got)
	}
}
