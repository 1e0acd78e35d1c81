package objectstore

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

func TestEndpointGuardCheck(t *testing.T) {
	own := func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("10.1.2.3")}, nil }
	g := EndpointGuard{Denied: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}, ownAddresses: own}
	for addr, refused := range map[string]bool{
		"127.0.0.1": true, "127.9.9.9": true, "::1": true, "::ffff:127.0.0.1": true,
		"169.254.169.254": true, "fe80::1": true, "0.0.0.0": true, "::": true, "224.0.0.1": true,
		"10.96.0.1": true, "10.111.255.254": true, // the service network
		"10.1.2.3": true, // the server's own address
		"10.1.2.4": false, "192.0.2.10": false, "2001:db8::1": false, "10.112.0.1": false,
	} {
		err := g.Check(netip.MustParseAddr(addr))
		if refused != (err != nil) {
			t.Errorf("Check(%s) = %v, want refused %v", addr, err, refused)
		}
		if err != nil && !errors.Is(err, ErrEndpointRefused) {
			t.Errorf("Check(%s) = %v, not ErrEndpointRefused", addr, err)
		}
	}
	allowed := EndpointGuard{Allowed: []string{"127.0.0.1", "169.254.0.0/16", "minio.example"}, ownAddresses: own}
	for _, addr := range []string{"127.0.0.1", "::ffff:127.0.0.1", "169.254.169.254"} {
		if err := allowed.Check(netip.MustParseAddr(addr)); err != nil {
			t.Errorf("allowed %s refused: %v", addr, err)
		}
	}
	if err := allowed.Check(netip.MustParseAddr("127.0.0.2")); err == nil {
		t.Error("127.0.0.2 allowed by 127.0.0.1")
	}
	if !allowed.allowsHost("MINIO.example.") || allowed.allowsHost("minio.example.evil") {
		t.Error("host names matched wrongly")
	}
}

// TestTenantLocationNeverReachesLoopback: a tenant's S3 location on a
// server listening on loopback (by address and by a name resolving to it)
// is refused before any request reaches the listener, unless the admin's
// policy allows the host; without credentials it is not opened at all.
// TestEndpointGuardPin: a host is resolved once and replaced by the
// address checked (kopia's S3 client then asks no resolver), kept where
// verified TLS needs the name or the admin allows it by name, and refused
// as Check refuses it.
func TestEndpointGuardPin(t *testing.T) {
	ctx := context.Background()
	own := func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("10.1.2.3")}, nil }
	g := EndpointGuard{Allowed: []string{"127.0.0.0/8", "::1", "minio.example"}, ownAddresses: own}
	for _, c := range []struct {
		hostPort string
		keepName bool
		want     []string // any of these
		refused  bool
	}{
		{hostPort: "localhost:9000", want: []string{"127.0.0.1:9000", "[::1]:9000"}},
		{hostPort: "localhost", want: []string{"127.0.0.1", "[::1]"}},
		{hostPort: "localhost:9000", keepName: true, want: []string{"localhost:9000"}},
		{hostPort: "192.0.2.10:443", want: []string{"192.0.2.10:443"}},
		{hostPort: "[2001:db8::1]:9000", want: []string{"[2001:db8::1]:9000"}},
		{hostPort: "minio.example:9000", want: []string{"minio.example:9000"}},
		{hostPort: "169.254.169.254:80", refused: true},
		{hostPort: "10.1.2.3:9000", keepName: true, refused: true},
	} {
		got, err := g.Pin(ctx, c.hostPort, c.keepName)
		if c.refused {
			if !errors.Is(err, ErrEndpointRefused) {
				t.Errorf("Pin(%s) = %q, %v; want refused", c.hostPort, got, err)
			}
			continue
		}
		if err != nil || !slices.Contains(c.want, got) {
			t.Errorf("Pin(%s, keepName %v) = %q, %v; want one of %v", c.hostPort, c.keepName, got, err, c.want)
		}
	}
}

func TestTenantLocationNeverReachesLoopback(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusForbidden)
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	creds := []byte("[default]\naws_access_key_id = a\naws_secret_access_key = b\n")
	secrets := func(context.Context, string, string, string) ([]byte, error) { return creds, nil }
	location := func(url string) *velerov1.BackupStorageLocation {
		return &velerov1.BackupStorageLocation{
			ObjectMeta: metav1.ObjectMeta{Name: "tenant", Labels: map[string]string{oadpv1alpha1.NabslOriginNACUUIDLabel: "u"}},
			Spec: velerov1.BackupStorageLocationSpec{Provider: ProviderAWS, Config: map[string]string{S3ConfigURL: url, S3ConfigForcePathStyle: "true"},
				Credential:  &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "cloud"},
				StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: "bucket"}}},
		}
	}
	for _, c := range []struct {
		name    string
		url     string
		allowed []string
		reaches bool
	}{
		{name: "by address", url: "http://127.0.0.1" + port},
		{name: "by a name resolving to loopback", url: "http://localhost" + port},
		{name: "by address, allowed", url: "http://127.0.0.1" + port, allowed: []string{"127.0.0.0/8"}, reaches: true},
		{name: "by name, allowed by name", url: "http://localhost" + port, allowed: []string{"localhost"}, reaches: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			requests.Store(0)
			o := Opener{Secrets: secrets, TenantEndpoints: func(context.Context) ([]string, error) { return c.allowed, nil }}
			store, _, err := o.Open(context.Background(), location(c.url))
			if err != nil {
				t.Fatal(err)
			}
			err = store.Probe(context.Background())
			if got := requests.Load() > 0; got != c.reaches {
				t.Errorf("requests reached the listener: %v, want %v (probe: %v)", got, c.reaches, err)
			}
			if !c.reaches && !errors.Is(err, ErrEndpointRefused) && !strings.Contains(err.Error(), ErrEndpointRefused.Error()) {
				t.Errorf("probe error %v, want the guard's", err)
			}
		})
	}
	t.Run("without credentials", func(t *testing.T) {
		l := location("http://192.0.2.1")
		l.Spec.Credential = nil
		if _, _, err := (Opener{Secrets: secrets}).Open(context.Background(), l); err == nil || !strings.Contains(err.Error(), "needs credentials") {
			t.Errorf("opened without credentials: %v", err)
		}
	})
	t.Run("with a credentials file of the server", func(t *testing.T) {
		l := location("http://192.0.2.1")
		l.Spec.Credential = nil
		l.Spec.Config[S3ConfigCredentialsFile] = "/etc/hostname"
		if _, _, err := (Opener{Secrets: secrets}).Open(context.Background(), l); err == nil || !strings.Contains(err.Error(), "reads no file of the server") {
			t.Errorf("opened with the server's file: %v", err)
		}
	})
}
