package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"

	"github.com/backstop-io/backstop/pkg/atomicfile"
)

const (
	caCommonName = "backstop-ca"

	caValidity      = 10 * 365 * 24 * time.Hour
	servingValidity = 365 * 24 * time.Hour
	clientValidity  = 365 * 24 * time.Hour

	// renewBefore is how close to expiry a serving or admin client
	// certificate may get before it is regenerated.
	renewBefore = 30 * 24 * time.Hour
	// clockSkew is how far NotBefore is backdated.
	clockSkew = time.Hour
)

// Dir is the layout of files under <dataDir>/pki: ca.crt, ca.key,
// serving.crt, serving.key (0600 for keys, directory 0700).
type Dir struct {
	// Path is <dataDir>/pki.
	Path string
}

// New returns the Dir of the data directory dataDir.
func New(dataDir string) Dir {
	return Dir{Path: filepath.Join(dataDir, "pki")}
}

// CAFile is the path of the CA certificate (PEM).
func (d Dir) CAFile() string { return filepath.Join(d.Path, "ca.crt") }

func (d Dir) caKeyFile() string       { return filepath.Join(d.Path, "ca.key") }
func (d Dir) servingCertFile() string { return filepath.Join(d.Path, "serving.crt") }
func (d Dir) servingKeyFile() string  { return filepath.Join(d.Path, "serving.key") }

// CA is the certificate authority of a standalone server.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// CertPEM is Cert PEM-encoded, as embedded in kubeconfigs.
	CertPEM []byte
}

// EnsureCA loads the CA from disk or creates it (ECDSA P-256, 10 years, CN
// "backstop-ca") if absent.
//
// A CA that exists but cannot be used (unparsable ca.crt or ca.key, ca.key
// missing or not matching ca.crt, not a CA certificate, expired) is an error
// naming the file; it is never replaced, since that would invalidate every
// kubeconfig issued so far. To start over, remove both files.
func (d Dir) EnsureCA() (*CA, error) {
	certFile, keyFile := d.CAFile(), d.caKeyFile()

	certPEM, err := os.ReadFile(certFile)
	if err == nil {
		return loadCA(certFile, certPEM, keyFile, time.Now())
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading CA certificate %s: %w", certFile, err)
	}

	// No ca.crt. ca.key is written first when creating a CA, so a ca.key on
	// its own is what a crash in between leaves: reuse it. If it cannot be
	// parsed, say so rather than overwrite a key someone may have put there.
	var key crypto.Signer
	keyPEM, err := os.ReadFile(keyFile)
	switch {
	case err == nil:
		if key, err = parseSigner(keyFile, keyPEM); err != nil {
			return nil, fmt.Errorf("CA key %s exists without certificate %s: %w", keyFile, certFile, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("reading CA key %s: %w", keyFile, err)
	}
	return d.createCA(key, time.Now())
}

func loadCA(certFile string, certPEM []byte, keyFile string, now time.Time) (*CA, error) {
	certs, err := cert.ParseCertsPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate %s: %w", certFile, err)
	}
	if len(certs) != 1 {
		return nil, fmt.Errorf("CA certificate file %s holds %d certificates, want 1", certFile, len(certs))
	}
	caCert := certs[0]
	if !caCert.IsCA {
		return nil, fmt.Errorf("certificate in %s is not a CA certificate", certFile)
	}
	if now.After(caCert.NotAfter) {
		return nil, fmt.Errorf("CA certificate %s expired at %s; remove %s and %s to create a new CA (every issued kubeconfig must then be replaced)",
			certFile, caCert.NotAfter.UTC().Format(time.RFC3339), certFile, keyFile)
	}

	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("reading CA key %s (CA certificate %s exists): %w", keyFile, certFile, err)
	}
	key, err := parseSigner(keyFile, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading CA key: %w", err)
	}
	if !publicKeysEqual(caCert.PublicKey, key.Public()) {
		return nil, fmt.Errorf("CA key %s does not match CA certificate %s", keyFile, certFile)
	}

	encoded, err := cert.EncodeCertificates(caCert)
	if err != nil {
		return nil, fmt.Errorf("encoding CA certificate %s: %w", certFile, err)
	}
	return &CA{Cert: caCert, Key: key, CertPEM: encoded}, nil
}

