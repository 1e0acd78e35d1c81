// Package server is the backstop-apiserver command: its flags, the
// configuration they produce, and the run loop. It also holds the
// `kubeconfig` subcommand that issues client kubeconfigs signed by the
// standalone server's CA.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	componentbaseconfig "k8s.io/component-base/config"
	componentbaseoptions "k8s.io/component-base/config/options"
	netutils "k8s.io/utils/net"

	"github.com/backstop-io/backstop/pkg/apiserver"
	"github.com/backstop-io/backstop/pkg/datamover/kopiarepo"
	"github.com/backstop-io/backstop/pkg/engine/backupsync"
	"github.com/backstop-io/backstop/pkg/engine/datamover"
	"github.com/backstop-io/backstop/pkg/engine/leader"
	"github.com/backstop-io/backstop/pkg/engine/location"
	"github.com/backstop-io/backstop/pkg/engine/restore"
	"github.com/backstop-io/backstop/pkg/objectstore"
	"github.com/backstop-io/backstop/pkg/standalone/pki"
	"github.com/backstop-io/backstop/pkg/virt"
)

// Runtime modes.
const (
	// ModeStandalone: client-certificate authentication against the
	// server's own CA, authorization by the server itself, no cluster needed.
	ModeStandalone = "standalone"
	// ModeAggregated: behind kube-apiserver through an APIService, with
	// delegated authentication and authorization.
	ModeAggregated = "aggregated"
)

// Options are the flags of backstop-apiserver, a field per flag or group
// of flags (AddFlags says what each means; --help prints it). Config
// resolves them; apiserver.ExtraConfig documents what the server does with
// each.
type Options struct {
	Mode                   string
	DataDir                string
	Namespace              string
	TenantDeniedNetworks   []string
	ExternalURL            string
	DownloadSigningKeyFile string
	TLSSANs                []string
	StorageBackend         string
	// Etcd: k8s.io/apiserver's --etcd-* flags (etcdFlags).
	Etcd               *genericoptions.EtcdOptions
	CompactionInterval time.Duration
	WatchCache         bool
	ListsFromStorage   bool
	ConcurrentBackups  int
	// LocationUsageInterval is how often storage locations are measured.
	LocationUsageInterval time.Duration
	// LocationCheckTimeout bounds a storage location's check (opening it
	// and probing its endpoint).
	LocationCheckTimeout time.Duration
	// VMBootDirs are the directories a VM defined anew by a restore may
	// boot a kernel or firmware from.
	VMBootDirs []string
	// VMNetworks are the libvirt networks and bridges such a VM may be on.
	VMNetworks []string
	// RestoreScratchDir is where restores and previews spool (default:
	// the data directory).
	RestoreScratchDir string
	// RestoreScratchSize ("": none) is the scratch directory's size when
	// something other than its disk bounds it (an emptyDir's sizeLimit).
	RestoreScratchSize string
	// RestoreServiceAccount is the identity admins' restores write as.
	RestoreServiceAccount string
	SourceKubeconfig      string
	ClientQPS             float32
	ClientBurst           int
	ClientPageSize        int
	RestoreItemWorkers    int
	ConcurrentRestores    int
	// ConfigurationDir is --configuration-dir.
	ConfigurationDir string
	// GCPercent (0: not given) and MemoryLimit ("": not given) set the
	// garbage collector (memory.go).
	GCPercent                  int
	MemoryLimit                string
	RestoreLimits              restore.Limits
	BackupSyncMaxPerPass       int
	EngineQPS                  float32
	EngineBurst                int
	DisableControllers         []string
	BackupSyncPeriod           time.Duration
	ScheduleSkipImmediately    bool
	EngineGroups               []string
	LibvirtURI                 string
	VMHost                     string
	DataMoverCSIEndpoints      map[string]string
	DataMoverConcurrency       int
	DataMoverUploadBPS         int64
	DataMoverStorageCheck      time.Duration
	DataMoverServiceAccount    string
	VMFullBackupMode           string
	VolumeRoot                 string
	CBTStateDir                string
	ItemOperationSyncFrequency time.Duration

	// LeaderElection: kube-controller-manager's --leader-elect* flags.
	LeaderElection componentbaseconfig.LeaderElectionConfiguration

	// k8s.io/apiserver's serving, audit, feature, delegated authentication
	// and authorization and host cluster flags.
	SecureServing  *genericoptions.SecureServingOptionsWithLoopback
	Audit          *genericoptions.AuditOptions
	Features       *genericoptions.FeatureOptions
	Authentication *genericoptions.DelegatingAuthenticationOptions
	Authorization  *genericoptions.DelegatingAuthorizationOptions
	CoreAPI        *genericoptions.CoreAPIOptions
}

