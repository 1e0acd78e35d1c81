package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

func newCA(t *testing.T) (Dir, *CA) {
	t.Helper()
	d := New(t.TempDir())
	ca, err := d.EnsureCA()
	if err != nil {
		t.Fatalf("EnsureCA: %v", err)
	}
	return d, ca
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func checkMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("mode of %s = %#o, want %#o", path, got, want)
	}
}

func parseCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	certs, err := cert.ParseCertsPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if len(certs) != 1 {
		t.Fatalf("got %d certificates, want 1", len(certs))
	}
	return certs[0]
}

// noTempFiles fails if an atomic write left a temporary file behind in dir.
func noTempFiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file left behind: %s", filepath.Join(dir, e.Name()))
		}
	}
}

func TestEnsureCA(t *testing.T) {
	dataDir := t.TempDir()
	d := New(dataDir)
	if want := filepath.Join(dataDir, "pki"); d.Path != want {
		t.Fatalf("Path = %q, want %q", d.Path, want)
	}
	if want := filepath.Join(dataDir, "pki", "ca.crt"); d.CAFile() != want {
		t.Fatalf("CAFile() = %q, want %q", d.CAFile(), want)
	}

	ca1, err := d.EnsureCA()
	if err != nil {
		t.Fatalf("EnsureCA (create): %v", err)
	}
	ca2, err := d.EnsureCA()
	if err != nil {
		t.Fatalf("EnsureCA (load): %v", err)
	}
	if !bytes.Equal(ca1.Cert.Raw, ca2.Cert.Raw) || !bytes.Equal(ca1.CertPEM, ca2.CertPEM) {
		t.Error("second EnsureCA returned a different certificate")
	}
	if !bytes.Equal(ca2.CertPEM, readFile(t, d.CAFile())) {
		t.Error("CertPEM differs from ca.crt")
	}
	if !publicKeysEqual(ca1.Key.Public(), ca2.Key.Public()) {
		t.Error("second EnsureCA returned a different key")
	}

	c := ca1.Cert
	if !c.IsCA || c.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageDigitalSignature {
		t.Errorf("IsCA = %v, KeyUsage = %v", c.IsCA, c.KeyUsage)
	}
	if c.Subject.CommonName != "backstop-ca" {
		t.Errorf("CN = %q", c.Subject.CommonName)
	}
	if k, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("public key %T is not ECDSA P-256", c.PublicKey)
	}
	if v := c.NotAfter.Sub(c.NotBefore); v < 10*365*24*time.Hour {
		t.Errorf("validity %v, want >= 10 years", v)
	}
	if time.Until(c.NotBefore) > -50*time.Minute {
		t.Errorf("NotBefore %v is not backdated", c.NotBefore)
	}
	if c.SerialNumber.BitLen() < 64 {
		t.Errorf("serial %v is suspiciously short", c.SerialNumber)
	}

	checkMode(t, d.Path, 0o700)
	checkMode(t, filepath.Join(d.Path, "ca.key"), 0o600)
	noTempFiles(t, d.Path)
}