// createCA makes a self-signed CA certificate for key (a new ECDSA P-256 key
// if nil) and writes key and certificate, the key first.
func (d Dir) createCA(key crypto.Signer, now time.Time) (*CA, error) {
	certFile, keyFile := d.CAFile(), d.caKeyFile()
	newKey := key == nil
	if newKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("generating CA key: %w", err)
		}
		key = k
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: caCommonName},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true, // signs leaf certificates only
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing new CA certificate: %w", err)
	}
	certPEM, err := cert.EncodeCertificates(caCert)
	if err != nil {
		return nil, fmt.Errorf("encoding CA certificate: %w", err)
	}

	if err := ensureDir(d.Path); err != nil {
		return nil, err
	}
	if newKey {
		keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
		if err != nil {
			return nil, fmt.Errorf("encoding CA key: %w", err)
		}
		if err := atomicfile.Write(keyFile, keyPEM, keyMode); err != nil {
			return nil, fmt.Errorf("writing CA key: %w", err)
		}
	}
	if err := atomicfile.Write(certFile, certPEM, certMode); err != nil {
		return nil, fmt.Errorf("writing CA certificate: %w", err)
	}
	return &CA{Cert: caCert, Key: key, CertPEM: certPEM}, nil
}

// ClientCert issues a client certificate (1 year, ExtKeyUsageClientAuth) with
// CN=user and O=groups.
func (ca *CA) ClientCert(user string, groups []string) (certPEM, keyPEM []byte, err error) {
	if user == "" {
		return nil, nil, errors.New("issuing client certificate: empty user name")
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: slices.Clone(groups)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	certPEM, keyPEM, err = ca.issue(tmpl, time.Now(), clientValidity)
	if err != nil {
		return nil, nil, fmt.Errorf("issuing client certificate for %q: %w", user, err)
	}
	return certPEM, keyPEM, nil
}

// issue signs a leaf certificate from tmpl (subject, usages and SANs) for a
// new ECDSA P-256 key, valid from now-clockSkew for validity (but not past
// the CA's own expiry).
func (ca *CA) issue(tmpl *x509.Certificate, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if ca == nil || ca.Cert == nil || ca.Key == nil {
		return nil, nil, errors.New("no CA")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	t := *tmpl
	t.SerialNumber = serial
	t.NotBefore = now.Add(-clockSkew)
	t.NotAfter = now.Add(validity)
	if t.NotAfter.After(ca.Cert.NotAfter) {
		t.NotAfter = ca.Cert.NotAfter
	}
	t.KeyUsage = x509.KeyUsageDigitalSignature
	t.BasicConstraintsValid = true
	t.IsCA = false

	der, err := x509.CreateCertificate(rand.Reader, &t, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing new certificate: %w", err)
	}
	if certPEM, err = cert.EncodeCertificates(leaf); err != nil {
		return nil, nil, fmt.Errorf("encoding certificate: %w", err)
	}
	if keyPEM, err = keyutil.MarshalPrivateKeyToPEM(key); err != nil {
		return nil, nil, fmt.Errorf("encoding key: %w", err)
	}
	return certPEM, keyPEM, nil
}

// pool returns a certificate pool holding only the CA.
func (ca *CA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// randomSerial returns a random 128-bit serial number (never zero).
func randomSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("generating serial number: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

func parseSigner(file string, keyPEM []byte) (crypto.Signer, error) {
	k, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parsing private key %s: %w", file, err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("private key %s: unsupported key type %T", file, k)
	}
	return s, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	eq, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && eq.Equal(b)
}
