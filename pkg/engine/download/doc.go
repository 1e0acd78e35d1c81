// Package download answers velero.io DownloadRequests, which the velero CLI
// creates to read a backup's or a restore's files (logs, results, resource
// lists, volume information) and then fetches without credentials, like a
// pre-signed object-store URL.
//
// The controller (controller.go) resolves the request's target to its
// storage location and sets status.downloadURL to a link served by this
// server (handler.go): /backstop/download/<namespace>/<location>/<kind>/<name>
// with an expiry and an HMAC signature (signer.go), so only links the server
// issued, and only until they expire, are served. The handler streams the
// object from the location's store, or answers 404 when there is none, which
// the CLI reports as "not found" rather than waiting. Processed requests are
// deleted once expired, as Velero does.
package download
