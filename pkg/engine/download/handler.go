package download

import (
	"errors"
	"io"
	"net/http"
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
	q := r.URL.Query()
	switch err := h.Signer.Verify(r.URL.Path, q.Get("expires"), q.Get("signature"), h.Clock.Now()); {
	case errors.Is(err, ErrExpired):
		http.Error(w, "the download link has expired: create a new DownloadRequest", http.StatusForbidden)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	namespace, location, kind, name := parts[0], parts[1], velerov1.DownloadTargetKind(parts[2]), parts[3]
	if location == "-" {
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

// Link is the signed URL of a target's file, valid for ttl.
func Link(signer *Signer, baseURL, namespace, location string, kind velerov1.DownloadTargetKind, name string, expires time.Time) string {
	if location == "" {
		// No location: a link that answers 404 ("not found"), not a wait.
		location = "-"
	}
	path := PathPrefix + namespace + "/" + location + "/" + string(kind) + "/" + name
	return strings.TrimSuffix(baseURL, "/") + path + "?" + signer.Sign(path, expires)
}
