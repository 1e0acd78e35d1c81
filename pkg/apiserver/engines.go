package apiserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	kvv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	"github.com/backstop-io/backstop/pkg/apis/restoreas"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/backup"
	"github.com/backstop-io/backstop/pkg/engine/backupsync"
	"github.com/backstop-io/backstop/pkg/engine/deletion"
	"github.com/backstop-io/backstop/pkg/engine/download"
	"github.com/backstop-io/backstop/pkg/engine/events"
	"github.com/backstop-io/backstop/pkg/engine/gc"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/engine/leader"
	"github.com/backstop-io/backstop/pkg/engine/location"
	"github.com/backstop-io/backstop/pkg/engine/metrics"
	"github.com/backstop-io/backstop/pkg/engine/nonadmin"
	"github.com/backstop-io/backstop/pkg/engine/queue"
	"github.com/backstop-io/backstop/pkg/engine/restore"
	"github.com/backstop-io/backstop/pkg/engine/schedule"
	"github.com/backstop-io/backstop/pkg/engine/serverstatus"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/engine/vmbackup"
	"github.com/backstop-io/backstop/pkg/engine/vmcbt"
	"github.com/backstop-io/backstop/pkg/engine/vmhost"
	"github.com/backstop-io/backstop/pkg/engine/vmoperation"
	"github.com/backstop-io/backstop/pkg/failpoint"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	"github.com/backstop-io/backstop/pkg/generated/informers/externalversions"
	"github.com/backstop-io/backstop/pkg/version"
	"github.com/backstop-io/backstop/pkg/virt"
)

// Engine names, for --disable-controllers (Velero's names where Velero
// has the controller).
// The engines of resources with a life are named beside their transition
// tables, the others in their packages.
const (
	ControllerBackup                = velerov1.EngineBackup
	ControllerRestore               = velerov1.EngineRestore
	ControllerBackupSync            = velerov1.EngineBackupSync
	ControllerSchedule              = velerov1.EngineSchedule
	ControllerVMBackup              = kvv1alpha1.EngineVMBackup
	ControllerVMCBT                 = kvv1alpha1.EngineVMCBT
	ControllerBackupQueue           = velerov1.EngineBackupQueue
	ControllerBackupDeletion        = velerov1.EngineBackupDeletion
	ControllerGarbageCollection     = gc.Name
	ControllerDownloadRequest       = download.Name
	ControllerServerStatusRequest   = serverstatus.Name
	ControllerBackupStorageLocation = location.Name
	ControllerNonAdminBackup        = oadpv1alpha1.EngineNonAdminBackup
	ControllerNonAdminRestore       = oadpv1alpha1.EngineNonAdminRestore
	ControllerNonAdminBSL           = oadpv1alpha1.EngineNonAdminBSL
	ControllerNonAdminDownload      = oadpv1alpha1.EngineNonAdminDownload
	ControllerNonAdminSchedule      = oadpv1alpha1.EngineNonAdminSchedule
	ControllerNonAdminSync          = nonadmin.EngineNonAdminSync
	ControllerNonAdminGC            = nonadmin.EngineNonAdminGC
)

// Controllers are the engines that may be disabled.
var Controllers = []string{
	ControllerBackup, ControllerRestore, ControllerBackupSync, ControllerSchedule, ControllerVMBackup, ControllerVMCBT, ControllerBackupQueue, ControllerBackupDeletion, ControllerGarbageCollection,
	ControllerDownloadRequest, ControllerServerStatusRequest, ControllerBackupStorageLocation,
	ControllerNonAdminBackup, ControllerNonAdminRestore, ControllerNonAdminBSL, ControllerNonAdminDownload, ControllerNonAdminSchedule,
	ControllerNonAdminSync, ControllerNonAdminGC,
}

// engine is a started engine's run function.
type engine struct {
	name    string
	workers int
	run     func(ctx context.Context, workers int)
}

