// Package download answers velero.io DownloadRequests, which the velero CLI
// creates to read a backup's or a restore's files (logs, results, resource
// lists, volume information) and then fetches without credentials, like a
// pre-signed object-store URL.
//
// The controller (controller.go) resolves the request's target to its
// storage location and sets status.downloadURL to a link served by this
// server (handler.go), with an expiry and an HMAC signature (signer.go), so
// only links the server issued, and only until they expire, are served.
// Standalone, the link points at the server itself:
// /backstop/download/<namespace>/<location>/<kind>/<name>. Aggregated, it
// points at kube-apiserver, which every user of the cluster reaches, and
// its aggregator proxies it to the server: the content subresource of the
// request, /apis/velero.io/v1/namespaces/<ns>/downloadrequests/<name>/content
// with the target in the query. Clients fetch it without credentials, so
// kube-apiserver takes them for system:anonymous, whom artifacts/deploy
// allows get on downloadrequests/content: the signature is the
// authorization, as for an object store's pre-signed URL. The handler streams the
// object from the location's store, or answers 404 when there is none, which
// the CLI reports as "not found" rather than waiting. Processed requests are
// deleted once expired, as Velero does.
package download