func TestEnsureCABroken(t *testing.T) {
	otherKey, err := keyutil.MakeEllipticPrivateKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		break_  func(d Dir)
		errFile func(d Dir) string // the file the error must name
	}{
		{
			name:    "corrupt key",
			break_:  func(d Dir) { writeFile(t, d.caKeyFile(), []byte("-----BEGIN EC PRIVATE KEY-----\ngarbage\n")) },
			errFile: Dir.caKeyFile,
		},
		{
			name:    "corrupt cert",
			break_:  func(d Dir) { writeFile(t, d.CAFile(), []byte("not a certificate")) },
			errFile: Dir.CAFile,
		},
		{
			name:    "truncated cert",
			break_:  func(d Dir) { writeFile(t, d.CAFile(), readFile(t, d.CAFile())[:100]) },
			errFile: Dir.CAFile,
		},
		{
			name:    "key of another CA",
			break_:  func(d Dir) { writeFile(t, d.caKeyFile(), otherKey) },
			errFile: Dir.caKeyFile,
		},
		{
			name:    "key missing",
			break_:  func(d Dir) { os.Remove(d.caKeyFile()) },
			errFile: Dir.caKeyFile,
		},
		{
			name:    "not a CA",
			break_:  func(d Dir) { writeFile(t, d.CAFile(), readFile(t, d.servingCertFile())) },
			errFile: Dir.CAFile,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, ca := newCA(t)
			if _, _, err := d.EnsureServing(ca, nil); err != nil {
				t.Fatal(err)
			}
			tc.break_(d)
			before := map[string][]byte{}
			for _, f := range []string{d.CAFile(), d.caKeyFile()} {
				if b, err := os.ReadFile(f); err == nil {
					before[f] = b
				}
			}

			_, err := d.EnsureCA()
			if err == nil {
				t.Fatal("EnsureCA succeeded on a broken CA")
			}
			if !strings.Contains(err.Error(), tc.errFile(d)) {
				t.Errorf("error %q does not name %s", err, tc.errFile(d))
			}
			for _, f := range []string{d.CAFile(), d.caKeyFile()} {
				after, err := os.ReadFile(f)
				if b, ok := before[f]; ok {
					if err != nil || !bytes.Equal(after, b) {
						t.Errorf("%s was modified", f)
					}
				} else if err == nil {
					t.Errorf("%s was created", f)
				}
			}
		})
	}
}

func TestEnsureCAReusesOrphanedKey(t *testing.T) {
	// A crash between writing ca.key and ca.crt leaves the key alone.
	d, ca := newCA(t)
	keyPEM := readFile(t, d.caKeyFile())
	if err := os.Remove(d.CAFile()); err != nil {
		t.Fatal(err)
	}
	ca2, err := d.EnsureCA()
	if err != nil {
		t.Fatalf("EnsureCA: %v", err)
	}
	if !publicKeysEqual(ca.Key.Public(), ca2.Key.Public()) {
		t.Error("orphaned CA key was not reused")
	}
	if !bytes.Equal(readFile(t, d.caKeyFile()), keyPEM) {
		t.Error("ca.key was rewritten")
	}
	if !bytes.Equal(readFile(t, d.CAFile()), ca2.CertPEM) {
		t.Error("ca.crt was not written")
	}
}

