package pki

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/backstop-io/backstop/pkg/atomicfile"
)

const (
	// kubeconfigName names the cluster and the context of every kubeconfig.
	kubeconfigName = "backstop"

	adminUser           = "backstop-admin"
	adminGroup          = "system:masters"
	adminKubeconfigFile = "admin.kubeconfig"
)

// Kubeconfig returns a kubeconfig (clientcmd format, YAML) for user/groups
// with an embedded client certificate and key and the CA embedded as
// certificate-authority-data. The cluster and the context are named
// "backstop" and the context is current; the user entry is named after user.
func (ca *CA) Kubeconfig(serverURL, user string, groups []string) ([]byte, error) {
	if err := checkServerURL(serverURL); err != nil {
		return nil, fmt.Errorf("building kubeconfig for %q: %w", user, err)
	}
	certPEM, keyPEM, err := ca.ClientCert(user, groups)
	if err != nil {
		return nil, fmt.Errorf("building kubeconfig: %w", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[kubeconfigName] = &clientcmdapi.Cluster{
		Server:                   serverURL,
		CertificateAuthorityData: ca.CertPEM,
	}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{
		ClientCertificateData: certPEM,
		ClientKeyData:         keyPEM,
	}
	cfg.Contexts[kubeconfigName] = &clientcmdapi.Context{
		Cluster:  kubeconfigName,
		AuthInfo: user,
	}
	cfg.CurrentContext = kubeconfigName
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding kubeconfig for %q: %w", user, err)
	}
	return data, nil
}

func checkServerURL(serverURL string) error {
	if serverURL == "" {
		return errors.New("empty server URL")
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return fmt.Errorf("invalid server URL: %w", err)
	}
	if u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("invalid server URL %q: want scheme://host[:port]", serverURL)
	}
	return nil
}

// WriteAdminKubeconfig writes <dataDir>/admin.kubeconfig (0600) for user
// "backstop-admin" in group "system:masters" and returns its path.
//
// An existing file is kept as is if it is still usable: its current context's
// server is serverURL, it embeds ca's certificate, and its client certificate
// matches its key, is signed by ca for client auth, names backstop-admin in
// system:masters and does not expire within 30 days. Otherwise (including an
// unparsable file) it is regenerated.
func WriteAdminKubeconfig(dataDir string, ca *CA, serverURL string) (string, error) {
	path := filepath.Join(dataDir, adminKubeconfigFile)
	if ca == nil || ca.Cert == nil || ca.Key == nil {
		return "", fmt.Errorf("writing admin kubeconfig %s: no CA", path)
	}
	existing, err := os.ReadFile(path)
	switch {
	case err == nil:
		if adminKubeconfigValid(existing, ca, serverURL, time.Now()) {
			return path, nil
		}
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("reading admin kubeconfig %s: %w", path, err)
	}

	data, err := ca.Kubeconfig(serverURL, adminUser, []string{adminGroup})
	if err != nil {
		return "", fmt.Errorf("writing admin kubeconfig %s: %w", path, err)
	}
	if err := ensureDir(dataDir); err != nil {
		return "", err
	}
	if err := atomicfile.Write(path, data, keyMode); err != nil {
		return "", fmt.Errorf("writing admin kubeconfig: %w", err)
	}
	return path, nil
}

func adminKubeconfigValid(data []byte, ca *CA, serverURL string, now time.Time) bool {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return false
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		return false
	}
	cluster, auth := cfg.Clusters[ctx.Cluster], cfg.AuthInfos[ctx.AuthInfo]
	if cluster == nil || auth == nil {
		return false
	}
	if cluster.Server != serverURL || !bytes.Equal(cluster.CertificateAuthorityData, ca.CertPEM) {
		return false
	}
	leaf, ok := verifiedLeaf(auth.ClientCertificateData, auth.ClientKeyData, ca, x509.ExtKeyUsageClientAuth, now)
	if !ok {
		return false
	}
	return leaf.Subject.CommonName == adminUser && slices.Contains(leaf.Subject.Organization, adminGroup)
}