// shared is what the engines of every term share in one process.
type shared struct {
	signer *download.Signer
	// libvirt is the one libvirt connection of the VM engines.
	libvirt func() (virt.Hypervisor, error)
	// metrics counts every phase transition the engines write.
	metrics status.Observer
	// hosts is this replica's VM host among the live ones (nil: no
	// election, the only host).
	hosts *vmhost.Hosts
	// vmLocks: one backup, chain edit or disk restore of a VM at a time,
	// between the VM backup and restore engines of this process.
	vmLocks *vmhost.Locks
}

// enginePart is which engines a run starts.
type enginePart int

const (
	// allEngines: every engine, without an election.
	allEngines enginePart = iota
	// clusterEngines: all but the VM engines, under the engines' Lease.
	clusterEngines
	// hostEngines: the VM engines, for this host's libvirt, under the
	// host's Lease.
	hostEngines
)

// has reports whether the engine named name is of the part.
func (p enginePart) has(name string) bool {
	vm := name == ControllerVMBackup || name == ControllerVMCBT
	return p == allEngines || vm == (p == hostEngines)
}

// startEngines returns the post-start hook that runs the engines: at
// once, or (with leader election) while this replica holds the engines'
// Lease, and the VM engines while it holds its VM host's Lease (libvirt is
// local: each host runs them for its own VMs). They reach the API through
// the loopback client, like any client, so every transition is
// authenticated, authorized and visible to watchers. They process objects
// of the admin namespace only, as Velero processes its install namespace.
func (c CompletedConfig) startEngines(signer *download.Signer) genericapiserver.PostStartHookFunc {
	return func(hookCtx genericapiserver.PostStartHookContext) error {
		once := shared{signer: signer, libvirt: virtConn(c.extra.LibvirtURI), metrics: metrics.New(legacyregistry.MustRegister), vmLocks: vmhost.NewLocks()}
		election := c.extra.Election
		if election == nil {
			_, err := c.runEngines(hookCtx, hookCtx.LoopbackClientConfig, nil, once, allEngines)
			return err
		}
		leases := election.Leases
		if leases == nil {
			// Standalone: the Lease is this server's own.
			kube, err := kubernetes.NewForConfig(hookCtx.LoopbackClientConfig)
			if err != nil {
				return fmt.Errorf("lease client: %w", err)
			}
			leases = kube.CoordinationV1()
		}
		// The live hosts are read through the fence's client where there
		// is one (aggregated): the elector's renewals never wait behind
		// these reads.
		hostLeases := election.Fence
		if hostLeases == nil {
			hostLeases = leases
		}
		once.hosts = &vmhost.Hosts{Self: election.VMHost, Live: leader.LiveHosts(hostLeases, c.extra.Namespace, election.Name)}
		elect := func(name string, part enginePart, m *leader.Metrics) {
			err := leader.Run(hookCtx, leader.Config{Leases: leases, Namespace: c.extra.Namespace, Name: name, Identity: election.Identity,
				LeaseDuration: election.LeaseDuration, RenewDeadline: election.RenewDeadline, RetryPeriod: election.RetryPeriod,
				Metrics: m,
				Run: func(ctx context.Context, term leader.Term) {
					for ctx.Err() == nil {
						wait, err := c.runEngines(ctx, hookCtx.LoopbackClientConfig, &term, once, part)
						if err == nil {
							<-ctx.Done()
							wait()
							return
						}
						klog.ErrorS(err, "The engines cannot start; trying again", "term", term.String(), "lease", name)
						select {
						case <-ctx.Done():
						case <-time.After(election.RetryPeriod):
						}
					}
				}})
			if err != nil {
				klog.ErrorS(err, "The engines' leader election", "lease", name)
				klog.FlushAndExit(klog.ExitFlushTimeout, 1)
			}
		}
		go elect(election.Name, clusterEngines, election.Metrics)
		go elect(leader.HostLease(election.Name, election.VMHost), hostEngines, nil)
		return nil
	}
}

