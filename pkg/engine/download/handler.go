package download

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// PathPrefix is where download links point.
const PathPrefix = "/backstop/download/"

// Handler serves signed download links.
type Handler struct {
	Signer    *Signer
	Locations objectstore.Locations
	Clock     clock.PassiveClock
	// Requests returns the UID of a DownloadRequest as stored (an error
	// wrapping NotFound when there is none): a link opens only while the
	// request it was made for exists, so deleting the request (a
	// NonAdminDownloadRequest, which takes its DownloadRequest with it)
	// revokes it. Nil: links are not revocable (tests of the signature).
	Requests func(ctx context.Context, namespace, name string) (types.UID, error)
	// Authorizer decides whether the user fetching a link that holds a
	// namespace's Secrets may read them (Link.SecretsOf).
	Authorizer authorizer.Authorizer
}

// Link is what a download link names, all of it covered by its signature.
type Link struct {
	// Namespace and Request name the DownloadRequest, UID its UID.
	Namespace, Request string
	UID                types.UID
	// Location is the storage location ("" for none: the link answers
	// 404), Kind and Name the file.
	Location string
	Kind     velerov1.DownloadTargetKind
	Name     string
	// SecretsOf, when set, is the namespace whose Secrets the file holds
	// (a tenant's backup contents): the link opens only for a user,
	// authenticated, who may get Secrets there.
	SecretsOf string
}

// signed is the text a link's signature covers: the target's direct
// path, then the request, its UID and SecretsOf.
func (l Link) signed() string {
	return directPath(l.Namespace, l.Location, l.Kind, l.Name) + "\x00" + l.Request + "\x00" + string(l.UID) + "\x00" + l.SecretsOf
}

// ServeHTTP serves GET /backstop/download/<ns>/<location>/<kind>/<name>.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "only GET is supported", http.StatusMethodNotAllowed)
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, PathPrefix), "/")
	if len(parts) != 4 || !strings.HasPrefix(r.URL.Path, PathPrefix) {
		http.Error(w, "malformed download link", http.StatusBadRequest)
		return
	}
	q := r.URL.Query()
	h.serve(w, r, Link{Namespace: parts[0], Request: q.Get("request"), UID: types.UID(q.Get("uid")), Location: parts[1],
		Kind: velerov1.DownloadTargetKind(parts[2]), Name: parts[3], SecretsOf: q.Get("secrets")})
}

// ServeContent serves GET .../namespaces/<ns>/downloadrequests/<name>/content,
// the form of a link through kube-apiserver's aggregator: the target is in
// the query (location, kind, name) and signed as the direct link to it
// would be.
func (h *Handler) ServeContent(w http.ResponseWriter, r *http.Request, namespace, request string) {
	q := r.URL.Query()
	location, kind, name := q.Get("location"), q.Get("kind"), q.Get("name")
	if location == "" || kind == "" || name == "" {
		http.Error(w, "malformed download link: location, kind and name are required", http.StatusBadRequest)
		return
	}
	h.serve(w, r, Link{Namespace: namespace, Request: request, UID: types.UID(q.Get("uid")), Location: location,
		Kind: velerov1.DownloadTargetKind(kind), Name: name, SecretsOf: q.Get("secrets")})
}

