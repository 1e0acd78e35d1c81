// Package apiserver wires the Backstop API server: the scheme of the three
// API groups it serves, the REST storage of every resource on the embedded
// Pebble backend, standalone authentication and authorization, and the
// post-start hooks that run the engines.
package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"k8s.io/client-go/dynamic"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/apis/coordination"
	"k8s.io/kubernetes/pkg/registry/authentication/selfsubjectreview"
	"k8s.io/kubernetes/pkg/registry/authorization/localsubjectaccessreview"
	"k8s.io/kubernetes/pkg/registry/authorization/selfsubjectaccessreview"
	"k8s.io/kubernetes/pkg/registry/authorization/selfsubjectrulesreview"
	"k8s.io/kubernetes/pkg/registry/authorization/subjectaccessreview"
	leasestorage "k8s.io/kubernetes/pkg/registry/coordination/lease/storage"
	"k8s.io/utils/clock"

	"github.com/backstop-io/backstop/pkg/apis/console"
	consolev1 "github.com/backstop-io/backstop/pkg/apis/console/v1"
	"github.com/backstop-io/backstop/pkg/apis/kubevirtbackup"
	kubevirtbackupv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/apis/oadp"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	consolepages "github.com/backstop-io/backstop/pkg/console"
	"github.com/backstop-io/backstop/pkg/engine/download"
	"github.com/backstop-io/backstop/pkg/engine/leader"
	restoreengine "github.com/backstop-io/backstop/pkg/engine/restore"
	"github.com/backstop-io/backstop/pkg/livelog"
	"github.com/backstop-io/backstop/pkg/objectstore"
	consoleregistry "github.com/backstop-io/backstop/pkg/registry/console/console"
	"github.com/backstop-io/backstop/pkg/registry/kubevirtbackup/virtualmachinebackup"
	"github.com/backstop-io/backstop/pkg/registry/kubevirtbackup/virtualmachinebackuptracker"
	"github.com/backstop-io/backstop/pkg/registry/oadp/dataprotectionapplication"
	"github.com/backstop-io/backstop/pkg/registry/oadp/nonadminbackup"
	"github.com/backstop-io/backstop/pkg/registry/oadp/nonadminbackupstoragelocation"
	"github.com/backstop-io/backstop/pkg/registry/oadp/nonadminbackupstoragelocationrequest"
	"github.com/backstop-io/backstop/pkg/registry/oadp/nonadmindownloadrequest"
	"github.com/backstop-io/backstop/pkg/registry/oadp/nonadminrestore"
	"github.com/backstop-io/backstop/pkg/registry/oadp/nonadminschedule"
	rbacregistry "github.com/backstop-io/backstop/pkg/registry/rbac"
	"github.com/backstop-io/backstop/pkg/registry/resource"
	"github.com/backstop-io/backstop/pkg/registry/tenantlimits"
	"github.com/backstop-io/backstop/pkg/registry/velero/backup"
	"github.com/backstop-io/backstop/pkg/registry/velero/backuprepository"
	"github.com/backstop-io/backstop/pkg/registry/velero/backupstoragelocation"
	"github.com/backstop-io/backstop/pkg/registry/velero/datadownload"
	"github.com/backstop-io/backstop/pkg/registry/velero/dataupload"
	"github.com/backstop-io/backstop/pkg/registry/velero/deletebackuprequest"
	"github.com/backstop-io/backstop/pkg/registry/velero/downloadrequest"
	"github.com/backstop-io/backstop/pkg/registry/velero/podvolumebackup"
	"github.com/backstop-io/backstop/pkg/registry/velero/podvolumerestore"
	"github.com/backstop-io/backstop/pkg/registry/velero/restore"
	"github.com/backstop-io/backstop/pkg/registry/velero/schedule"
	"github.com/backstop-io/backstop/pkg/registry/velero/serverstatusrequest"
	"github.com/backstop-io/backstop/pkg/registry/velero/volumesnapshotlocation"
	"github.com/backstop-io/backstop/pkg/standalone/authz"
	"github.com/backstop-io/backstop/pkg/storage/pebble"
	"github.com/backstop-io/backstop/pkg/storage/storedlist"
)

// Config is the whole configuration of a Backstop server.
type Config struct {
	GenericConfig *genericapiserver.RecommendedConfig
	Extra         ExtraConfig
}