func TestEnsureServing(t *testing.T) {
	d, ca := newCA(t)
	certFile, keyFile, err := d.EnsureServing(ca, []string{"backstop.example.com", "10.1.2.3"})
	if err != nil {
		t.Fatalf("EnsureServing: %v", err)
	}
	if certFile != filepath.Join(d.Path, "serving.crt") || keyFile != filepath.Join(d.Path, "serving.key") {
		t.Errorf("files = %q, %q", certFile, keyFile)
	}
	checkMode(t, keyFile, 0o600)
	noTempFiles(t, d.Path)

	certPEM, keyPEM := readFile(t, certFile), readFile(t, keyFile)
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatalf("serving cert and key do not match: %v", err)
	}
	leaf := parseCert(t, certPEM)
	if time.Until(leaf.NotBefore) > -50*time.Minute {
		t.Errorf("NotBefore %v is not backdated", leaf.NotBefore)
	}
	for _, host := range []string{"localhost", "127.0.0.1", "::1", "backstop.example.com", "10.1.2.3"} {
		t.Run("verify "+host, func(t *testing.T) {
			_, err := leaf.Verify(x509.VerifyOptions{
				DNSName:   host,
				Roots:     ca.pool(),
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other.example.com", Roots: ca.pool()}); err == nil {
		t.Error("serving certificate verifies for a host it was not issued for")
	}

	// Same hosts (any order, case, or a subset): the files are kept.
	for _, hosts := range [][]string{
		{"backstop.example.com", "10.1.2.3"},
		{"10.1.2.3", "BACKSTOP.example.com", "localhost"},
		nil,
	} {
		if _, _, err := d.EnsureServing(ca, hosts); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(readFile(t, certFile), certPEM) || !bytes.Equal(readFile(t, keyFile), keyPEM) {
			t.Fatalf("EnsureServing(%q) rewrote a valid certificate", hosts)
		}
	}

	// A new host: regenerated, and covering it as well as the old ones.
	if _, _, err := d.EnsureServing(ca, []string{"backstop.example.com", "10.1.2.3", "new.example.com", "[fd00::1]"}); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(readFile(t, certFile), certPEM) {
		t.Fatal("certificate not regenerated for a new host")
	}
	leaf = parseCert(t, readFile(t, certFile))
	for _, host := range []string{"localhost", "127.0.0.1", "::1", "backstop.example.com", "10.1.2.3", "new.example.com", "fd00::1"} {
		if err := leaf.VerifyHostname(host); err != nil {
			t.Errorf("regenerated certificate: %v", err)
		}
	}
}

func TestEnsureServingRegenerates(t *testing.T) {
	_, otherCA := newCA(t)
	tests := []struct {
		name   string
		break_ func(t *testing.T, d Dir, ca *CA)
	}{
		{"cert missing", func(t *testing.T, d Dir, ca *CA) { os.Remove(d.servingCertFile()) }},
		{"key missing", func(t *testing.T, d Dir, ca *CA) { os.Remove(d.servingKeyFile()) }},
		{"cert corrupt", func(t *testing.T, d Dir, ca *CA) { writeFile(t, d.servingCertFile(), []byte("garbage")) }},
		{"key does not match", func(t *testing.T, d Dir, ca *CA) {
			_, keyPEM, err := ca.ClientCert("x", nil)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, d.servingKeyFile(), keyPEM)
		}},
		{"signed by another CA", func(t *testing.T, d Dir, ca *CA) {
			dns, ips := servingSANs(nil)
			certPEM, keyPEM, err := otherCA.issueServing(dns, ips, time.Now(), servingValidity)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, d.servingCertFile(), certPEM)
			writeFile(t, d.servingKeyFile(), keyPEM)
		}},
		{"expiring within 30 days", func(t *testing.T, d Dir, ca *CA) {
			dns, ips := servingSANs(nil)
			certPEM, keyPEM, err := ca.issueServing(dns, ips, time.Now(), 20*24*time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, d.servingCertFile(), certPEM)
			writeFile(t, d.servingKeyFile(), keyPEM)
		}},
		{"expired", func(t *testing.T, d Dir, ca *CA) {
			dns, ips := servingSANs(nil)
			certPEM, keyPEM, err := ca.issueServing(dns, ips, time.Now().Add(-48*time.Hour), 24*time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, d.servingCertFile(), certPEM)
			writeFile(t, d.servingKeyFile(), keyPEM)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, ca := newCA(t)
			if _, _, err := d.EnsureServing(ca, nil); err != nil {
				t.Fatal(err)
			}
			tc.break_(t, d, ca)
			certFile, keyFile, err := d.EnsureServing(ca, nil)
			if err != nil {
				t.Fatalf("EnsureServing: %v", err)
			}
			leaf, ok := verifiedLeaf(readFile(t, certFile), readFile(t, keyFile), ca, x509.ExtKeyUsageServerAuth, time.Now())
			if !ok {
				t.Fatal("serving certificate was not regenerated")
			}
			if time.Until(leaf.NotAfter) < 300*24*time.Hour {
				t.Errorf("regenerated certificate expires at %v", leaf.NotAfter)
			}
		})
	}
}

func TestClientCert(t *testing.T) {
	_, ca := newCA(t)
	tests := []struct {
		user   string
		groups []string
	}{
		{"alice", nil},
		{"bob", []string{"dev"}},
		{"system:admin", []string{"system:masters", "ops"}},
	}
	for _, tc := range tests {
		t.Run(tc.user, func(t *testing.T) {
			certPEM, keyPEM, err := ca.ClientCert(tc.user, tc.groups)
			if err != nil {
				t.Fatalf("ClientCert: %v", err)
			}
			if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
				t.Fatalf("cert and key do not match: %v", err)
			}
			c := parseCert(t, certPEM)
			if _, err := c.Verify(x509.VerifyOptions{
				Roots:     ca.pool(),
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			}); err != nil {
				t.Errorf("verify: %v", err)
			}
			if _, err := c.Verify(x509.VerifyOptions{
				Roots:     ca.pool(),
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			}); err == nil {
				t.Error("client certificate verifies for server auth")
			}
			if c.Subject.CommonName != tc.user || !sameSet(c.Subject.Organization, tc.groups) {
				t.Errorf("subject CN=%q O=%q, want CN=%q O=%q", c.Subject.CommonName, c.Subject.Organization, tc.user, tc.groups)
			}
			if v := c.NotAfter.Sub(time.Now()); v < 364*24*time.Hour || v > 366*24*time.Hour {
				t.Errorf("valid for %v more, want 1 year", v)
			}
		})
	}
	if _, _, err := ca.ClientCert("", nil); err == nil {
		t.Error("ClientCert accepted an empty user")
	}
}