// serve checks the link's signature, that its request still exists and, for
// a file holding Secrets, that the user may read them; then streams the
// target.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, l Link) {
	q := r.URL.Query()
	switch err := h.Signer.Verify(l.signed(), q.Get("expires"), q.Get("signature"), h.Clock.Now()); {
	case errors.Is(err, ErrExpired):
		http.Error(w, "the download link has expired: create a new DownloadRequest", http.StatusForbidden)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	if h.Requests != nil {
		uid, err := h.Requests(r.Context(), l.Namespace, l.Request)
		switch {
		case apierrors.IsNotFound(err) || err == nil && uid != l.UID:
			http.Error(w, "the download link was revoked: its download request is gone", http.StatusForbidden)
			return
		case err != nil:
			http.Error(w, "reading the download request: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	if l.SecretsOf != "" {
		if msg := h.secretsAllowed(r, l.SecretsOf); msg != "" {
			http.Error(w, msg, http.StatusForbidden)
			return
		}
	}
	location, kind, name := l.Location, l.Kind, l.Name
	if location == noLocation {
		location = ""
	}
	namespace := l.Namespace
	obj, err := h.Locations.OpenTarget(r.Context(), namespace, location, kind, name)
	if errors.Is(err, objectstore.ErrNotFound) {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	if err != nil {
		klog.FromContext(r.Context()).Error(err, "Reading a download", "location", location, "target", name)
		http.Error(w, "reading the "+string(kind)+" of "+name+" failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer obj.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	if _, err := io.Copy(w, obj); err != nil {
		klog.FromContext(r.Context()).Error(err, "Streaming a download", "location", location, "kind", kind, "target", name)
	}
}

// secretsAllowed says why the user of r may not read the Secrets of
// namespace, "" when it may.
func (h *Handler) secretsAllowed(r *http.Request, namespace string) string {
	u, ok := genericapirequest.UserFrom(r.Context())
	deny := fmt.Sprintf("this file holds the Secrets of namespace %s: fetch it authenticated (kubectl get --raw) as a user who may get them there", namespace)
	if !ok || h.Authorizer == nil {
		return deny
	}
	decision, reason, err := h.Authorizer.Authorize(r.Context(), authorizer.AttributesRecord{User: u, Verb: "get", Namespace: namespace,
		Resource: "secrets", ResourceRequest: true, APIVersion: "v1"})
	if err != nil || decision != authorizer.DecisionAllow {
		klog.FromContext(r.Context()).V(2).Info("Download link refused: its file holds Secrets the user may not read", "user", u.GetName(), "namespace", namespace, "reason", reason, "err", err)
		return deny
	}
	return ""
}

// noLocation stands for a target without a location: its link answers 404
// ("not found"), not a wait.
const noLocation = "-"

// directPath is the path of a target's direct link, which its signature
// covers in both forms of links.
func directPath(namespace, location string, kind velerov1.DownloadTargetKind, name string) string {
	if location == "" {
		location = noLocation
	}
	return PathPrefix + namespace + "/" + location + "/" + string(kind) + "/" + name
}

// Links makes the links of processed DownloadRequests.
type Links struct {
	Signer *Signer
	// BaseURL is where clients reach the links: this server (direct
	// links), or kube-apiserver when ThroughAggregator is set.
	BaseURL string
	// ThroughAggregator makes links to the content subresource of the
	// request (/apis/velero.io/v1/namespaces/<ns>/downloadrequests/<name>/content),
	// which kube-apiserver proxies to this server: users outside the
	// cluster reach kube-apiserver, not the server's Service.
	ThroughAggregator bool
	// SecretsInBackups is set when backups may hold Secrets (their source
	// is a cluster): a tenant's contents link then opens only for a user
	// who may read them (Link.SecretsOf).
	SecretsInBackups bool
}

// For is the signed URL of the file a request targets, valid until
// expires.
func (l Links) For(link Link, expires time.Time) string {
	if !l.SecretsInBackups {
		link.SecretsOf = ""
	}
	base := strings.TrimSuffix(l.BaseURL, "/")
	signature := l.Signer.Sign(link.signed(), expires)
	q := url.Values{"uid": {string(link.UID)}}
	if link.SecretsOf != "" {
		q.Set("secrets", link.SecretsOf)
	}
	if !l.ThroughAggregator {
		q.Set("request", link.Request)
		return base + directPath(link.Namespace, link.Location, link.Kind, link.Name) + "?" + q.Encode() + "&" + signature
	}
	location := link.Location
	if location == "" {
		location = noLocation
	}
	q.Set("location", location)
	q.Set("kind", string(link.Kind))
	q.Set("name", link.Name)
	return base + "/apis/velero.io/v1/namespaces/" + url.PathEscape(link.Namespace) + "/downloadrequests/" + url.PathEscape(link.Request) +
		"/content?" + q.Encode() + "&" + signature
}