// runEngines builds the engines of one term (nil: no election) and starts
// them until ctx is done; wait returns once they all stopped.
func (c CompletedConfig) runEngines(ctx context.Context, loopback *restclient.Config, term *leader.Term, once shared, part enginePart) (wait func(), err error) {
	if term != nil {
		// Every write to this server carries the term (the engines',
		// and restores' into it standalone): the fence refuses it once
		// the term has ended.
		loopback = leader.WithTerm(loopback, *term)
	}
	engineConfig := restclient.CopyConfig(loopback)
	if c.extra.EngineQPS > 0 {
		engineConfig.QPS, engineConfig.Burst = c.extra.EngineQPS, c.extra.EngineBurst
	}
	client, err := versioned.NewForConfig(engineConfig)
	if err != nil {
		return nil, fmt.Errorf("engine client: %w", err)
	}
	factory := externalversions.NewSharedInformerFactoryWithOptions(client, 10*time.Minute,
		externalversions.WithNamespace(c.extra.Namespace), externalversions.WithTransform(withoutManagedFields))
	velero := factory.Velero().V1()
	// VM backups and trackers live in the VMs' namespaces.
	everywhere := externalversions.NewSharedInformerFactoryWithOptions(client, 10*time.Minute, externalversions.WithTransform(withoutManagedFields))
	kubevirt := everywhere.Backup().V1alpha1()
	// Tenants' objects live in their namespaces.
	tenants := everywhere.Oadp().V1alpha1()
	// The admin's policy and decisions live in the admin namespace.
	admin := factory.Oadp().V1alpha1()
	// Tenants' storage locations reach what the admin's policy allows.
	opener := c.extra.Opener
	opener.TenantEndpoints = nonadmin.AllowedLocationEndpoints(admin.DataProtectionApplications().Lister(), c.extra.Namespace)
	libvirtConn := once.libvirt
	volumeRoot, _ := c.volumeRoot() // "" without one: VM backups fail on their own
	observers := []status.Observer{once.metrics}
	if c.extra.Events != nil {
		// Aggregated: and as Events on the objects, in the host cluster.
		broadcaster := record.NewBroadcaster(record.WithContext(ctx))
		defer func() {
			if err != nil {
				broadcaster.Shutdown()
			}
		}()
		go func() {
			<-ctx.Done()
			broadcaster.Shutdown()
		}()
		broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.extra.Events.Events("")})
		recorder := broadcaster.NewRecorder(c.extra.Scheme, corev1.EventSource{Component: "backstop-apiserver"})
		observers = append(observers, events.Observer{Recorder: recorder})
	}
	// Crash points, for the crash-point tests only (failpoint.EnvVar).
	crash := failpoint.FromEnv()
	var engines []engine
	// The tenant engines' orphan loops, for the garbage collection.
	var orphans []nonadmin.Resyncer
	add := func(name string, workers int, build func() (func(context.Context, int), error)) error {
		if c.extra.DisabledControllers.Has(name) || !part.has(name) {
			return nil
		}
		run, err := build()
		if err != nil {
			return fmt.Errorf("engine %s: %w", name, err)
		}
		engines = append(engines, engine{name: name, workers: workers, run: run})
		return nil
	}
	// Where running backups and restores spool their logs.
	scratch, err := c.scratchDir()
	if err != nil {
		return nil, err
	}
	if c.extra.DataDir != "" && part != hostEngines {
		if err := location.EnsureDefault(ctx, client, c.extra.Namespace, c.extra.DataDir); err != nil {
			return nil, err
		}
	}
	err = firstError(
		add(ControllerServerStatusRequest, 1, func() (func(context.Context, int), error) {
			e, err := serverstatus.New(client, velero.ServerStatusRequests(), clock.RealClock{}, version.Version, nil)
			return runOf(e, err)
		}),
		add(ControllerDownloadRequest, 2, func() (func(context.Context, int), error) {
			e, err := download.New(client, download.Informers{
				Requests: velero.DownloadRequests(), Backups: velero.Backups(), Restores: velero.Restores(),
			}, download.Links{Signer: once.signer, BaseURL: c.extra.ExternalURL, ThroughAggregator: c.extra.HostCluster != nil,
				// Backups hold Secrets when the source is a cluster; this
				// server itself (the default source standalone) serves none.
				SecretsInBackups: c.extra.Source != nil}, clock.RealClock{})
			return runOf(e, err)
		}),
		add(ControllerBackupStorageLocation, 1, func() (func(context.Context, int), error) {
			e, err := location.New(client, velero.BackupStorageLocations(), opener, clock.RealClock{})
			return runOf(e, err)
		}),
		add(ControllerBackupQueue, 1, func() (func(context.Context, int), error) {
			e, err := queue.New(client, velero.Backups(), c.extra.Namespace, c.extra.ConcurrentBackups, observers...)
			return runOf(e, err)
		}),
		add(ControllerBackup, 1, func() (func(context.Context, int), error) {
			source, err := c.source(loopback)
			if err != nil {
				return nil, err
			}
			e, err := backup.New(backup.Config{Client: client, Backups: velero.Backups(), Locations: velero.BackupStorageLocations(),
				Source: source, Opener: opener, Clock: clock.RealClock{}, ScratchDir: scratch,
				Actions: []backup.ItemAction{vmoperation.Action{Client: client, Virt: libvirtConn, VolumeRoot: volumeRoot}}, OperationSyncFrequency: c.extra.ItemOperationSyncFrequency, Observers: observers, Crash: crash})
			return runOf(e, err)
		}),
		add(ControllerRestore, 1, func() (func(context.Context, int), error) {
			target, err := c.source(loopback)
			if err != nil {
				return nil, err
			}
			e, err := restore.New(restore.Config{Client: client, Restores: velero.Restores(), Backups: velero.Backups(),
				Locations: velero.BackupStorageLocations(), Target: target, TargetAs: c.targetAs(loopback),
				Opener: opener, Clock: clock.RealClock{}, ScratchDir: scratch, Observers: observers, Crash: crash,
				Virt: libvirtConn, VolumeRoot: volumeRoot, VMLocks: once.vmLocks, ItemWorkers: c.extra.RestoreItemWorkers, Limits: c.extra.RestoreLimits})
			return runOf(e, err)
		}),
		add(ControllerSchedule, 1, func() (func(context.Context, int), error) {
			e, err := schedule.New(schedule.Config{Client: client, Schedules: velero.Schedules(), Backups: velero.Backups(), Clock: clock.RealClock{}, Observers: observers})
			return runOf(e, err)
		}),
		add(ControllerVMBackup, 2, func() (func(context.Context, int), error) {
			root, err := c.volumeRoot()
			if err != nil {
				return nil, err
			}
			e, err := vmbackup.New(vmbackup.Config{Client: client, Backups: kubevirt.VirtualMachineBackups(), Trackers: kubevirt.VirtualMachineBackupTrackers(),
				Virt: libvirtConn, VolumeRoot: root, Clock: clock.RealClock{}, FullBackupPull: c.extra.VMFullBackupMode == "pull", Observers: observers, Crash: crash, Hosts: once.hosts, Locks: once.vmLocks})
			return runOf(e, err)
		}),
		add(ControllerVMCBT, 1, func() (func(context.Context, int), error) {
			stateDir := c.extra.CBTStateDir
			if stateDir == "" {
				root, err := c.volumeRoot()
				if err != nil {
					return nil, err
				}
				stateDir = filepath.Join(root, ".cbt")
			}
			e, err := vmcbt.New(vmcbt.Config{Client: client, Trackers: kubevirt.VirtualMachineBackupTrackers(), Virt: libvirtConn, StateDir: stateDir, Observers: observers, Hosts: once.hosts})
			return runOf(e, err)
		}),
		add(ControllerBackupSync, 1, func() (func(context.Context, int), error) {
			e, err := backupsync.New(backupsync.Config{Client: client, Backups: velero.Backups(), Locations: velero.BackupStorageLocations(),
				Requests: velero.DeleteBackupRequests(), Opener: opener, Period: c.extra.BackupSyncPeriod,
				TenantPeriod: nonadmin.BackupSyncPeriod(admin.DataProtectionApplications().Lister(), c.extra.Namespace), MaxPerPass: c.extra.BackupSyncMaxPerPass})
			return runOf(e, err)
		}),
		add(ControllerBackupDeletion, 2, func() (func(context.Context, int), error) {
			e, err := deletion.New(client, deletion.Informers{
				Requests: velero.DeleteBackupRequests(), Backups: velero.Backups(), Restores: velero.Restores(),
				Locations: velero.BackupStorageLocations(),
			}, opener, clock.RealClock{}, crash, observers...)
			return runOf(e, err)
		}),
		add(ControllerGarbageCollection, 1, func() (func(context.Context, int), error) {
			e, err := gc.New(client, gc.Informers{
				Backups: velero.Backups(), Requests: velero.DeleteBackupRequests(), Locations: velero.BackupStorageLocations(),
				Schedules: velero.Schedules(), Trackers: kubevirt.VirtualMachineBackupTrackers(), AdminNamespace: c.extra.Namespace,
			}, clock.RealClock{})
			return runOf(e, err)
		}),
		add(ControllerNonAdminBackup, 8, func() (func(context.Context, int), error) {
			e, err := nonadmin.NewBackupController(nonadmin.BackupConfig{Client: client, AdminNamespace: c.extra.Namespace,
				NonAdminBackups: tenants.NonAdminBackups(), NonAdminRestores: tenants.NonAdminRestores(),
				Backups: velero.Backups(), Requests: velero.DeleteBackupRequests(), DPAs: admin.DataProtectionApplications(),
				TenantLocations: tenants.NonAdminBackupStorageLocations(), VeleroLocations: velero.BackupStorageLocations(),
				Clock: clock.RealClock{}, Observers: observers, Crash: crash})
			if err == nil {
				orphans = append(orphans, e.Orphans())
			}
			return runOf(e, err)
		}),
		add(ControllerNonAdminRestore, 2, func() (func(context.Context, int), error) {
			e, err := nonadmin.NewRestoreController(nonadmin.RestoreConfig{Client: client, AdminNamespace: c.extra.Namespace,
				NonAdminRestores: tenants.NonAdminRestores(), NonAdminBackups: tenants.NonAdminBackups(),
				Restores: velero.Restores(), Backups: velero.Backups(), DPAs: admin.DataProtectionApplications(), Observers: observers, Crash: crash})
			if err == nil {
				orphans = append(orphans, e.Orphans())
			}
			return runOf(e, err)
		}),
		add(ControllerNonAdminDownload, 1, func() (func(context.Context, int), error) {
			e, err := nonadmin.NewDownloadController(nonadmin.DownloadConfig{Client: client, AdminNamespace: c.extra.Namespace,
				Requests: tenants.NonAdminDownloadRequests(), NonAdminBackups: tenants.NonAdminBackups(), NonAdminRestores: tenants.NonAdminRestores(),
				DownloadRequests: velero.DownloadRequests(), Backups: velero.Backups(), Restores: velero.Restores(),
				Clock: clock.RealClock{}, Observers: observers})
			if err == nil {
				orphans = append(orphans, e.Orphans())
			}
			return runOf(e, err)
		}),
		add(ControllerNonAdminSchedule, 1, func() (func(context.Context, int), error) {
			e, err := nonadmin.NewScheduleController(nonadmin.ScheduleConfig{Client: client, AdminNamespace: c.extra.Namespace,
				Schedules: tenants.NonAdminSchedules(), NonAdminBackups: tenants.NonAdminBackups(),
				VeleroSchedules: velero.Schedules(), Backups: velero.Backups(), DPAs: admin.DataProtectionApplications(),
				TenantLocations: tenants.NonAdminBackupStorageLocations(), VeleroLocations: velero.BackupStorageLocations(),
				Clock: clock.RealClock{}, Observers: observers, Crash: crash})
			if err == nil {
				orphans = append(orphans, e.Orphans())
			}
			return runOf(e, err)
		}),
		add(ControllerNonAdminBSL, 1, func() (func(context.Context, int), error) {
			e, err := nonadmin.NewBSLController(nonadmin.BSLConfig{Client: client, Secrets: c.extra.Secrets, AdminNamespace: c.extra.Namespace,
				Locations: tenants.NonAdminBackupStorageLocations(), Requests: admin.NonAdminBackupStorageLocationRequests(),
				VeleroLocations: velero.BackupStorageLocations(), DPAs: admin.DataProtectionApplications(), Observers: observers})
			if err == nil {
				orphans = append(orphans, e.Orphans())
			}
			return runOf(e, err)
		}),
		add(ControllerNonAdminSync, 1, func() (func(context.Context, int), error) {
			e, err := nonadmin.NewSyncController(nonadmin.SyncConfig{Client: client, AdminNamespace: c.extra.Namespace,
				Backups: velero.Backups(), VeleroLocations: velero.BackupStorageLocations(),
				TenantLocations: tenants.NonAdminBackupStorageLocations(), NonAdminBackups: tenants.NonAdminBackups(),
				DPAs: admin.DataProtectionApplications(), Observers: observers})
			return runOf(e, err)
		}),
		// Last: it runs the orphan loops of the engines above.
		add(ControllerNonAdminGC, 1, func() (func(context.Context, int), error) {
			e, err := nonadmin.NewGCController(nonadmin.GCConfig{AdminNamespace: c.extra.Namespace, DPAs: admin.DataProtectionApplications(),
				Orphans: orphans, Clock: clock.RealClock{}})
			return runOf(e, err)
		}),
	)
	if err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	everywhere.Start(ctx.Done())
	var running sync.WaitGroup
	for _, e := range engines {
		running.Add(1)
		go func() {
			defer running.Done()
			e.run(ctx, e.workers)
		}()
	}
	return func() {
		running.Wait()
		factory.Shutdown()
		everywhere.Shutdown()
	}, nil
}

