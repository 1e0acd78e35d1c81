package server

import (
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	apischeme "github.com/backstop-io/backstop/pkg/apis/scheme"
	"github.com/backstop-io/backstop/pkg/apiserver"
	"github.com/backstop-io/backstop/pkg/storage/pebble"
)

// Config is the server the flags describe, resolved without touching the
// machine: every default applied and every path named, but no file, port,
// database or cluster opened (Options → Config → Run, as sample-apiserver
// wires itself). Run does those and completes it.
type Config struct {
	Mode string
	// Pebble opens the embedded database (--storage-backend=pebble); nil
	// on etcd3.
	Pebble *pebble.BackendOptions
	// Etcd are the etcd options (--storage-backend=etcd3); nil on pebble.
	Etcd *genericoptions.EtcdOptions
	// Extra is the API's and the engines' settings; Run adds what it opens
	// (the storage, the clients of the host cluster, the RBAC, the CAs,
	// and to the engines' leader election the replica's identity, the
	// Lease clients and the metrics).
	Extra apiserver.ExtraConfig
	// SourceKubeconfig is the cluster backups read and restores write when
	// it is neither this server (standalone) nor the host cluster.
	SourceKubeconfig string
}

// Config validates the flags and resolves them.
func (o *Options) Config() (*Config, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	tenantDenied, err := o.tenantDenied()
	if err != nil {
		return nil, err
	}
	scratchSize, err := o.restoreScratchSize()
	if err != nil {
		return nil, err
	}
	scheme := apischeme.New()
	c := &Config{Mode: o.Mode, SourceKubeconfig: o.SourceKubeconfig}
	// Validate allows these two only.
	if o.StorageBackend == apiserver.StorageEtcd3 {
		// A copy: the flags' options stay as parsed.
		etcd := *o.Etcd
		etcd.StorageConfig.Type = storagebackend.StorageTypeETCD3
		etcd.EnableWatchCache = o.WatchCache
		c.Etcd = &etcd
	} else {
		c.Pebble = &pebble.BackendOptions{Dir: filepath.Join(o.DataDir, "pebble"), CompactionInterval: o.CompactionInterval, WatchCache: o.WatchCache}
	}
	c.Extra = apiserver.ExtraConfig{
		Scheme: scheme, Codecs: serializer.NewCodecFactory(scheme), WatchCache: o.WatchCache, ListsFromStorage: o.ListsFromStorage, GarbageCollection: o.Mode == ModeAggregated,
		Namespace: o.Namespace, ExternalURL: o.ExternalURL, DownloadSigningKeyFile: o.downloadSigningKeyFile(), DataDir: o.DataDir, ConcurrentBackups: o.ConcurrentBackups, LocationUsageInterval: o.LocationUsageInterval, LocationCheckTimeout: o.LocationCheckTimeout, VMBootDirs: o.VMBootDirs, VMNetworks: o.VMNetworks, ScratchDir: o.RestoreScratchDir, RestoreScratchSize: scratchSize, RestoreServiceAccount: o.RestoreServiceAccount,
		ClientQPS: o.ClientQPS, ClientBurst: o.ClientBurst, EngineQPS: o.EngineQPS, EngineBurst: o.EngineBurst, ClientPageSize: int64(o.ClientPageSize),
		RestoreItemWorkers: o.RestoreItemWorkers, ConcurrentRestores: o.ConcurrentRestores, ConfigurationDir: o.ConfigurationDir, RestoreLimits: o.RestoreLimits, BackupSyncMaxPerPass: o.BackupSyncMaxPerPass, DisabledControllers: sets.New(o.DisableControllers...), BackupSyncPeriod: o.BackupSyncPeriod,
		ItemOperationSyncFrequency: o.ItemOperationSyncFrequency, ScheduleSkipImmediately: o.ScheduleSkipImmediately, EngineGroups: o.EngineGroups,
		LibvirtURI: o.LibvirtURI, VolumeRoot: o.VolumeRoot, CBTStateDir: o.CBTStateDir, VMFullBackupMode: o.VMFullBackupMode,
		DataMover: apiserver.DataMoverConfig{Node: o.VMHost, CSIEndpoints: o.DataMoverCSIEndpoints, Concurrency: o.DataMoverConcurrency,
			UploadBytesPerSecond: o.DataMoverUploadBPS, StorageCheckInterval: o.DataMoverStorageCheck, ServiceAccount: o.DataMoverServiceAccount},
	}
	c.Extra.Opener.TenantDenied = tenantDenied
	if le := o.LeaderElection; le.LeaderElect {
		c.Extra.Election = &apiserver.Election{Name: le.ResourceName, VMHost: o.VMHost,
			LeaseDuration: le.LeaseDuration.Duration, RenewDeadline: le.RenewDeadline.Duration, RetryPeriod: le.RetryPeriod.Duration}
	}
	return c, nil
}
