package apiserver

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	snapshotclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/backstop-io/backstop/pkg/apis/restoreas"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/backup"
	"github.com/backstop-io/backstop/pkg/engine/backuprepo"
	"github.com/backstop-io/backstop/pkg/engine/backupsync"
	"github.com/backstop-io/backstop/pkg/engine/configuration"
	"github.com/backstop-io/backstop/pkg/engine/csisnapshot"
	"github.com/backstop-io/backstop/pkg/engine/deletion"
	"github.com/backstop-io/backstop/pkg/engine/download"
	"github.com/backstop-io/backstop/pkg/engine/gc"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/engine/location"
	"github.com/backstop-io/backstop/pkg/engine/metrics"
	"github.com/backstop-io/backstop/pkg/engine/nonadmin"
	"github.com/backstop-io/backstop/pkg/engine/queue"
	"github.com/backstop-io/backstop/pkg/engine/resourcepolicy"
	"github.com/backstop-io/backstop/pkg/engine/restore"
	"github.com/backstop-io/backstop/pkg/engine/schedule"
	"github.com/backstop-io/backstop/pkg/engine/serverstatus"
	"github.com/backstop-io/backstop/pkg/engine/verify"
	"github.com/backstop-io/backstop/pkg/engine/vmoperation"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	"github.com/backstop-io/backstop/pkg/version"
)

// generalEngines are the Velero engines of the admin namespace (Velero's
// names where Velero has the controller).
func generalEngines() []engineDescriptor {
	return []engineDescriptor{
		{name: serverstatus.Name, part: generalPart, workers: 1, new: newServerStatusEngine},
		{name: download.Name, part: generalPart, workers: 2, new: newDownloadEngine},
		{name: location.Name, part: generalPart, workers: location.Workers, new: newLocationEngine},
		{name: velerov1.EngineBackupQueue, part: generalPart, workers: 1, new: newQueueEngine},
		{name: velerov1.EngineBackup, part: generalPart, workers: 1, new: newBackupEngine},
		{name: velerov1.EngineRestore, part: generalPart, workers: 1, new: newRestoreEngine},
		{name: velerov1.EngineSchedule, part: generalPart, workers: 1, new: newScheduleEngine},
		{name: velerov1.EngineBackupSync, part: generalPart, workers: backupsync.Workers, new: newBackupSyncEngine},
		{name: velerov1.EngineBackupDeletion, part: generalPart, workers: 2, new: newDeletionEngine},
		{name: gc.Name, part: generalPart, workers: 1, new: newGCEngine},
		{name: backuprepo.ControllerName, part: generalPart, workers: 1, new: newRepositoryEngine},
		{name: velerov1.EngineVerification, part: generalPart, workers: 1, new: newVerificationEngine},
		{name: metrics.Name, part: generalPart, workers: 1, new: newMetricsEngine},
	}
}