// NewOptions returns the defaults: standalone on https://127.0.0.1:8443
// with data under ./data.
func NewOptions() *Options {
	o := &Options{
		Mode:                       ModeStandalone,
		Namespace:                  "backstop-system",
		DataDir:                    "data",
		StorageBackend:             apiserver.StoragePebble,
		Etcd:                       genericoptions.NewEtcdOptions(storagebackend.NewDefaultConfig("/registry", nil)),
		CompactionInterval:         5 * time.Minute,
		WatchCache:                 true,
		ListsFromStorage:           true,
		ConcurrentBackups:          1,
		LocationUsageInterval:      location.DefaultUsageInterval,
		LocationCheckTimeout:       location.DefaultCheckTimeout,
		VMBootDirs:                 virt.DefaultBootDirs,
		VMNetworks:                 virt.DefaultNetworks,
		ClientQPS:                  100,
		ClientBurst:                100,
		RestoreItemWorkers:         restore.DefaultItemWorkers,
		ConcurrentRestores:         restore.DefaultConcurrent,
		RestoreLimits:              restore.DefaultLimits,
		BackupSyncMaxPerPass:       backupsync.DefaultMaxPerPass,
		EngineQPS:                  1000,
		EngineBurst:                2000,
		ClientPageSize:             500,
		BackupSyncPeriod:           time.Minute,
		ItemOperationSyncFrequency: 10 * time.Second,
		VMFullBackupMode:           "push",
		VMHost:                     defaultVMHost(),
		DataMoverConcurrency:       datamover.DefaultConcurrency,
		DataMoverStorageCheck:      kopiarepo.DefaultStorageCheckInterval,
		LeaderElection: componentbaseconfig.LeaderElectionConfiguration{
			LeaderElect:   true,
			LeaseDuration: metav1.Duration{Duration: 15 * time.Second},
			RenewDeadline: metav1.Duration{Duration: 10 * time.Second},
			RetryPeriod:   metav1.Duration{Duration: 2 * time.Second},
			ResourceLock:  "leases",
			ResourceName:  "backstop-engines",
		},
		SecureServing:  genericoptions.NewSecureServingOptions().WithLoopback(),
		Audit:          genericoptions.NewAuditOptions(),
		Features:       genericoptions.NewFeatureOptions(),
		Authentication: genericoptions.NewDelegatingAuthenticationOptions(),
		Authorization:  genericoptions.NewDelegatingAuthorizationOptions(),
		CoreAPI:        genericoptions.NewCoreAPIOptions(),
	}
	o.SecureServing.BindAddress = netutils.ParseIPSloppy("127.0.0.1")
	o.SecureServing.BindPort = 8443
	return o
}

