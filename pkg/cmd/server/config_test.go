package server

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestConfig: the flags resolve into the server's configuration, standalone
// and aggregated, without touching the machine (the data directory is not
// even created).
func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		check func(t *testing.T, dataDir string, c *Config)
	}{
		{name: "standalone defaults", check: func(t *testing.T, dataDir string, c *Config) {
			if c.Mode != ModeStandalone || c.Pebble == nil || c.Etcd != nil {
				t.Errorf("mode %q, pebble %v, etcd %v: want standalone on pebble", c.Mode, c.Pebble, c.Etcd)
			}
			if c.Pebble.Dir != filepath.Join(dataDir, "pebble") || c.Pebble.CompactionInterval != 5*time.Minute || !c.Pebble.WatchCache {
				t.Errorf("pebble options %+v", *c.Pebble)
			}
			e := c.Extra
			if e.Namespace != "backstop-system" || e.DataDir != dataDir || e.GarbageCollection || e.ExternalURL != "" {
				t.Errorf("namespace %q, data dir %q, garbage collection %v, external URL %q", e.Namespace, e.DataDir, e.GarbageCollection, e.ExternalURL)
			}
			if e.DownloadSigningKeyFile != filepath.Join(dataDir, "pki", "download-signing.key") {
				t.Errorf("signing key file %q", e.DownloadSigningKeyFile)
			}
			if e.ConcurrentBackups != 1 || e.ConcurrentRestores != 4 || e.ClientQPS != 100 || e.ClientBurst != 100 || e.ClientPageSize != 500 || e.EngineQPS != 1000 || e.EngineBurst != 2000 {
				t.Errorf("limits %d %d %v %d %d %v %d", e.ConcurrentBackups, e.ConcurrentRestores, e.ClientQPS, e.ClientBurst, e.ClientPageSize, e.EngineQPS, e.EngineBurst)
			}
			if e.Election == nil || e.Election.Name != "backstop-engines" || e.Election.LeaseDuration != 15*time.Second || e.Election.Identity != "" {
				t.Errorf("election %+v: want the default Lease, without an identity before Run", e.Election)
			}
			if e.DisabledControllers.Len() != 0 || len(e.Opener.TenantDenied) != 0 || e.VMFullBackupMode != "push" {
				t.Errorf("disabled %v, tenant-denied %v, VM full backups %q", e.DisabledControllers, e.Opener.TenantDenied, e.VMFullBackupMode)
			}
			if e.Backend != nil || e.RBAC != nil || e.Source != nil || e.HostCluster != nil {
				t.Error("Config opened the storage, the RBAC or a cluster client")
			}
		}},
		{name: "aggregated", flags: []string{"--mode=aggregated", "--external-url=https://kube.example:6443", "--source-kubeconfig=/etc/source.kubeconfig"},
			check: func(t *testing.T, _ string, c *Config) {
				if c.Mode != ModeAggregated || !c.Extra.GarbageCollection {
					t.Errorf("mode %q, garbage collection %v: want aggregated, collected by kube-controller-manager", c.Mode, c.Extra.GarbageCollection)
				}
				if c.Extra.ExternalURL != "https://kube.example:6443" || c.SourceKubeconfig != "/etc/source.kubeconfig" {
					t.Errorf("external URL %q, source %q", c.Extra.ExternalURL, c.SourceKubeconfig)
				}
			}},
		{name: "etcd3", flags: []string{"--storage-backend=etcd3", "--etcd-servers=http://127.0.0.1:2379", "--etcd-prefix=/b1", "--watch-cache=false"},
			check: func(t *testing.T, _ string, c *Config) {
				if c.Pebble != nil || c.Etcd == nil {
					t.Fatalf("pebble %v, etcd %v: want etcd3", c.Pebble, c.Etcd)
				}
				if got := c.Etcd.StorageConfig.Transport.ServerList; len(got) != 1 || got[0] != "http://127.0.0.1:2379" || c.Etcd.StorageConfig.Prefix != "/b1" {
					t.Errorf("etcd servers %v, prefix %q", got, c.Etcd.StorageConfig.Prefix)
				}
				if c.Extra.WatchCache || c.Etcd.EnableWatchCache || c.Etcd.StorageConfig.Type != "etcd3" {
					t.Errorf("watch cache %v (etcd's %v), storage type %q: want off, etcd3", c.Extra.WatchCache, c.Etcd.EnableWatchCache, c.Etcd.StorageConfig.Type)
				}
			}},
		{name: "engines, networks and election", flags: []string{"--disable-controllers=backup,nonadmin-gc", "--tenant-denied-networks=10.96.0.1/12,fd00::/8",
			"--leader-elect=false", "--download-signing-key-file=/keys/links", "--concurrent-backups=4", "--concurrent-restores=2", "--vm-full-backup-mode=pull"},
			check: func(t *testing.T, _ string, c *Config) {
				e := c.Extra
				if !e.DisabledControllers.HasAll("backup", "nonadmin-gc") || e.DisabledControllers.Len() != 2 {
					t.Errorf("disabled %v", e.DisabledControllers)
				}
				want := []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00::/8")}
				if len(e.Opener.TenantDenied) != 2 || e.Opener.TenantDenied[0] != want[0] || e.Opener.TenantDenied[1] != want[1] {
					t.Errorf("tenant-denied %v, want %v (masked)", e.Opener.TenantDenied, want)
				}
				if e.Election != nil || e.DownloadSigningKeyFile != "/keys/links" || e.ConcurrentBackups != 4 || e.ConcurrentRestores != 2 || e.VMFullBackupMode != "pull" {
					t.Errorf("election %v, signing key %q, concurrent %d and %d, VM mode %q", e.Election, e.DownloadSigningKeyFile, e.ConcurrentBackups, e.ConcurrentRestores, e.VMFullBackupMode)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := filepath.Join(t.TempDir(), "data")
			o := NewOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(append([]string{"--data-dir=" + dataDir}, tc.flags...)); err != nil {
				t.Fatal(err)
			}
			c, err := o.Config()
			if err != nil {
				t.Fatalf("Config: %v", err)
			}
			tc.check(t, dataDir, c)
			if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
				t.Errorf("Config touched the data directory: %v", err)
			}
		})
	}
}