// ExtraConfig is what Backstop adds to the generic server configuration.
type ExtraConfig struct {
	Scheme *runtime.Scheme
	Codecs serializer.CodecFactory
	// Backend is the opened Pebble database every resource persists in
	// (--storage-backend=pebble); nil when Etcd is set.
	Backend *pebble.Backend
	// Etcd is the etcd cluster every resource persists in
	// (--storage-backend=etcd3): k8s.io/apiserver's etcd3 store, behind
	// its watch cache when WatchCache is set.
	Etcd       *storagebackend.Config
	WatchCache bool
	// ListsFromStorage: JSON lists of Backstop's resources are written
	// from the objects' stored bytes (Pebble only; package storedlist).
	ListsFromStorage bool
	// GarbageCollection: a garbage collector (kube-controller-manager)
	// processes ownerReferences and deletion propagation (aggregated mode).
	GarbageCollection bool
	// Namespace is the admin namespace whose Velero objects the engines process.
	Namespace string
	// ConcurrentBackups bounds the backups ReadyToStart or InProgress at once.
	ConcurrentBackups int
	// LocationUsageInterval is how often storage locations are measured
	// (status.usage; 0: never).
	LocationUsageInterval time.Duration
	// LocationCheckTimeout bounds a location's check (0: the engine's
	// default).
	LocationCheckTimeout time.Duration
	// RestoreServiceAccount (<namespace>/<name>), when set, is the
	// identity admins' restores write as (impersonated): the server's own
	// account then needs no right to write what backups hold.
	RestoreServiceAccount string
	// ScratchDir holds the restores' and previews' scratch space (their
	// spooled items, their logs until stored): "" is DataDir.
	ScratchDir string
	// RestoreScratchSize is the scratch space's size when something other
	// than its disk bounds it (0: nothing does): restores and previews
	// together spool at most nine tenths of it.
	RestoreScratchSize int64
	// VMBootDirs are where a VM a restore defines anew may boot from (nil:
	// the restore engine's default).
	VMBootDirs []string
	// VMNetworks are the networks and bridges such a VM may be on (nil:
	// the restore engine's default).
	VMNetworks []string
	// DataDir, when set, holds the default filesystem storage location
	// (<DataDir>/backups), created at the first start.
	DataDir string
	// ConfigurationDir, when set, holds the manifests of the storage
	// locations, snapshot locations and schedules the engines keep in the
	// admin namespace (package configuration; the chart's values). When
	// they hold a storage location, no default location is made.
	ConfigurationDir string
	// DownloadSigningKeyFile holds the key download links are signed with
	// (created when missing): replicas given the same file open each
	// other's links, and links survive restarts.
	DownloadSigningKeyFile string
	// ExternalURL is the base URL download links point at: this server
	// (standalone), or kube-apiserver as clients reach it (aggregated: the
	// links go through its aggregator, pkg/engine/download).
	ExternalURL string
	// ServingCA is the PEM of the CA clients verify this server with
	// (published in the caBundle of its APIServices, aggregated).
	ServingCA []byte
	// LinkCA is the PEM of the CA clients verify download links with
	// (ServingCA standalone, the host cluster's CA aggregated). It is put
	// into filesystem storage locations, whose files this server serves, so
	// that the velero CLI trusts the links.
	LinkCA []byte
	// Source is the cluster backups read; nil: this server itself.
	Source *restclient.Config
	// ClientQPS, ClientBurst and ClientPageSize shape backups' requests to the source.
	ClientQPS      float32
	ClientBurst    int
	ClientPageSize int64
	// RestoreItemWorkers is how many items of one resource a restore
	// writes at once, under the client's rate limit.
	RestoreItemWorkers int
	// ConcurrentRestores bounds the restores running at once.
	ConcurrentRestores int
	// RestoreLimits bound each restore.
	RestoreLimits restoreengine.Limits
	// BackupSyncMaxPerPass is the most Backups one sync pass over a
	// location makes.
	BackupSyncMaxPerPass int
	// EngineQPS and EngineBurst bound the engines' requests to this
	// server (0: the loopback client's own limits).
	EngineQPS   float32
	EngineBurst int
	// Opener opens storage locations' object stores (with the Secrets
	// they refer to, when the server reads Secrets).
	Opener objectstore.Opener
	// ScheduleSkipImmediately is spec.skipImmediately of new schedules
	// that leave it unset.
	ScheduleSkipImmediately bool
	// LibvirtURI is the libvirt daemon VM backups run on.
	LibvirtURI string
	// VMFullBackupMode is "push" or "pull" (vmbackup.Config.FullBackupPull).
	VMFullBackupMode string
	// VolumeRoot holds the volumes VM backups push into (default
	// <DataDir>/volumes).
	VolumeRoot string
	// CBTStateDir holds the overlays of raw VM disks with changed block
	// tracking (default <volume-root>/.cbt).
	CBTStateDir string
	// DataMover configures this node's data-mover engine.
	DataMover DataMoverConfig
	// BackupSyncPeriod is how often storage locations are synced.
	BackupSyncPeriod time.Duration
	// ItemOperationSyncFrequency is how often backups' async operations are polled.
	ItemOperationSyncFrequency time.Duration
	// DisabledControllers are engines not to run (names in Controllers).
	DisabledControllers sets.Set[string]
	// EngineGroups are groups whose members write status as the server's
	// engines do (resource.Engines).
	EngineGroups []string
	// Events, when set (aggregated mode), is where phase transitions are
	// recorded as Events on the objects.
	Events typedcorev1.EventsGetter
	// Secrets, when set (aggregated), are the host cluster's: tenants'
	// storage locations' credentials are read there and copied into the
	// admin namespace.
	Secrets typedcorev1.SecretsGetter
	// HostCluster, when set (aggregated mode), is the cluster whose
	// kube-apiserver serves this server's groups: the server publishes its
	// serving CA in its APIServices there.
	HostCluster *restclient.Config
	// Election, when set, runs the engines only while this replica holds
	// the engines' Lease in the admin namespace; their writes are fenced
	// by its term.
	Election *Election
	// RBAC, when set (standalone mode), is the server's own RBAC: the
	// server then serves rbac.authorization.k8s.io, the access reviews of
	// authorization.k8s.io and authentication.k8s.io's SelfSubjectReview.
	RBAC *authz.RBAC
}