// AddFlags registers the flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Mode, "mode", o.Mode, "standalone (own CA, client certificates, no cluster needed) or aggregated (behind kube-apiserver, delegated authentication and authorization)")
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "directory holding the database (pebble/), the standalone PKI (pki/) and admin.kubeconfig")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "the admin namespace: Velero objects (backups, schedules, restores, storage locations, ...) are processed there, as Velero processes its install namespace")
	fs.StringSliceVar(&o.TenantDeniedNetworks, "tenant-denied-networks", o.TenantDeniedNetworks, "CIDRs tenants' storage locations (s3Url) never connect to, besides loopback, link-local and this host's own addresses, which they never reach either: give the cluster's service network here; a DataProtectionApplication's spec.nonAdmin.allowedLocationEndpoints lets hosts through")
	fs.StringVar(&o.ExternalURL, "external-url", o.ExternalURL, "base URL download links point at: this server standalone (default https://<bind-address>:<port>); kube-apiserver as users reach it aggregated, the links going through its aggregator (default: the server of --kubeconfig, or in-cluster https://kubernetes.default.svc)")
	fs.StringVar(&o.DownloadSigningKeyFile, "download-signing-key-file", o.DownloadSigningKeyFile, "file holding the keys download links are signed with: 32 or more random bytes (created when missing), or hex keys one per line, the first signing and all verifying, read again when the file changes (rotate by putting a new key first, then removing the old one); default <data-dir>/pki/download-signing.key: give every replica the same file, and links work on each of them and after restarts")
	fs.StringSliceVar(&o.TLSSANs, "tls-san", o.TLSSANs, "extra DNS names or IPs for the generated serving certificate (standalone)")
	fs.StringVar(&o.StorageBackend, "storage-backend", o.StorageBackend, "where objects are stored: pebble (embedded, under --data-dir; one server) or etcd3 (the etcd cluster of --etcd-servers, shared by every replica)")
	fs.DurationVar(&o.CompactionInterval, "storage-compaction-interval", o.CompactionInterval, "how often Pebble's history older than one interval is compacted; 0 disables compaction (etcd3: --etcd-compaction-interval)")
	o.addEtcdFlags(fs)
	o.addLeaderElectionFlags(fs)
	fs.DurationVar(&o.BackupSyncPeriod, "backup-sync-period", o.BackupSyncPeriod, "how often storage locations are read for backups this server has no Backup of, which are then created (Velero's --backup-sync-period)")
	fs.DurationVar(&o.ItemOperationSyncFrequency, "item-operation-sync-frequency", o.ItemOperationSyncFrequency, "how often the async operations of backups (VM disk backups) are checked (Velero's --item-operation-sync-frequency)")
	fs.StringSliceVar(&o.EngineGroups, "engine-groups", o.EngineGroups, "groups whose members may write the status of backups, restores, deletion requests, schedules and VM backups as the server's own engines do (for engines run elsewhere with --disable-controllers); by default only the server itself")
	fs.BoolVar(&o.ScheduleSkipImmediately, "schedule-skip-immediately", o.ScheduleSkipImmediately, "skip the run that is due at once when a schedule is created or unpaused, for schedules that do not set spec.skipImmediately (Velero's --schedule-skip-immediately)")
	fs.StringVar(&o.VMFullBackupMode, "vm-full-backup-mode", o.VMFullBackupMode, "how full VM disk backups copy: push (QEMU's backup job writes the target) or pull (QEMU exports the disk over NBD and qemu-img copies it, 8 requests in flight); docs/benchmarks.md compares them; incrementals are always pushed")
	fs.StringVar(&o.VMHost, "vm-host", o.VMHost, "the name of the host --libvirt-uri runs on (a DNS subdomain; a Kubernetes node's name, say): with leader election, the replicas of one host elect one among them, on the Lease <--leader-elect-resource-name>-vm-<host>, to run the VM engines for that libvirt's VMs")
	fs.StringToStringVar(&o.DataMoverCSIEndpoints, "data-mover-csi-endpoint", o.DataMoverCSIEndpoints, "a CSI driver's node service on this host, as <driver>=unix:///<socket> (repeatable): the data mover moves the data of that driver's snapshots here (DataUploads of backups with snapshotMoveData), publishing their volumes as kubelet would; the host is --vm-host, and with leader election its replicas elect one to do it")
	fs.Int64Var(&o.DataMoverUploadBPS, "data-mover-upload-bytes-per-second", o.DataMoverUploadBPS, "the most bytes per second each repository of this host's data mover writes to its storage location (0: no limit)")
	fs.DurationVar(&o.DataMoverStorageCheck, "data-mover-storage-check-interval", o.DataMoverStorageCheck, "how often a running upload that has written nothing since checks its storage location; three failed checks in a row (each bounded to 10 s) end it with the storage's error, where kopia alone would retry its writes for as long as the upload runs")
	fs.StringVar(&o.DataMoverServiceAccount, "data-mover-service-account", o.DataMoverServiceAccount, "the ServiceAccount of the source cluster (a name in the admin namespace, or <namespace>/<name>) whose tokens this host's data mover presents to CSI drivers' SnapshotMetadata services (the external-snapshot-metadata sidecar), to read block volumes by the blocks changed since their previous upload; it needs to create its own tokens' requests through this server's credentials and get VolumeSnapshots in the admin namespace (empty: block volumes are read whole)")
	fs.IntVar(&o.DataMoverConcurrency, "data-mover-concurrency", o.DataMoverConcurrency, "how many DataUploads this host's data mover runs at once (Velero's node-agent concurrency)")
	fs.StringVar(&o.LibvirtURI, "libvirt-uri", o.LibvirtURI, "the libvirt daemon VirtualMachineBackups run on (the VirtualMachine <name> of namespace <ns> is its domain <ns>_<name>)")
	fs.StringVar(&o.CBTStateDir, "cbt-state-dir", o.CBTStateDir, "the directory holding the qcow2 overlays that give raw VM disks changed block tracking, one subdirectory per libvirt domain (default <volume-root>/.cbt); QEMU must be able to reach it")
	fs.StringVar(&o.VolumeRoot, "volume-root", o.VolumeRoot, "the directory whose <namespace>/<pvcName> subdirectories VirtualMachineBackups push into (default <data-dir>/volumes); QEMU must be able to reach it (every directory on the path world-executable)")
	fs.DurationVar(&o.LocationUsageInterval, "location-usage-interval", o.LocationUsageInterval, "how often the objects of each available storage location are measured (status.usage, drawn over time by the console; 0: never). Measuring lists every object under the location's prefix")
	fs.StringSliceVar(&o.VMBootDirs, "vm-boot-dirs", o.VMBootDirs, "the directories a VM that a restore defines anew may read its kernel, initrd, device tree or firmware from (its saved definition is in a volume its namespace writes: a path elsewhere is left out of the domain, and the restore's log says so)")
	fs.StringSliceVar(&o.VMNetworks, "vm-restore-networks", o.VMNetworks, "the libvirt networks and bridges a VM that a restore defines anew may have interfaces on (its saved definition is in a volume its namespace writes: another network could be a host's management or storage network, or hand the guest a host device); an interface elsewhere, or on user networking, is left out and the restore's log says so")
	fs.DurationVar(&o.LocationCheckTimeout, "location-check-timeout", o.LocationCheckTimeout, "how long a storage location's check (opening it, probing its endpoint) may take before the location is Unavailable: a tenant's endpoint that answers slowly holds one of the location engine's workers no longer")
	fs.IntVar(&o.ConcurrentBackups, "concurrent-backups", o.ConcurrentBackups, "how many backups may be ReadyToStart or InProgress at once (Velero's --concurrent-backups)")
	fs.StringVar(&o.SourceKubeconfig, "source-kubeconfig", o.SourceKubeconfig, "kubeconfig of the cluster whose resources are backed up (default: this server in standalone mode, the host cluster in aggregated mode)")
	fs.Float32Var(&o.ClientQPS, "client-qps", o.ClientQPS, "maximum requests per second a backup makes to the source cluster, or a restore to the target (Velero's --client-qps, same default)")
	fs.IntVar(&o.ClientBurst, "client-burst", o.ClientBurst, "maximum burst of requests a backup makes to the source cluster, or a restore to the target (Velero's --client-burst, same default)")
	fs.IntVar(&o.BackupSyncMaxPerPass, "backup-sync-max-per-pass", o.BackupSyncMaxPerPass, "the most Backups one sync pass over a storage location makes from what it finds there; the rest wait for the next passes")
	fs.Int64Var(&o.RestoreLimits.Items, "restore-max-items", o.RestoreLimits.Items, "the most items a backup's tarball may hold for a restore of it (0: no limit); past it the restore fails and the queue goes on")
	fs.Int64Var(&o.RestoreLimits.Bytes, "restore-max-bytes", o.RestoreLimits.Bytes, "the most bytes, uncompressed, a backup's tarball may hold for a restore of it (0: no limit): a gzip bomb ends here")
	fs.Int64Var(&o.RestoreLimits.ScratchBytes, "restore-max-scratch-bytes", o.RestoreLimits.ScratchBytes, "the most bytes a restore spools on the scratch disk (<restore-scratch-dir>/scratch) for its second pass (0: no limit); whatever this says, a restore stops before the scratch disk has less than 512 MiB or 2% of it free")
	fs.StringVar(&o.RestoreServiceAccount, "restore-service-account", o.RestoreServiceAccount, "<namespace>/<name> of the ServiceAccount admins' restores (and their previews) write as, impersonated, in the cluster they restore into: its rights are what a restore may write, and the server's own account needs none of them (the chart's backstop-restorer). Empty: the server's own identity. Tenants' restores write as their user, whatever this says")
	fs.StringVar(&o.RestoreScratchSize, "restore-scratch-size", o.RestoreScratchSize, "the size of --restore-scratch-dir when something other than its disk bounds it (a quantity such as 20Gi: the chart passes its emptyDir's sizeLimit, which kubelet enforces by evicting the pod): the restores and previews running at once spool at most nine tenths of it together")
	fs.StringVar(&o.RestoreScratchDir, "restore-scratch-dir", o.RestoreScratchDir, "the directory restores and previews spool items into (its scratch and preview subdirectories, emptied at start; default: the data directory). Give it a disk of its own: a backup's tarball in a bucket decides how much a restore spools")
	fs.DurationVar(&o.RestoreLimits.Duration, "restore-timeout", o.RestoreLimits.Duration, "the longest a restore may run before it fails (0: no limit)")
	fs.IntVar(&o.GCPercent, "gc-percent", o.GCPercent, fmt.Sprintf("the garbage collector's target heap growth between collections, in percent (Go's GOGC); default %d unless GOGC is set", DefaultGCPercent))
	fs.StringVar(&o.MemoryLimit, "memory-limit", o.MemoryLimit, "the memory the server may use (a quantity such as 512Mi); the Go heap is kept within 90% of it (Go's GOMEMLIMIT); default: the container's memory limit (its cgroup's) unless GOMEMLIMIT is set")
	fs.StringVar(&o.ConfigurationDir, "configuration-dir", o.ConfigurationDir, "a directory of manifests (.yaml, .yml, .json) of the storage locations, snapshot locations and schedules the server keeps in the admin namespace, applied at every start of the engines; those it made from an earlier content that it no longer holds are deleted, others are left alone; when it holds a storage location, no default location is made (the Helm chart's configuration.backupStorageLocation, volumeSnapshotLocation and schedules, mounted from a ConfigMap)")
	fs.IntVar(&o.ConcurrentRestores, "concurrent-restores", o.ConcurrentRestores, "how many restores may run at once; restores whose target namespaces overlap, or that write cluster-scoped items, run one after the other, in the order they were created (Velero runs one restore at a time: 1)")
	fs.IntVar(&o.RestoreItemWorkers, "restore-item-workers", o.RestoreItemWorkers, "how many items of one resource a restore writes at once, all under --client-qps (resources are still restored one after the other, in Velero's order)")
	fs.Float32Var(&o.EngineQPS, "engine-qps", o.EngineQPS, "maximum requests per second the server's engines make to its own API, all engines together (kube-controller-manager's --kube-api-qps; the engines' writes mirror every change at scale, see docs/benchmarks.md)")
	fs.IntVar(&o.EngineBurst, "engine-burst", o.EngineBurst, "maximum burst of requests the server's engines make to its own API (kube-controller-manager's --kube-api-burst)")
	fs.IntVar(&o.ClientPageSize, "client-page-size", o.ClientPageSize, "items per list request to the source cluster")
	fs.StringSliceVar(&o.DisableControllers, "disable-controllers", o.DisableControllers, fmt.Sprintf("engines not to run (as Velero's --disable-controllers), from: %s", strings.Join(apiserver.EngineNames(), ", ")))
	fs.BoolVar(&o.WatchCache, "watch-cache", o.WatchCache, "serve watches and lists from the watch cache in front of the storage")
	fs.BoolVar(&o.ListsFromStorage, "lists-from-storage", o.ListsFromStorage, "write JSON lists of Backstop's resources from the objects' stored bytes instead of encoding each object (--storage-backend=pebble)")
	o.SecureServing.AddFlags(fs)
	o.Audit.AddFlags(fs)
	o.Features.AddFlags(fs)
	o.Authentication.AddFlags(fs)
	o.Authorization.AddFlags(fs)
	o.CoreAPI.AddFlags(fs)
}