// TestConfigRefuses: bad flags are refused by Config with the flag named.
func TestConfigRefuses(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--mode=both"}, "--mode"},
		{[]string{"--storage-backend=sqlite"}, "--storage-backend"},
		{[]string{"--disable-controllers=nope"}, "unknown controller"},
		{[]string{"--tenant-denied-networks=10.0.0.0"}, "--tenant-denied-networks"},
		{[]string{"--concurrent-backups=0"}, "--concurrent-backups"},
		{[]string{"--leader-elect-lease-duration=1s"}, "--leader-elect-lease-duration"},
		{[]string{"--data-mover-service-account=Not_A_Name"}, "--data-mover-service-account \"Not_A_Name\": name:"},
		{[]string{"--data-mover-service-account=../backstop-apiserver"}, "--data-mover-service-account \"../backstop-apiserver\": namespace:"},
		{[]string{"--data-mover-service-account=ns/a/b"}, "--data-mover-service-account \"ns/a/b\": name:"},
		{[]string{"--data-mover-storage-check-interval=500ms"}, "--data-mover-storage-check-interval must be at least 1s, not 500ms"},
		{[]string{"--data-mover-upload-bytes-per-second=-1"}, "--data-mover-upload-bytes-per-second must not be negative, not -1"},
	} {
		t.Run(strings.Join(tc.flags, " "), func(t *testing.T) {
			o := NewOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(append([]string{"--data-dir=" + t.TempDir()}, tc.flags...)); err != nil {
				t.Fatal(err)
			}
			if _, err := o.Config(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Config: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