// sameSet compares groups regardless of order: DER sorts the values of a
// multi-valued O attribute, so the certificate may list them in another order.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

type identity struct {
	User   string   `json:"user"`
	Groups []string `json:"groups"`
}

func TestKubeconfig(t *testing.T) {
	d, ca := newCA(t)
	certFile, keyFile, err := d.EnsureServing(ca, []string{"backstop.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	servingPair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			http.Error(w, "no client certificate", http.StatusUnauthorized)
			return
		}
		peer := r.TLS.PeerCertificates[0]
		_ = json.NewEncoder(w).Encode(identity{User: peer.Subject.CommonName, Groups: peer.Subject.Organization})
	}))
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{servingPair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.pool(),
	}
	srv.StartTLS()
	defer srv.Close()

	user, groups := "alice", []string{"ops", "dev"}
	data, err := ca.Kubeconfig(srv.URL, user, groups)
	if err != nil {
		t.Fatalf("Kubeconfig: %v", err)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		t.Fatalf("clientcmd.Load: %v", err)
	}
	if cfg.CurrentContext != "backstop" {
		t.Errorf("current-context = %q", cfg.CurrentContext)
	}
	if ctx := cfg.Contexts["backstop"]; ctx == nil || ctx.Cluster != "backstop" || ctx.AuthInfo != user {
		t.Errorf("context backstop = %+v", ctx)
	}
	if c := cfg.Clusters["backstop"]; c == nil || c.Server != srv.URL {
		t.Errorf("cluster backstop = %+v", c)
	}

	restConfig, err := clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		t.Fatalf("ClientConfig: %v", err)
	}
	if restConfig.Host != srv.URL {
		t.Errorf("Host = %q, want %q", restConfig.Host, srv.URL)
	}
	if !bytes.Equal(restConfig.CAData, ca.CertPEM) {
		t.Error("CAData is not the CA certificate")
	}
	if c := parseCert(t, restConfig.CertData); c.Subject.CommonName != user {
		t.Errorf("CertData CN = %q", c.Subject.CommonName)
	}
	if len(restConfig.KeyData) == 0 {
		t.Error("no KeyData")
	}

	rt, err := rest.TransportFor(restConfig)
	if err != nil {
		t.Fatalf("TransportFor: %v", err)
	}
	client := &http.Client{Transport: rt, Timeout: 30 * time.Second}
	resp, err := client.Get(srv.URL + "/whoami")
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %s", resp.Status)
	}
	var got identity
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.User != user || !sameSet(got.Groups, groups) {
		t.Errorf("server saw %+v, want user %q groups %q", got, user, groups)
	}

	// A kubeconfig from another CA is refused by the server (and the server by it).
	_, otherCA := newCA(t)
	otherData, err := otherCA.Kubeconfig(srv.URL, user, groups)
	if err != nil {
		t.Fatal(err)
	}
	otherRest, err := clientcmd.RESTConfigFromKubeConfig(otherData)
	if err != nil {
		t.Fatal(err)
	}
	otherRT, err := rest.TransportFor(otherRest)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	if resp, err := (&http.Client{Transport: otherRT, Timeout: 30 * time.Second}).Get(srv.URL); err == nil {
		resp.Body.Close()
		t.Error("request with a kubeconfig of another CA succeeded")
	}

	if _, err := ca.Kubeconfig("", user, groups); err == nil {
		t.Error("Kubeconfig accepted an empty server URL")
	}
}