// etcdFlags are the flags of k8s.io/apiserver's etcd options that
// backstop-apiserver takes, as kube-apiserver spells them. The others are
// Backstop's own (--storage-backend, --watch-cache) or not acted on
// (storage media type, per-resource servers and cache sizes, encryption at
// rest, garbage collection: set by --mode).
var etcdFlags = []string{
	"etcd-servers", "etcd-prefix", "etcd-cafile", "etcd-certfile", "etcd-keyfile",
	"etcd-compaction-interval", "etcd-count-metric-poll-period", "etcd-db-metric-poll-interval",
	"etcd-healthcheck-timeout", "etcd-readycheck-timeout", "lease-reuse-duration-seconds",
}

// addLeaderElectionFlags registers component-base's leader election
// flags but the lock's kind and namespace: a Lease, in the admin namespace.
func (o *Options) addLeaderElectionFlags(fs *pflag.FlagSet) {
	all := pflag.NewFlagSet("leader-election", pflag.ContinueOnError)
	componentbaseoptions.BindLeaderElectionFlags(&o.LeaderElection, all)
	for _, name := range []string{"leader-elect", "leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period", "leader-elect-resource-name"} {
		fs.AddFlag(all.Lookup(name))
	}
}

// addEtcdFlags registers the etcd options' flags of etcdFlags.
func (o *Options) addEtcdFlags(fs *pflag.FlagSet) {
	all := pflag.NewFlagSet("etcd", pflag.ContinueOnError)
	o.Etcd.AddFlags(all)
	for _, name := range etcdFlags {
		if f := all.Lookup(name); f != nil {
			fs.AddFlag(f)
		}
	}
}

