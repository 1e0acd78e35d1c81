// Package pki owns the standalone server's certificate authority, serving
// certificate and client kubeconfigs under the data directory.
//
// # Layout
//
//	<dataDir>/pki/          0700
//	    ca.crt              0644  self-signed CA (ECDSA P-256, 10 years, CN "backstop-ca")
//	    ca.key              0600
//	    serving.crt         0644  serving certificate signed by the CA (1 year)
//	    serving.key         0600
//	<dataDir>/admin.kubeconfig  0600  user "backstop-admin", group "system:masters"
//
// The CA is precious: every kubeconfig handed out trusts it and carries a
// client certificate signed by it. EnsureCA therefore creates it only when
// ca.crt is absent and never replaces one that exists but cannot be used
// (corrupt, key missing or not matching, expired); it returns an error naming
// the file instead, and leaves the files untouched. The only repair it makes
// on its own is for a crash during creation: ca.key is written before ca.crt,
// so a ca.key without ca.crt is reused and a certificate is made for it.
//
// The serving certificate and the admin kubeconfig are derived data: they are
// regenerated whenever they are missing, unreadable, not signed by the CA,
// within 30 days of expiry, or (for the serving certificate) do not cover a
// requested host, or (for the kubeconfig) point at another server URL.
//
// Every file is written atomically (temporary file in the same directory,
// fsync, rename), so a crash leaves either the old or the new content, never a
// half-written key. Callers must not run two processes against the same data
// directory at once.
package pki
