package pki

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/backstop-io/backstop/pkg/atomicfile"
)

// servingCommonName is the subject CN of the serving certificate. Clients
// match host names against the SANs only.
const servingCommonName = "backstop"

// defaultHosts are always covered by the serving certificate.
var defaultHosts = []string{"localhost", "127.0.0.1", "::1"}

// EnsureServing makes sure serving.crt/key exist, are signed by ca, are not
// expiring within 30 days, and cover every host in hosts (DNS names and IPs;
// "localhost", 127.0.0.1 and ::1 are always added). It regenerates them if
// not. It returns the cert and key file paths.
//
// Hosts are bare DNS names or IP addresses (an IPv6 address may be in
// brackets), without ports. A certificate covering more than the requested
// hosts is kept.
func (d Dir) EnsureServing(ca *CA, hosts []string) (certFile, keyFile string, err error) {
	certFile, keyFile = d.servingCertFile(), d.servingKeyFile()
	if ca == nil || ca.Cert == nil || ca.Key == nil {
		return "", "", fmt.Errorf("ensuring serving certificate %s: no CA", certFile)
	}
	dns, ips := servingSANs(hosts)
	now := time.Now()
	if servingValid(certFile, keyFile, ca, dns, ips, now) {
		return certFile, keyFile, nil
	}

	certPEM, keyPEM, err := ca.issueServing(dns, ips, now, servingValidity)
	if err != nil {
		return "", "", fmt.Errorf("issuing serving certificate: %w", err)
	}
	if err := ensureDir(d.Path); err != nil {
		return "", "", err
	}
	// A crash between the two writes leaves a key that does not match the
	// certificate, which the next call detects and repairs.
	if err := atomicfile.Write(keyFile, keyPEM, keyMode); err != nil {
		return "", "", fmt.Errorf("writing serving key: %w", err)
	}
	if err := atomicfile.Write(certFile, certPEM, certMode); err != nil {
		return "", "", fmt.Errorf("writing serving certificate: %w", err)
	}
	return certFile, keyFile, nil
}

func (ca *CA) issueServing(dns []string, ips []net.IP, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: servingCommonName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    dns,
		IPAddresses: ips,
	}
	return ca.issue(tmpl, now, validity)
}

// servingValid reports whether the files hold a matching certificate and key,
// the certificate signed by ca for server auth, valid for at least renewBefore
// after now and covering dns and ips. Any problem reading them means "no":
// the serving certificate is derived data and is simply regenerated.
func servingValid(certFile, keyFile string, ca *CA, dns []string, ips []net.IP, now time.Time) bool {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return false
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return false
	}
	leaf, ok := verifiedLeaf(certPEM, keyPEM, ca, x509.ExtKeyUsageServerAuth, now)
	if !ok {
		return false
	}
	return covers(leaf, dns, ips)
}

// verifiedLeaf parses a certificate/key pair and returns the certificate if
// the key matches it, it chains to ca for usage at now, and it does not
// expire within renewBefore.
func verifiedLeaf(certPEM, keyPEM []byte, ca *CA, usage x509.ExtKeyUsage, now time.Time) (*x509.Certificate, bool) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil || len(pair.Certificate) == 0 {
		return nil, false
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, false
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots:       ca.pool(),
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{usage},
	}); err != nil {
		return nil, false
	}
	if now.Add(renewBefore).After(leaf.NotAfter) {
		return nil, false
	}
	return leaf, true
}

// servingSANs splits hosts (plus the defaults) into DNS names and IP
// addresses, trimmed, lower-cased and without duplicates, in order.
func servingSANs(hosts []string) (dns []string, ips []net.IP) {
	seen := map[string]bool{}
	for _, h := range slices.Concat(defaultHosts, hosts) {
		h = strings.TrimSpace(h)
		if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			h = h[1 : len(h)-1]
		}
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			if v4 := ip.To4(); v4 != nil {
				ip = v4
			}
			if k := "ip:" + ip.String(); !seen[k] {
				seen[k] = true
				ips = append(ips, ip)
			}
			continue
		}
		h = strings.ToLower(h)
		if k := "dns:" + h; !seen[k] {
			seen[k] = true
			dns = append(dns, h)
		}
	}
	return dns, ips
}

// covers reports whether c lists every name in dns and every address in ips
// among its SANs.
func covers(c *x509.Certificate, dns []string, ips []net.IP) bool {
	for _, name := range dns {
		if !slices.ContainsFunc(c.DNSNames, func(n string) bool { return strings.EqualFold(n, name) }) {
			return false
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}