// Validate checks the flags.
func (o *Options) Validate() error {
	var errs []error
	if o.Mode != ModeStandalone && o.Mode != ModeAggregated {
		errs = append(errs, fmt.Errorf("--mode must be %q or %q, not %q", ModeStandalone, ModeAggregated, o.Mode))
	}
	if o.Namespace == "" {
		errs = append(errs, errors.New("--namespace is required"))
	}
	if o.DataDir == "" {
		errs = append(errs, errors.New("--data-dir is required"))
	}
	if _, err := o.tenantDenied(); err != nil {
		errs = append(errs, err)
	}
	if o.VMFullBackupMode != "pull" && o.VMFullBackupMode != "push" {
		errs = append(errs, fmt.Errorf("--vm-full-backup-mode must be pull or push, not %q", o.VMFullBackupMode))
	}
	if o.ItemOperationSyncFrequency <= 0 {
		errs = append(errs, fmt.Errorf("--item-operation-sync-frequency must be positive, not %s", o.ItemOperationSyncFrequency))
	}
	if o.BackupSyncPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--backup-sync-period must be positive, not %s", o.BackupSyncPeriod))
	}
	if sa := o.RestoreServiceAccount; sa != "" {
		if ns, name, ok := strings.Cut(sa, "/"); !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			errs = append(errs, fmt.Errorf("--restore-service-account must be <namespace>/<name>, not %q", sa))
		}
	}
	if o.LocationCheckTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--location-check-timeout must be positive, not %s", o.LocationCheckTimeout))
	}
	if o.LocationUsageInterval < 0 {
		errs = append(errs, fmt.Errorf("--location-usage-interval must not be negative, not %s", o.LocationUsageInterval))
	}
	if o.ConcurrentBackups < 1 {
		errs = append(errs, fmt.Errorf("--concurrent-backups must be at least 1, not %d", o.ConcurrentBackups))
	}
	if o.ClientQPS <= 0 || o.ClientBurst < 1 || o.ClientPageSize < 1 {
		errs = append(errs, fmt.Errorf("--client-qps (%v), --client-burst (%d) and --client-page-size (%d) must be positive", o.ClientQPS, o.ClientBurst, o.ClientPageSize))
	}
	if l := o.RestoreLimits; l.Items < 0 || l.Bytes < 0 || l.ScratchBytes < 0 || l.Duration < 0 {
		errs = append(errs, errors.New("--restore-max-items, --restore-max-bytes, --restore-max-scratch-bytes and --restore-timeout must not be negative"))
	}
	if o.BackupSyncMaxPerPass < 1 {
		errs = append(errs, fmt.Errorf("--backup-sync-max-per-pass must be at least 1, not %d", o.BackupSyncMaxPerPass))
	}
	if o.GCPercent < 0 {
		errs = append(errs, fmt.Errorf("--gc-percent must be positive, not %d", o.GCPercent))
	}
	if o.MemoryLimit != "" {
		if _, err := parseMemoryLimit(o.MemoryLimit); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := o.restoreScratchSize(); err != nil {
		errs = append(errs, err)
	}
	if o.ConcurrentRestores < 1 {
		errs = append(errs, fmt.Errorf("--concurrent-restores must be at least 1, not %d", o.ConcurrentRestores))
	}
	if o.RestoreItemWorkers < 1 {
		errs = append(errs, fmt.Errorf("--restore-item-workers must be at least 1, not %d", o.RestoreItemWorkers))
	}
	if o.DataMoverStorageCheck < time.Second {
		errs = append(errs, fmt.Errorf("--data-mover-storage-check-interval must be at least 1s, not %s", o.DataMoverStorageCheck))
	}
	if o.DataMoverUploadBPS < 0 {
		errs = append(errs, fmt.Errorf("--data-mover-upload-bytes-per-second must not be negative, not %d", o.DataMoverUploadBPS))
	}
	if sa := o.DataMoverServiceAccount; sa != "" {
		if msgs := serviceAccountErrors(sa); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--data-mover-service-account %q: %s", sa, strings.Join(msgs, "; ")))
		}
	}
	if o.DataMoverConcurrency < 1 {
		errs = append(errs, fmt.Errorf("--data-mover-concurrency must be at least 1, not %d", o.DataMoverConcurrency))
	}
	for driver, endpoint := range o.DataMoverCSIEndpoints {
		if p := strings.TrimPrefix(endpoint, "unix://"); !strings.HasPrefix(endpoint, "unix:///") || !filepath.IsAbs(p) {
			errs = append(errs, fmt.Errorf("--data-mover-csi-endpoint %s=%s: not a unix socket (unix:///<absolute path>)", driver, endpoint))
		}
	}
	if o.EngineQPS <= 0 || o.EngineBurst < 1 {
		errs = append(errs, fmt.Errorf("--engine-qps (%v) and --engine-burst (%d) must be positive", o.EngineQPS, o.EngineBurst))
	}
	for _, c := range o.DisableControllers {
		if !slices.Contains(apiserver.EngineNames(), c) {
			errs = append(errs, fmt.Errorf("--disable-controllers: unknown controller %q (known: %s)", c, strings.Join(apiserver.EngineNames(), ", ")))
		}
	}
	switch o.StorageBackend {
	case apiserver.StoragePebble:
	case apiserver.StorageEtcd3:
		errs = append(errs, o.Etcd.Validate()...)
	default:
		errs = append(errs, fmt.Errorf("--storage-backend must be %q or %q, not %q", apiserver.StoragePebble, apiserver.StorageEtcd3, o.StorageBackend))
	}
	if le := o.LeaderElection; le.LeaderElect {
		if le.RetryPeriod.Duration <= 0 || le.RenewDeadline.Duration <= le.RetryPeriod.Duration || le.LeaseDuration.Duration <= le.RenewDeadline.Duration {
			errs = append(errs, fmt.Errorf("--leader-elect-retry-period (%s) < --leader-elect-renew-deadline (%s) < --leader-elect-lease-duration (%s) must hold: a leader stops before another may take over",
				le.RetryPeriod.Duration, le.RenewDeadline.Duration, le.LeaseDuration.Duration))
		}
		if le.ResourceName == "" {
			errs = append(errs, errors.New("--leader-elect-resource-name is required"))
		}
		for _, msg := range validation.IsDNS1123Subdomain(leader.HostLease(le.ResourceName, o.VMHost)) {
			errs = append(errs, fmt.Errorf("--vm-host %q: the Lease name %s: %s", o.VMHost, leader.HostLease(le.ResourceName, o.VMHost), msg))
		}
	}
	if o.CompactionInterval < 0 {
		errs = append(errs, errors.New("--storage-compaction-interval must not be negative"))
	}
	errs = append(errs, o.SecureServing.Validate()...)
	errs = append(errs, o.Audit.Validate()...)
	errs = append(errs, o.Features.Validate()...)
	if o.Mode == ModeAggregated {
		errs = append(errs, o.Authentication.Validate()...)
		errs = append(errs, o.Authorization.Validate()...)
		errs = append(errs, o.CoreAPI.Validate()...)
	}
	return errors.Join(errs...)
}