// withoutManagedFields drops metadata.managedFields from the engines'
// informer copies: no engine reads them, they are a large part of an
// object kept in memory, and a write without them keeps the stored ones.
func withoutManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// runOf adapts an engine's constructor result.
func runOf[E interface{ Run(context.Context, int) }](e E, err error) (func(context.Context, int), error) {
	if err != nil {
		return nil, err
	}
	return e.Run, nil
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

// targetAs is the cluster restores write, acting as a user (Kubernetes
// impersonation): a tenant's restore writes with the tenant's rights.
func (c CompletedConfig) targetAs(loopback *restclient.Config) func(restoreas.User) (dynamic.Interface, error) {
	return func(as restoreas.User) (dynamic.Interface, error) {
		cfg := c.sourceConfig(loopback)
		cfg.Impersonate = restclient.ImpersonationConfig{UserName: as.Username, UID: as.UID, Groups: as.Groups, Extra: as.Extra}
		return dynamic.NewForConfig(cfg)
	}
}

// source is the cluster backups read: --source-kubeconfig, the host
// cluster (aggregated), or this server (standalone), with the backup
// client's rate limits.
func (c CompletedConfig) source(loopback *restclient.Config) (items.Source, error) {
	cfg := c.sourceConfig(loopback)
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
	return items.Source{Discovery: disc, Dynamic: dyn, Raw: raw, PageSize: c.extra.ClientPageSize}, nil
}

// scratchDir is where running backups spool their logs and resource
// lists: <data-dir>/scratch, emptied at start.
func (c CompletedConfig) scratchDir() (string, error) {
	if c.extra.DataDir == "" {
		return os.MkdirTemp("", "backstop-scratch-")
	}
	dir := filepath.Join(c.extra.DataDir, "scratch")
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("emptying %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	return dir, nil
}

// volumeRoot is where VM backups push: --volume-root, or <data-dir>/volumes.
func (c CompletedConfig) volumeRoot() (string, error) {
	if c.extra.VolumeRoot != "" {
		return c.extra.VolumeRoot, nil
	}
	if c.extra.DataDir == "" {
		return "", fmt.Errorf("--volume-root is needed without a data directory")
	}
	return filepath.Join(c.extra.DataDir, "volumes"), nil
}

// virtConn opens the libvirt connection VM backups use on first need, and
// again after a failure (libvirt may be installed or started later).
func virtConn(uri string) func() (virt.Hypervisor, error) {
	var mu sync.Mutex
	var conn *virt.Conn
	return func() (virt.Hypervisor, error) {
		mu.Lock()
		defer mu.Unlock()
		if conn != nil {
			return conn, nil
		}
		c, err := virt.Open(uri)
		if err != nil {
			return nil, err
		}
		conn = c
		return conn, nil
	}
}
