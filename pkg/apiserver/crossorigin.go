package apiserver

import (
	"encoding/json"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// refuseCrossOrigin wraps the server's handler so that a browser's write
// sent by a page of another site is refused (403), whatever its rights:
// `kubectl proxy` answers any page the browser opens with the user's
// credentials, and a plain HTML form posting to backups/<name>/cancel (or
// a script's no-cors fetch) needs no CORS preflight. net/http's
// CrossOriginProtection decides: a request whose Sec-Fetch-Site (sent by
// every current browser) is neither same-origin nor none, or, without
// that header, whose Origin is not its Host, is refused unless its method
// is safe (GET, HEAD, OPTIONS). Clients that are not browsers (kubectl,
// client-go, the velero CLI) send neither header and are not affected.
// Through kube-apiserver the browser's headers reach the server as sent
// (the aggregator's proxy copies them) but Host is the server's Service:
// there (aggregated) only Sec-Fetch-Site decides, and a request without it
// (a browser older than that header) passes. It runs inside the
// authentication and authorization filters: what it refuses is audited,
// and only a user who could make the request can make the server log it.
func refuseCrossOrigin(h http.Handler, aggregated bool) http.Handler {
	p := http.NewCrossOriginProtection()
	p.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		klog.InfoS("Refused a browser's cross-origin write", "method", r.Method, "path", r.URL.Path,
			"secFetchSite", r.Header.Get("Sec-Fetch-Site"), "origin", r.Header.Get("Origin"))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Reason: metav1.StatusReasonForbidden, Code: http.StatusForbidden,
			Message: "a browser's cross-origin request that changes something is refused (Sec-Fetch-Site, Origin): send it from the same origin"})
	}))
	protected := p.Handler(h)
	if !aggregated {
		return protected
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Sec-Fetch-Site") == "" {
			h.ServeHTTP(w, r)
			return
		}
		protected.ServeHTTP(w, r)
	})
}