// newMetricsEngine sets the metrics read from the objects (the totals,
// the locations' status, each schedule's series, the queues, the
// tenants' objects by phase).
func newMetricsEngine(e *engineContext) (engine, error) {
	backups, restores, schedules, locations := e.velero.Backups(), e.velero.Restores(), e.velero.Schedules(), e.velero.BackupStorageLocations()
	nabs, nars := e.tenants.NonAdminBackups(), e.tenants.NonAdminRestores()
	r := metrics.NewResyncer(e.process.metrics, metrics.Objects{Namespace: e.extra.Namespace,
		Backups: backups.Lister(), Restores: restores.Lister(), Schedules: schedules.Lister(), Locations: locations.Lister(),
		NonAdminBackups: nabs.Lister(), NonAdminRestores: nars.Lister(),
		Synced: []cache.InformerSynced{backups.Informer().HasSynced, restores.Informer().HasSynced, schedules.Informer().HasSynced,
			locations.Informer().HasSynced, nabs.Informer().HasSynced, nars.Informer().HasSynced}}, clock.RealClock{})
	// A schedule's series exist as soon as it does, as in Velero.
	for _, i := range []cache.SharedIndexInformer{schedules.Informer(), locations.Informer()} {
		if _, err := i.AddEventHandler(r.OnChange()); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func newServerStatusEngine(e *engineContext) (engine, error) {
	c, err := serverstatus.New(e.client, e.velero.ServerStatusRequests(), clock.RealClock{}, version.Version, nil)
	if err != nil {
		return nil, err
	}
	c.Observers = e.observers
	return c, nil
}

func newDownloadEngine(e *engineContext) (engine, error) {
	c, err := download.New(e.client, download.Informers{
		Requests: e.velero.DownloadRequests(), Backups: e.velero.Backups(), Restores: e.velero.Restores(),
	}, download.Links{Signer: e.process.signer, BaseURL: e.extra.ExternalURL, ThroughAggregator: e.extra.HostCluster != nil,
		// Backups hold Secrets when the source is a cluster; this server
		// itself (the default source standalone) serves none.
		SecretsInBackups: e.extra.Source != nil}, clock.RealClock{})
	if err != nil {
		return nil, err
	}
	c.Observers = e.observers
	return c, nil
}

func newLocationEngine(e *engineContext) (engine, error) {
	c, err := location.New(e.client, e.velero.BackupStorageLocations(), e.opener, clock.RealClock{})
	if err != nil {
		return nil, err
	}
	c.Observers = e.observers
	c.UsageInterval = e.extra.LocationUsageInterval
	c.CheckTimeout = e.extra.LocationCheckTimeout
	return c, nil
}

func newQueueEngine(e *engineContext) (engine, error) {
	return queue.New(e.client, e.velero.Backups(), e.extra.Namespace, e.extra.ConcurrentBackups, e.observers...)
}

func newBackupEngine(e *engineContext) (engine, error) {
	source, err := e.source(e.loopback)
	if err != nil {
		return nil, err
	}
	snapshots, err := e.csiSnapshotAction(e.loopback)
	if err != nil {
		return nil, err
	}
	snapshots.Recorder = e.recorder
	move := csisnapshot.MoveAction{Action: snapshots, Client: e.client}
	return backup.New(backup.Config{Client: e.client, Backups: e.velero.Backups(), Locations: e.velero.BackupStorageLocations(),
		Source: source, Opener: e.opener, Clock: clock.RealClock{}, ScratchDir: e.scratch, LiveLogs: e.liveLogs, TarballSize: e.process.metrics.TarballSize,
		Policies: func(ctx context.Context, b *velerov1.Backup) (*resourcepolicy.Policies, error) {
			return resourcepolicy.Read(ctx, snapshots.Kube, b)
		},
		Actions: []backup.ItemAction{
			vmoperation.Action{Client: e.client, Virt: e.process.libvirt, VolumeRoot: e.volumes},
			snapshots,
			move,
		},
		OperationSyncFrequency: e.extra.ItemOperationSyncFrequency, Observers: e.observers, Crash: e.crash})
}

func newRestoreEngine(e *engineContext) (engine, error) {
	target, err := e.restoreTarget(e.loopback)
	if err != nil {
		return nil, err
	}
	return restore.New(restore.Config{Client: e.client, Restores: e.velero.Restores(), Backups: e.velero.Backups(),
		Locations: e.velero.BackupStorageLocations(), Target: target, TargetAs: e.targetAs(e.loopback),
		Opener: e.opener, Clock: clock.RealClock{}, ScratchDir: e.scratch, ScratchBudget: e.scratchBudget, LiveLogs: e.liveLogs, Observers: e.observers, Crash: e.crash,
		Virt: e.process.libvirt, VolumeRoot: e.volumes, VMBootDirs: e.extra.VMBootDirs, VMNetworks: e.extra.VMNetworks, VMLocks: e.process.vmLocks, ItemWorkers: e.extra.RestoreItemWorkers, Limits: e.extra.RestoreLimits,
		Concurrent: e.extra.ConcurrentRestores})
}

func newScheduleEngine(e *engineContext) (engine, error) {
	return schedule.New(schedule.Config{Client: e.client, Schedules: e.velero.Schedules(), Backups: e.velero.Backups(), Clock: clock.RealClock{}, Observers: e.observers})
}

func newBackupSyncEngine(e *engineContext) (engine, error) {
	return backupsync.New(backupsync.Config{Client: e.client, Backups: e.velero.Backups(), Locations: e.velero.BackupStorageLocations(),
		Requests: e.velero.DeleteBackupRequests(), Opener: e.opener, Period: e.extra.BackupSyncPeriod,
		TenantPeriod:     nonadmin.BackupSyncPeriod(e.admin.DataProtectionApplications().Lister(), e.extra.Namespace),
		TenantMaxBackups: nonadmin.MaxBackupsPerNamespace(e.admin.DataProtectionApplications().Lister(), e.extra.Namespace),
		MaxPerPass:       e.extra.BackupSyncMaxPerPass})
}

func newDeletionEngine(e *engineContext) (engine, error) {
	snapshots, err := e.csiSnapshotAction(e.loopback)
	if err != nil {
		return nil, err
	}
	dirs, err := e.dataMoverDirs()
	if err != nil {
		return nil, err
	}
	repos, err := e.repositories(snapshots.Kube, velerov1.EngineBackupDeletion, filepath.Join(dirs.repositories, "deletion"))
	if err != nil {
		return nil, err
	}
	return deletion.New(e.client, deletion.Informers{
		Requests: e.velero.DeleteBackupRequests(), Backups: e.velero.Backups(), Restores: e.velero.Restores(),
		Locations: e.velero.BackupStorageLocations(),
	}, e.opener, snapshots, repos, clock.RealClock{}, e.crash, e.observers...)
}

func newRepositoryEngine(e *engineContext) (engine, error) {
	dirs, err := e.dataMoverDirs()
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(e.sourceConfig(e.loopback))
	if err != nil {
		return nil, fmt.Errorf("source client: %w", err)
	}
	repos, err := e.repositories(kube, backuprepo.ControllerName, filepath.Join(dirs.repositories, "controller"))
	if err != nil {
		return nil, err
	}
	return backuprepo.NewController(repos, e.velero.BackupRepositories(), clock.RealClock{})
}

func newGCEngine(e *engineContext) (engine, error) {
	return gc.New(e.client, gc.Informers{
		Backups: e.velero.Backups(), Requests: e.velero.DeleteBackupRequests(), Locations: e.velero.BackupStorageLocations(),
		Schedules: e.velero.Schedules(), Trackers: e.kubevirt.VirtualMachineBackupTrackers(), AdminNamespace: e.extra.Namespace,
	}, clock.RealClock{})
}

func newVerificationEngine(e *engineContext) (engine, error) {
	return verify.New(verify.Config{Client: e.client, Backups: e.velero.Backups(), Locations: e.velero.BackupStorageLocations(),
		Opener: e.opener, Clock: clock.RealClock{}, VolumeRoot: e.volumes, Metrics: e.process.metrics, Observers: e.observers})
}

// ensureDefaultLocation makes the default storage location under the data
// directory, at the first start.
// ensureConfiguration applies the configuration's objects
// (--configuration-dir), and makes the default location unless they hold
// a storage location. A configuration that cannot be read or applied is
// reported and the engines start: a typo in it never stops backups.
func (c CompletedConfig) ensureConfiguration(ctx context.Context, client versioned.Interface) error {
	if c.extra.ConfigurationDir != "" {
		objs, err := configuration.Read(c.extra.ConfigurationDir, c.extra.Namespace)
		if err != nil {
			klog.ErrorS(err, "The configuration is not applied")
			return c.ensureDefaultLocation(ctx, client)
		}
		if err := configuration.Apply(ctx, client, c.extra.Namespace, objs); err != nil {
			klog.ErrorS(err, "Parts of the configuration are not applied")
		}
		if configuration.HasStorageLocation(objs) {
			return nil
		}
	}
	return c.ensureDefaultLocation(ctx, client)
}

func (c CompletedConfig) ensureDefaultLocation(ctx context.Context, client versioned.Interface) error {
	if c.extra.DataDir == "" {
		return nil
	}
	if err := location.EnsureDefault(ctx, client, c.extra.Namespace, c.extra.DataDir); err != nil {
		return fmt.Errorf("the default storage location: %w", err)
	}
	return nil
}

// sourceConfig is the client configuration of the cluster backups read
// and restores write: --source-kubeconfig, the host cluster (aggregated),
// or this server (standalone), with the backup client's rate limits.
func (c CompletedConfig) sourceConfig(loopback *restclient.Config) *restclient.Config {
	cfg := c.extra.Source
	if cfg == nil {
		cfg = loopback
	}
	cfg = restclient.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = c.extra.ClientQPS, c.extra.ClientBurst
	cfg.UserAgent = "backstop-backup/" + version.Version
	return cfg
}

// csiSnapshotAction is the backup engine's action for claims: CSI
// snapshots in the source cluster (whose claims the backups take; this
// server, standalone, serves none).
func (c CompletedConfig) csiSnapshotAction(loopback *restclient.Config) (csisnapshot.Action, error) {
	cfg := c.sourceConfig(loopback)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return csisnapshot.Action{}, fmt.Errorf("source client: %w", err)
	}
	snapshots, err := snapshotclient.NewForConfig(cfg)
	if err != nil {
		return csisnapshot.Action{}, fmt.Errorf("source snapshot client: %w", err)
	}
	return csisnapshot.Action{Kube: kube, Snapshots: snapshots, Clock: clock.RealClock{}}, nil
}

// targetAs is the cluster restores write, acting as a user (Kubernetes
// impersonation): a tenant's restore writes with the tenant's rights. A
// service account is impersonated by its name alone (the cluster gives it
// its groups; constrained impersonation takes no more of one).
func (c CompletedConfig) targetAs(loopback *restclient.Config) func(restoreas.User) (dynamic.Interface, error) {
	return func(as restoreas.User) (dynamic.Interface, error) {
		cfg := c.sourceConfig(loopback)
		cfg.Impersonate = restclient.ImpersonationConfig{UserName: as.Username, UID: as.UID, Groups: as.Groups, Extra: as.Extra}
		if strings.HasPrefix(as.Username, serviceAccountUserPrefix) {
			cfg.Impersonate = restclient.ImpersonationConfig{UserName: as.Username}
		}
		return dynamic.NewForConfig(cfg)
	}
}

// serviceAccountUserPrefix starts the user name of a service account.
const serviceAccountUserPrefix = "system:serviceaccount:"

// restoreTarget is the cluster admins' restores write: the source, as the
// restore identity (--restore-service-account) when one is given, so that
// the server's own account holds no right to write what backups hold.
func (c CompletedConfig) restoreTarget(loopback *restclient.Config) (items.Source, error) {
	cfg := c.sourceConfig(loopback)
	if sa := c.extra.RestoreServiceAccount; sa != "" {
		cfg.Impersonate = restclient.ImpersonationConfig{UserName: serviceAccountUserPrefix + strings.Replace(sa, "/", ":", 1)}
	}
	return sourceOf(cfg, c.extra.ClientPageSize)
}

// source is the cluster backups read: --source-kubeconfig, the host
// cluster (aggregated), or this server (standalone), with the backup
// client's rate limits.
func (c CompletedConfig) source(loopback *restclient.Config) (items.Source, error) {
	return sourceOf(c.sourceConfig(loopback), c.extra.ClientPageSize)
}

// sourceOf is the clients of a cluster through cfg.
func sourceOf(cfg *restclient.Config, pageSize int64) (items.Source, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return items.Source{}, fmt.Errorf("source discovery client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return items.Source{}, fmt.Errorf("source client: %w", err)
	}
	raw, err := items.NewRawClient(cfg)
	if err != nil {
		return items.Source{}, fmt.Errorf("source list client: %w", err)
	}
	return items.Source{Discovery: disc, Dynamic: dyn, Raw: raw, PageSize: pageSize}, nil
}