// DataMoverConfig configures the data-mover engine of this node.
type DataMoverConfig struct {
	// Node is this node's name (the replicas of one node elect one to
	// run it, with the VM engines).
	Node string
	// CSIEndpoints are the CSI drivers' node services on this node: the
	// driver's name and its unix socket (unix:///path).
	CSIEndpoints map[string]string
	// Concurrency is how many uploads the node runs at once.
	Concurrency int
	// UploadBytesPerSecond limits what each repository of the node
	// writes to its location (0: no limit).
	UploadBytesPerSecond int64
	// StorageCheckInterval is how often a running upload that has written
	// nothing since checks its location (kopiarepo).
	StorageCheckInterval time.Duration
	// ServiceAccount is the source cluster's ServiceAccount (its name;
	// namespace/name for one outside the admin namespace) whose tokens the
	// data mover presents to CSI drivers' SnapshotMetadata services, to
	// read block volumes by changed blocks ("": read them whole).
	ServiceAccount string
}

// Election is the engines' leader election (package leader).
type Election struct {
	// Leases reach the Lease for the elector: the host cluster's
	// (aggregated); nil: this server's own.
	Leases coordinationv1client.LeasesGetter
	// Fence reaches the host cluster's Lease for the fence (aggregated), at
	// the engines' rate.
	Fence coordinationv1client.LeasesGetter
	// Name is the Lease's; Identity this replica's, unique among replicas.
	Name, Identity string
	// VMHost names this replica's libvirt host: the replicas on one host
	// elect one among them, on the Lease <Name>-vm-<VMHost>, to run the
	// VM engines for the VMs of its libvirt.
	VMHost string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	Metrics                                   *leader.Metrics
}

// Server is a running Backstop API server.
type Server struct {
	GenericAPIServer *genericapiserver.GenericAPIServer
}

// CompletedConfig is a Config with defaults filled in.
type CompletedConfig struct {
	generic genericapiserver.CompletedConfig
	extra   ExtraConfig
	// fence refuses the writes of engines whose term has ended.
	fence *leader.Fence
	// liveLogs are the logs of the backups and restores running here,
	// written by the engines, served by the logs subresources.
	liveLogs *livelog.Registry
	// scratchBudget is shared by the restores and previews running here.
	scratchBudget *restoreengine.ScratchBudget
}