func TestWriteAdminKubeconfig(t *testing.T) {
	dataDir := t.TempDir()
	ca, err := New(dataDir).EnsureCA()
	if err != nil {
		t.Fatal(err)
	}
	const url1, url2 = "https://127.0.0.1:6443", "https://backstop.example.com:8443"

	path, err := WriteAdminKubeconfig(dataDir, ca, url1)
	if err != nil {
		t.Fatalf("WriteAdminKubeconfig: %v", err)
	}
	if path != filepath.Join(dataDir, "admin.kubeconfig") {
		t.Errorf("path = %q", path)
	}
	checkMode(t, path, 0o600)
	noTempFiles(t, dataDir)
	first := readFile(t, path)
	checkAdmin(t, first, ca, url1)

	if _, err := WriteAdminKubeconfig(dataDir, ca, url1); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, path), first) {
		t.Error("second call with the same URL rewrote the kubeconfig")
	}

	if _, err := WriteAdminKubeconfig(dataDir, ca, url2); err != nil {
		t.Fatal(err)
	}
	second := readFile(t, path)
	if bytes.Equal(second, first) {
		t.Fatal("a different URL did not rewrite the kubeconfig")
	}
	checkAdmin(t, second, ca, url2)

	// A new CA: the old client certificate is no longer signed by it.
	_, otherCA := newCA(t)
	if _, err := WriteAdminKubeconfig(dataDir, otherCA, url2); err != nil {
		t.Fatal(err)
	}
	third := readFile(t, path)
	if bytes.Equal(third, second) {
		t.Fatal("a different CA did not rewrite the kubeconfig")
	}
	checkAdmin(t, third, otherCA, url2)

	// A corrupt file is regenerated.
	writeFile(t, path, []byte("{not yaml"))
	if _, err := WriteAdminKubeconfig(dataDir, otherCA, url2); err != nil {
		t.Fatal(err)
	}
	checkAdmin(t, readFile(t, path), otherCA, url2)
}

func checkAdmin(t *testing.T, data []byte, ca *CA, serverURL string) {
	t.Helper()
	if !adminKubeconfigValid(data, ca, serverURL, time.Now()) {
		t.Fatal("admin kubeconfig is not valid")
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != serverURL {
		t.Errorf("Host = %q, want %q", rc.Host, serverURL)
	}
	c := parseCert(t, rc.CertData)
	if c.Subject.CommonName != "backstop-admin" || !slices.Equal(c.Subject.Organization, []string{"system:masters"}) {
		t.Errorf("admin subject CN=%q O=%q", c.Subject.CommonName, c.Subject.Organization)
	}
}

func TestServingSANs(t *testing.T) {
	dns, ips := servingSANs([]string{" Foo.Example.com ", "foo.example.com", "127.0.0.1", "[::1]", "::ffff:10.0.0.1", "10.0.0.1", ""})
	if want := []string{"localhost", "foo.example.com"}; !slices.Equal(dns, want) {
		t.Errorf("dns = %q, want %q", dns, want)
	}
	want := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.0.0.1")}
	if !slices.EqualFunc(ips, want, net.IP.Equal) {
		t.Errorf("ips = %v, want %v", ips, want)
	}
}

func TestRandomSerial(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		s, err := randomSerial()
		if err != nil {
			t.Fatal(err)
		}
		if s.Sign() <= 0 || s.BitLen() > 128 {
			t.Fatalf("serial %v out of range", s)
		}
		if seen[s.String()] {
			t.Fatalf("duplicate serial %v", s)
		}
		seen[s.String()] = true
	}
}