// standaloneServing makes sure the CA and serving certificate exist under
// the data directory and points serving at them.
func (o *Options) standaloneServing() (*pki.CA, error) {
	dir := pki.New(o.DataDir)
	ca, err := dir.EnsureCA()
	if err != nil {
		return nil, fmt.Errorf("standalone CA: %w", err)
	}
	hosts := append([]string{}, o.TLSSANs...)
	if ip := o.SecureServing.BindAddress; ip != nil && !ip.IsUnspecified() {
		hosts = append(hosts, ip.String())
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		hosts = append(hosts, host)
	}
	certFile, keyFile, err := dir.EnsureServing(ca, hosts)
	if err != nil {
		return nil, fmt.Errorf("standalone serving certificate: %w", err)
	}
	o.SecureServing.ServerCert.CertKey.CertFile = certFile
	o.SecureServing.ServerCert.CertKey.KeyFile = keyFile
	return ca, nil
}

// aggregatedServing generates a self-signed serving certificate under the
// data directory when none is given (--tls-cert-file), as sample-apiserver
// does; the APIService then either skips TLS verification or carries the
// certificate's CA in caBundle.
func (o *Options) aggregatedServing() error {
	if o.SecureServing.ServerCert.CertKey.CertFile != "" {
		return nil
	}
	if o.SecureServing.ServerCert.CertDirectory == "" || o.SecureServing.ServerCert.CertDirectory == "apiserver.local.config/certificates" {
		o.SecureServing.ServerCert.CertDirectory = filepath.Join(o.DataDir, "serving")
	}
	// The Service of artifacts/deploy and of the chart: backstop-apiserver
	// in the admin namespace.
	alternates := append([]string{"backstop-apiserver", "backstop-apiserver." + o.Namespace, "backstop-apiserver." + o.Namespace + ".svc"}, o.TLSSANs...)
	if err := o.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", alternates, []net.IP{netutils.ParseIPSloppy("127.0.0.1")}); err != nil {
		return fmt.Errorf("creating a self-signed serving certificate: %w", err)
	}
	return nil
}