// Complete fills in defaults.
func (c *Config) Complete() CompletedConfig {
	// Requests of the server's engines are marked once authenticated: the
	// status rules of resources with a life tell them from clients.
	engines := resource.Engines{Groups: c.Extra.EngineGroups}
	buildChain := c.GenericConfig.BuildHandlerChainFunc
	if buildChain == nil {
		buildChain = genericapiserver.DefaultBuildHandlerChain
	}
	fence := &leader.Fence{}
	if e := c.Extra.Election; e != nil && e.Fence != nil {
		fence.SetCurrent(e.Name, leader.LeaseTerm(e.Fence, c.Extra.Namespace))
	}
	c.GenericConfig.BuildHandlerChainFunc = func(h http.Handler, cfg *genericapiserver.Config) http.Handler {
		return buildChain(refuseCrossOrigin(engines.Filter(fence.Filter(h)), c.Extra.HostCluster != nil), cfg)
	}
	getter := &restOptionsGetter{scheme: c.Extra.Scheme, codecs: c.Extra.Codecs, garbageCollection: c.Extra.GarbageCollection}
	if c.Extra.Backend != nil {
		getter.config = storagebackend.Config{Type: StoragePebble, Prefix: storagePrefix}
		getter.decorator = c.Extra.Backend.Decorator()
		if c.Extra.ListsFromStorage {
			getter.lists, getter.stored = storedlist.NewSources(), c.Extra.Backend.DB()
		}
		c.GenericConfig.AddReadyzChecks(healthz.NamedCheck("pebble", func(*http.Request) error {
			return c.Extra.Backend.Healthy()
		}))
	} else {
		// The etcd options added etcd's health and readiness checks.
		getter.config = *c.Extra.Etcd
		getter.config.StorageObjectCountTracker = c.GenericConfig.StorageObjectCountTracker
		getter.decorator = etcd3Decorator(c.Extra.WatchCache)
		getter.transformers = c.GenericConfig.ResourceTransformers
	}
	c.GenericConfig.RESTOptionsGetter = getter
	// New serves the OpenAPI documents itself, built when first asked for
	// (lazyOpenAPI).
	c.GenericConfig.SkipOpenAPIInstallation = true
	c.GenericConfig.LongRunningFunc = followedLogs(c.GenericConfig.LongRunningFunc)
	return CompletedConfig{generic: c.GenericConfig.Complete(), extra: c.Extra, fence: fence, liveLogs: livelog.NewRegistry(0),
		scratchBudget: restoreengine.NewScratchBudget(c.Extra.RestoreScratchSize)}
}

// New builds the server with every API group installed.
func (c CompletedConfig) New() (*Server, error) {
	gs, err := c.generic.New("backstop-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("creating the generic API server: %w", err)
	}
	s := &Server{GenericAPIServer: gs}
	signer, err := download.NewSignerFromFile(c.extra.DownloadSigningKeyFile)
	if err != nil {
		return nil, err
	}
	groups, downloads, hooks, err := c.apiGroups(signer)
	if err != nil {
		return nil, err
	}
	for i := range groups {
		if err := gs.InstallAPIGroup(&groups[i]); err != nil {
			return nil, fmt.Errorf("installing API group %s: %w", groups[i].PrioritizedVersions[0].Group, err)
		}
		// The install kept the group (its storage's destroy function) and
		// with it the models it built its type converter from, which
		// nothing reads afterwards.
		groups[i].StaticOpenAPISpec = nil
	}
	openAPI := lazyOpenAPI{container: gs.Handler.GoRestfulContainer, v2: c.generic.OpenAPIConfig, v3: c.generic.OpenAPIV3Config}
	if err := openAPI.install(gs.Handler.NonGoRestfulMux); err != nil {
		return nil, err
	}
	gs.Handler.NonGoRestfulMux.HandlePrefix(download.PathPrefix, downloads)
	if c.extra.HostCluster != nil {
		client, err := dynamic.NewForConfig(c.extra.HostCluster)
		if err != nil {
			return nil, fmt.Errorf("host cluster client: %w", err)
		}
		if err := gs.AddPostStartHook(CABundleHookName, publishCABundle(client, c.extra.ServingCA, c.extra.Namespace)); err != nil {
			return nil, fmt.Errorf("registering the CA publisher: %w", err)
		}
	}
	if c.extra.RBAC != nil {
		if err := gs.AddPostStartHook(authz.HookName, c.extra.RBAC.PostStartHook); err != nil {
			return nil, fmt.Errorf("registering the RBAC bootstrap: %w", err)
		}
	}
	for _, name := range []string{QueueIndexHookName, RestorePreviewHookName} {
		if err := gs.AddPostStartHook(name, hooks[name]); err != nil {
			return nil, fmt.Errorf("registering post-start hook %s: %w", name, err)
		}
	}
	if err := gs.AddPostStartHook("backstop-engines", c.startEngines(signer)); err != nil {
		return nil, fmt.Errorf("registering the engines: %w", err)
	}
	return s, nil
}

