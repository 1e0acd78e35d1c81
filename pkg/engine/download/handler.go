package download

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

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
	h.serve(w, r, parts[0], parts[1], velerov1.DownloadTargetKind(parts[2]), parts[3])
}

// ServeContent serves GET .../namespaces/<ns>/downloadrequests/<name>/content,
// the form of a link through kube-apiserver's aggregator: the target is in
// the query (location, kind, name) and signed as the direct link to it
// would be.
func (h *Handler) ServeContent(w http.ResponseWriter, r *http.Request, namespace string) {
	q := r.URL.Query()
	location, kind, name := q.Get("location"), q.Get("kind"), q.Get("name")
	if location == "" || kind == "" || name == "" {
		http.Error(w, "malformed download link: location, kind and name are required", http.StatusBadRequest)
		return
	}
	h.serve(w, r, namespace, location, velerov1.DownloadTargetKind(kind), name)
}

// serve checks the link's signature over the target's direct path, then
// streams the target.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, namespace, location string, kind velerov1.DownloadTargetKind, name string) {
	q := r.URL.Query()
	switch err := h.Signer.Verify(directPath(namespace, location, kind, name), q.Get("expires"), q.Get("signature"), h.Clock.Now()); {
	case errors.Is(err, ErrExpired):
		http.Error(w, "the download link has expired: create a new DownloadRequest", http.StatusForbidden)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	if location == noLocation {
		location = ""
	}
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
}

// For is the signed URL of the file a request targets, valid until
// expires.
func (l Links) For(namespace, request, location string, kind velerov1.DownloadTargetKind, name string, expires time.Time) string {
	base := strings.TrimSuffix(l.BaseURL, "/")
	direct := directPath(namespace, location, kind, name)
	signature := l.Signer.Sign(direct, expires)
	if !l.ThroughAggregator {
		return base + direct + "?" + signature
	}
	if location == "" {
		location = noLocation
	}
	q := url.Values{"location": {location}, "kind": {string(kind)}, "name": {name}}
	return base + "/apis/velero.io/v1/namespaces/" + url.PathEscape(namespace) + "/downloadrequests/" + url.PathEscape(request) +
		"/content?" + q.Encode() + "&" + signature
}
