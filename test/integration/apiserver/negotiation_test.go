package apiserver

import (
	"context"
	"net/http"
	"testing"
)

// TestContentNegotiation: Backstop's groups serve JSON (and YAML, CBOR),
// not protobuf, which their types cannot encode. A client that prefers
// protobuf but accepts JSON (as kube-controller-manager's namespace
// deletion and garbage collector do) gets JSON, one that accepts protobuf
// alone a 406; never a 500. Metadata-only lists (PartialObjectMetadata,
// meta.k8s.io's types) and the RBAC group (kube's own types) are protobuf.
func TestContentNegotiation(t *testing.T) {
	s := apiServer(t)
	ctx := context.Background()
	const protobuf = "application/vnd.kubernetes.protobuf"
	for _, c := range []struct {
		path, accept string
		code         int
		contentType  string
	}{
		{"/apis/velero.io/v1/backups", protobuf + ", application/json", http.StatusOK, "application/json"},
		{"/apis/velero.io/v1/backups", protobuf + ";as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json", http.StatusOK, protobuf},
		{"/apis/backup.kubevirt.io/v1alpha1/virtualmachinebackups", protobuf + ", application/json", http.StatusOK, "application/json"},
		{"/apis/oadp.openshift.io/v1alpha1/nonadminbackups", protobuf, http.StatusNotAcceptable, ""},
		{"/apis/velero.io/v1/namespaces/" + ns + "/backups", "application/yaml", http.StatusOK, "application/yaml"},
		{"/apis/rbac.authorization.k8s.io/v1/clusterroles", protobuf, http.StatusOK, protobuf},
	} {
		res := s.Clientset.Discovery().RESTClient().Get().AbsPath(c.path).SetHeader("Accept", c.accept).Do(ctx)
		var code int
		res.StatusCode(&code)
		var contentType string
		res.ContentType(&contentType)
		if code != c.code || c.contentType != "" && contentType != c.contentType {
			t.Errorf("GET %s, Accept %s: %d %s, want %d %s", c.path, c.accept, code, contentType, c.code, c.contentType)
		}
	}
}