// downloadSigningKeyFile is --download-signing-key-file, or its default
// beside the standalone CA.
func (o *Options) downloadSigningKeyFile() string {
	if o.DownloadSigningKeyFile != "" {
		return o.DownloadSigningKeyFile
	}
	return filepath.Join(o.DataDir, "pki", "download-signing.key")
}

// serverURL is the address clients on this machine use.
func (o *Options) serverURL() string {
	host := "127.0.0.1"
	if ip := o.SecureServing.BindAddress; ip != nil && !ip.IsUnspecified() {
		host = ip.String()
	}
	u := url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(o.SecureServing.BindPort))}
	return u.String()
}

// secretReader reads Secret keys from a cluster.
func secretReader(client kubernetes.Interface) objectstore.SecretReader {
	return func(ctx context.Context, namespace, name, key string) ([]byte, error) {
		secret, err := client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading Secret %s/%s: %w", namespace, name, err)
		}
		data, ok := secret.Data[key]
		if !ok {
			return nil, fmt.Errorf("Secret %s/%s has no key %q", namespace, name, key)
		}
		return data, nil
	}
}

// defaultVMHost is this machine's host name, lower-cased (a DNS subdomain
// when the host name is one).
func defaultVMHost() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "localhost"
	}
	return strings.ToLower(host)
}

// tenantDenied parses --tenant-denied-networks.
func (o *Options) tenantDenied() ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(o.TenantDeniedNetworks))
	for _, n := range o.TenantDeniedNetworks {
		p, err := netip.ParsePrefix(strings.TrimSpace(n))
		if err != nil {
			return nil, fmt.Errorf("--tenant-denied-networks: %q is not a CIDR: %w", n, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// serviceAccountErrors says what is wrong with a ServiceAccount given as
// <name> or <namespace>/<name>.
func serviceAccountErrors(sa string) []string {
	ns, name, qualified := strings.Cut(sa, "/")
	if !qualified {
		ns, name = "", sa
	}
	var msgs []string
	if qualified {
		for _, m := range validation.IsDNS1123Label(ns) {
			msgs = append(msgs, "namespace: "+m)
		}
	}
	for _, m := range validation.IsDNS1123Subdomain(name) {
		msgs = append(msgs, "name: "+m)
	}
	return msgs
}