// storageSet collects the REST storage of one group version.
type storageSet map[string]rest.Storage

func (s storageSet) add(name string, main rest.Storage, status *resource.StatusREST, err error) error {
	if err != nil {
		return err
	}
	s[name] = main
	if status != nil {
		s[name+"/status"] = status
	}
	return nil
}

// QueueIndexHookName is the post-start hook that keeps the backup and
// restore queues' positions current from a watch of the storage (package
// queueindex): the server is ready once both are listed.
const QueueIndexHookName = "backstop-queue-index"

// apiGroups builds the storage of every group, the handler of download
// links (served directly, and as downloadrequests/content), and the hook
// that runs the queue indexes.
func (c CompletedConfig) apiGroups(signer *download.Signer) ([]genericapiserver.APIGroupInfo, *download.Handler, map[string]genericapiserver.PostStartHookFunc, error) {
	scheme, codecs, getter := c.extra.Scheme, c.extra.Codecs, c.generic.RESTOptionsGetter
	var lists *storedlist.Sources
	if g, ok := getter.(*restOptionsGetter); ok && g.lists != nil {
		lists = g.lists
		for _, m := range lists.Metrics() {
			if err := legacyregistry.Register(m); err != nil {
				// A second server in one process (tests): its counts
				// are not exported.
				klog.V(2).InfoS("The list metrics are not registered", "err", err)
			}
		}
	}

	veleroV1, veleroV2alpha1 := storageSet{}, storageSet{}
	bslREST, bslStatus, err := backupstoragelocation.NewREST(scheme, getter, c.extra.Namespace, c.extra.LinkCA)
	if err := veleroV1.add("backupstoragelocations", bslREST, bslStatus, err); err != nil {
		return nil, nil, nil, err
	}
	defaultLocation := defaultLocationFrom(bslREST, trackWrites(bslREST.Store))
	// Processed in the admin namespace only.
	for _, r := range []struct {
		set  storageSet
		name string
		new  func(*runtime.Scheme, generic.RESTOptionsGetter, string) (*resource.REST, *resource.StatusREST, error)
	}{
		{veleroV1, "deletebackuprequests", deletebackuprequest.NewREST},
		{veleroV2alpha1, "datauploads", dataupload.NewREST},
		{veleroV2alpha1, "datadownloads", datadownload.NewREST},
	} {
		main, status, err := r.new(scheme, getter, c.extra.Namespace)
		if err := r.set.add(r.name, main, status, err); err != nil {
			return nil, nil, nil, err
		}
	}
	for _, r := range []struct {
		name string
		new  func(*runtime.Scheme, generic.RESTOptionsGetter) (*resource.REST, *resource.StatusREST, error)
	}{
		{"downloadrequests", downloadrequest.NewREST},
		{"serverstatusrequests", serverstatusrequest.NewREST},
		{"podvolumebackups", podvolumebackup.NewREST},
		{"podvolumerestores", podvolumerestore.NewREST},
		{"backuprepositories", backuprepository.NewREST},
		{"volumesnapshotlocations", volumesnapshotlocation.NewREST},
	} {
		main, status, err := r.new(scheme, getter)
		if err := veleroV1.add(r.name, main, status, err); err != nil {
			return nil, nil, nil, err
		}
	}
	downloadRequests := veleroV1["downloadrequests"].(rest.Getter)
	// The admin's policy, from the DataProtectionApplications' storage
	// made below; tenants' locations read the endpoints it allows.
	var policy tenantlimits.PolicyFunc
	opener := c.extra.Opener
	opener.TenantEndpoints = func(ctx context.Context) ([]string, error) {
		p, err := policy(ctx)
		return p.AllowedLocationEndpoints(), err
	}
	locations := objectstore.Locations{Get: locationFrom(bslREST), Opener: opener}
	downloads := &download.Handler{Signer: signer, Locations: locations, Clock: clock.RealClock{}, Authorizer: c.generic.Authorization.Authorizer,
		Requests: func(ctx context.Context, namespace, name string) (types.UID, error) {
			obj, err := downloadRequests.Get(genericrequest.WithNamespace(ctx, namespace), name, &metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return obj.(*velero.DownloadRequest).UID, nil
		}}
	veleroV1["downloadrequests/content"] = &downloadrequest.ContentREST{Serve: downloads.ServeContent}
	backups, err := backup.NewREST(scheme, getter, c.extra.Namespace, defaultLocation, locations, c.liveLogs)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := veleroV1.add("backups", backups.Backup, backups.Status, nil); err != nil {
		return nil, nil, nil, err
	}
	veleroV1["backups/cancel"] = backups.Cancel
	// logs, and log as kube-apiserver's long-running requests name it
	// (pods/log): a followed log passes through it as a watch does.
	veleroV1["backups/logs"], veleroV1["backups/log"] = backups.Logs, backups.Logs
	schedules, err := schedule.NewREST(scheme, getter, c.extra.Namespace, backups.Backup, c.extra.ScheduleSkipImmediately)
	if err := veleroV1.add("schedules", schedules.Schedule, schedules.Status, err); err != nil {
		return nil, nil, nil, err
	}
	veleroV1["schedules/pause"] = schedules.Pause
	veleroV1["schedules/unpause"] = schedules.Unpause
	veleroV1["schedules/trigger"] = schedules.Trigger
	restoreStorage, err := restore.NewREST(scheme, getter, c.extra.Namespace)
	if err != nil {
		return nil, nil, nil, err
	}
	restores := restoreStorage.Restore
	if err := veleroV1.add("restores", restoreStorage.Previewing, restoreStorage.Status, nil); err != nil {
		return nil, nil, nil, err
	}
	restoreLogs := restore.NewLogsREST(restores, backups.Backup, locations, c.liveLogs)
	veleroV1["restores/logs"], veleroV1["restores/log"] = restoreLogs, restoreLogs

	oadpV1alpha1 := storageSet{}
	dpas, dpaStatus, err := dataprotectionapplication.NewREST(scheme, getter, c.extra.Namespace)
	if err := oadpV1alpha1.add("dataprotectionapplications", dpas, dpaStatus, err); err != nil {
		return nil, nil, nil, err
	}
	policy = dataprotectionapplication.PolicySource{Namespace: c.extra.Namespace, Store: dpas}.Policy
	nabsls, nabslStatus, err := nonadminbackupstoragelocation.NewREST(scheme, getter, policy)
	if err := oadpV1alpha1.add("nonadminbackupstoragelocations", nabsls, nabslStatus, err); err != nil {
		return nil, nil, nil, err
	}
	requests, requestStatus, err := nonadminbackupstoragelocationrequest.NewREST(scheme, getter, c.extra.Namespace)
	if err := oadpV1alpha1.add("nonadminbackupstoragelocationrequests", requests, requestStatus, err); err != nil {
		return nil, nil, nil, err
	}
	nabs, err := nonadminbackup.NewREST(scheme, getter, nonadminbackup.Backups{
		Namespace: c.extra.Namespace, Store: backups.Backup.Store, Position: backups.Queue.Position, Locations: locations, TenantLocations: nabsls, Live: c.liveLogs}, policy)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := oadpV1alpha1.add("nonadminbackups", nabs.NonAdminBackup, nabs.Status, nil); err != nil {
		return nil, nil, nil, err
	}
	oadpV1alpha1["nonadminbackups/cancel"] = nabs.Cancel
	oadpV1alpha1["nonadminbackups/logs"], oadpV1alpha1["nonadminbackups/log"] = nabs.Logs, nabs.Logs
	nars, err := nonadminrestore.NewREST(scheme, getter, nabs.NonAdminBackup, nonadminrestore.Restores{
		Namespace: c.extra.Namespace, Restores: restores, Position: restoreStorage.Queue.Position, Backups: backups.Backup, Locations: locations, Live: c.liveLogs}, policy)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := oadpV1alpha1.add("nonadminrestores", nars.NonAdminRestore, nars.Status, nil); err != nil {
		return nil, nil, nil, err
	}
	oadpV1alpha1["nonadminrestores/logs"], oadpV1alpha1["nonadminrestores/log"] = nars.Logs, nars.Logs
	oadpV1alpha1["nonadminrestores/preview"] = nonadminrestore.NewPreviewREST(nars.NonAdminRestore, nonadminrestore.Restores{
		Namespace: c.extra.Namespace, Restores: restores}, c.generic.Authorization.Authorizer)
	nass, nasStatus, err := nonadminschedule.NewREST(scheme, getter, policy, nabsls)
	if err := oadpV1alpha1.add("nonadminschedules", nass, nasStatus, err); err != nil {
		return nil, nil, nil, err
	}
	nadrs, nadrStatus, err := nonadmindownloadrequest.NewREST(scheme, getter, nabs.NonAdminBackup, nars.NonAdminRestore, policy)
	if err := oadpV1alpha1.add("nonadmindownloadrequests", nadrs, nadrStatus, err); err != nil {
		return nil, nil, nil, err
	}

	vmV1alpha1 := storageSet{}
	vmBackups, err := virtualmachinebackup.NewREST(scheme, getter, policy)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := vmV1alpha1.add("virtualmachinebackups", vmBackups.Backup, vmBackups.Status, nil); err != nil {
		return nil, nil, nil, err
	}
	vmV1alpha1["virtualmachinebackups/cancel"] = vmBackups.Cancel
	main, status, err := virtualmachinebackuptracker.NewREST(scheme, getter, policy)
	if err := vmV1alpha1.add("virtualmachinebackuptrackers", main, status, err); err != nil {
		return nil, nil, nil, err
	}

	group := func(name, version string, storage storageSet) genericapiserver.APIGroupInfo {
		info := genericapiserver.NewDefaultAPIGroupInfo(name, scheme, metav1.ParameterCodec, codecs)
		info.VersionedResourcesStorageMap[version] = storage
		return info
	}
	// Backstop's own groups: no protobuf, lists from stored bytes
	// (ownSerializer).
	ownGroup := func(name, version string, storage storageSet) genericapiserver.APIGroupInfo {
		info := group(name, version, storage)
		info.NegotiatedSerializer = newOwnSerializer(info.NegotiatedSerializer, lists)
		return info
	}
	veleroGroup := ownGroup(velero.GroupName, velerov1.SchemeGroupVersion.Version, veleroV1)
	veleroGroup.VersionedResourcesStorageMap[velerov2alpha1.SchemeGroupVersion.Version] = veleroV2alpha1
	// The console: nothing stored, no protobuf.
	pages, err := consolepages.New()
	if err != nil {
		return nil, nil, nil, err
	}
	consoleGroup := group(console.GroupName, consolev1.SchemeGroupVersion.Version, storageSet{
		console.ResourceConsoles:                                   consoleregistry.NewREST(),
		console.ResourceConsoles + "/" + console.SubresourceStatic: &consoleregistry.StaticREST{Pages: pages},
	})
	consoleGroup.NegotiatedSerializer = newOwnSerializer(consoleGroup.NegotiatedSerializer, nil)
	groups := []genericapiserver.APIGroupInfo{
		veleroGroup,
		ownGroup(oadp.GroupName, oadpv1alpha1.SchemeGroupVersion.Version, oadpV1alpha1),
		ownGroup(kubevirtbackup.GroupName, kubevirtbackupv1alpha1.SchemeGroupVersion.Version, vmV1alpha1),
		consoleGroup,
	}
	if c.extra.RBAC != nil {
		authGroups, err := c.authorizationGroups(group)
		if err != nil {
			return nil, nil, nil, err
		}
		groups = append(groups, authGroups...)
	}
	hooks := map[string]genericapiserver.PostStartHookFunc{
		QueueIndexHookName: func(ctx genericapiserver.PostStartHookContext) error {
			if err := backups.Queue.Run(ctx, backups.Backup.Store, &velero.Backup{}); err != nil {
				return err
			}
			return restoreStorage.Queue.Run(ctx, restores.Store, &velero.Restore{})
		},
		RestorePreviewHookName: c.restorePreviewHook(restoreStorage.Previewing),
	}
	return groups, downloads, hooks, nil
}

// authorizationGroups are the groups a standalone server serves for its own
// RBAC, with kube-apiserver's REST implementations: the RBAC objects, the
// access reviews (kubectl auth can-i) and SelfSubjectReview (kubectl auth
// whoami), each review asking the server's whole authorizer, as in
// kube-apiserver; and Leases, for the engines' leader election.
func (c CompletedConfig) authorizationGroups(group func(string, string, storageSet) genericapiserver.APIGroupInfo) ([]genericapiserver.APIGroupInfo, error) {
	authorizer := c.generic.Authorization.Authorizer
	rbacV1, err := rbacregistry.NewStorage(c.generic.RESTOptionsGetter, authorizer)
	if err != nil {
		return nil, err
	}
	authorizationV1 := storageSet{
		"selfsubjectaccessreviews":  selfsubjectaccessreview.NewREST(authorizer, c.extra.Scheme),
		"selfsubjectrulesreviews":   selfsubjectrulesreview.NewREST(c.extra.RBAC.Authorizer),
		"subjectaccessreviews":      subjectaccessreview.NewREST(authorizer, c.extra.Scheme),
		"localsubjectaccessreviews": localsubjectaccessreview.NewREST(authorizer, c.extra.Scheme),
	}
	authenticationV1 := storageSet{"selfsubjectreviews": selfsubjectreview.NewREST()}
	// The engines' Lease (leader election among replicas) lives here when
	// there is no host cluster.
	leases, err := leasestorage.NewREST(c.generic.RESTOptionsGetter)
	if err != nil {
		return nil, fmt.Errorf("building the storage of leases: %w", err)
	}
	coordinationV1 := storageSet{"leases": leases}
	if e := c.extra.Election; e != nil && e.Leases == nil {
		// The fence reads the Lease from storage, in-process.
		c.fence.SetCurrent(e.Name, func(ctx context.Context, name string) (leader.Term, error) {
			obj, err := leases.Get(genericrequest.WithNamespace(ctx, c.extra.Namespace), name, &metav1.GetOptions{})
			if err != nil {
				return leader.Term{}, err
			}
			lease := obj.(*coordination.Lease)
			return leader.TermOf(lease.Spec.HolderIdentity, lease.Spec.LeaseTransitions), nil
		})
	}
	return []genericapiserver.APIGroupInfo{
		group(rbacv1.GroupName, rbacv1.SchemeGroupVersion.Version, rbacV1),
		group(authorizationv1.GroupName, authorizationv1.SchemeGroupVersion.Version, authorizationV1),
		group(authenticationv1.GroupName, authenticationv1.SchemeGroupVersion.Version, authenticationV1),
		group(coordinationv1.GroupName, coordinationv1.SchemeGroupVersion.Version, coordinationV1),
	}, nil
}

// locationFrom reads storage locations in-process for the download handler,
// converted to velero.io/v1 (the objectstore package's types).
func locationFrom(bsls rest.Getter) objectstore.LocationGetter {
	return func(ctx context.Context, namespace, name string) (*velerov1.BackupStorageLocation, error) {
		obj, err := bsls.Get(genericrequest.WithNamespace(ctx, namespace), name, &metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		out := &velerov1.BackupStorageLocation{}
		if err := velerov1.Convert_velero_BackupStorageLocation_To_v1_BackupStorageLocation(obj.(*velero.BackupStorageLocation), out, nil); err != nil {
			return nil, fmt.Errorf("converting storage location %s: %w", name, err)
		}
		return out, nil
	}
}

// followedLogs adds to a long-running request check the logs followed
// (<resource>/log?follow=true, or logs): like a watch, such a request
// lasts (up to resource.FollowFor), and is neither cut by this server's
// request timeout nor holding a seat of its priority and fairness
// meanwhile. kube-apiserver, on the way of an aggregated request, counts
// any request for a subresource named log as long-running, not logs: a
// reader that follows asks for log.
func followedLogs(next genericrequest.LongRunningRequestCheck) genericrequest.LongRunningRequestCheck {
	return func(r *http.Request, info *genericrequest.RequestInfo) bool {
		if info != nil && info.IsResourceRequest && info.Verb == "get" && (info.Subresource == "logs" || info.Subresource == "log") && r.URL.Query().Get("follow") == "true" {
			return true
		}
		return next != nil && next(r, info)
	}
}
