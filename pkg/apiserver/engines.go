package apiserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/backstop-io/backstop/pkg/engine/download"
	"github.com/backstop-io/backstop/pkg/engine/events"
	"github.com/backstop-io/backstop/pkg/engine/leader"
	"github.com/backstop-io/backstop/pkg/engine/metrics"
	"github.com/backstop-io/backstop/pkg/engine/nonadmin"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/engine/vmhost"
	"github.com/backstop-io/backstop/pkg/failpoint"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	"github.com/backstop-io/backstop/pkg/generated/informers/externalversions"
	kvinformers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/kubevirtbackup/v1alpha1"
	oadpinformers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/oadp/v1alpha1"
	veleroinformers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v1"
	velerov2alpha1informers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/objectstore"
	"github.com/backstop-io/backstop/pkg/virt"
)

// The engines, as kube-controller-manager lists its controllers: each one
// a descriptor (its --disable-controllers name, its part, its workers and
// its constructor), in one table. The constructors live beside their
// group: engines_general.go, engines_tenant.go, engines_vm.go.

// enginePart is which engines run together.
type enginePart int

const (
	// generalPart: the Velero engines of the admin namespace.
	generalPart enginePart = iota
	// tenantPart: the engines mirroring tenants' objects
	// (oadp.openshift.io) to the admin namespace and back.
	tenantPart
	// vmHostPart: the VM engines, for this host's libvirt (each host runs
	// its own, under the host's Lease).
	vmHostPart
)

var (
	// everyPart runs without an election.
	everyPart = []enginePart{generalPart, tenantPart, vmHostPart}
	// clusterParts run under the engines' Lease.
	clusterParts = []enginePart{generalPart, tenantPart}
	// hostParts run under this host's Lease.
	hostParts = []enginePart{vmHostPart}
)

// engineDescriptor is one engine the server runs.
type engineDescriptor struct {
	// name is the engine's --disable-controllers name.
	name    string
	part    enginePart
	workers int
	// new builds the engine of one term from what the term's engines
	// share.
	new func(*engineContext) (engine, error)
}

// engine is a built engine: it runs until ctx is done.
type engine interface {
	Run(ctx context.Context, workers int)
}

// orphanLooper is a tenant engine with an orphan loop, which the tenant
// garbage collection runs again.
type orphanLooper interface {
	Orphans() nonadmin.Resyncer
}

// engineDescriptors is every engine, in the order they start.
func engineDescriptors() []engineDescriptor {
	return slices.Concat(generalEngines(), tenantEngines(), vmHostEngines())
}

// EngineNames are the engines' names (--disable-controllers).
func EngineNames() []string {
	var names []string
	for _, d := range engineDescriptors() {
		names = append(names, d.name)
	}
	return names
}

// processShared is what the engines of every term share in one process.
type processShared struct {
	signer *download.Signer
	// libvirt is the one libvirt connection of the VM engines.
	libvirt func() (virt.Hypervisor, error)
	// metrics counts every phase transition the engines write, and the
	// backups' verifications.
	metrics *metrics.Recorder
	// hosts is this replica's VM host among the live ones (nil: no
	// election, the only host).
	hosts *vmhost.Hosts
	// vmLocks: one backup, chain edit or disk restore of a VM at a time,
	// between the VM backup and restore engines of this process.
	vmLocks *vmhost.Locks
}

// engineContext is what the engines of one term share: built once by
// runEngines, read by the constructors.
type engineContext struct {
	CompletedConfig
	process processShared
	// loopback is this server, as the term's engines reach it.
	loopback *restclient.Config
	// client is the engines' client (--engine-qps).
	client versioned.Interface
	// velero are the admin namespace's Velero objects; dataMovement its
	// DataUploads and DataDownloads.
	velero       veleroinformers.Interface
	dataMovement velerov2alpha1informers.Interface
	// admin are the admin namespace's oadp objects: the policy and the
	// storage location requests.
	admin oadpinformers.Interface
	// tenants are tenants' oadp objects, in their namespaces.
	tenants oadpinformers.Interface
	// kubevirt are VM backups and trackers, in the VMs' namespaces.
	kubevirt kvinformers.Interface
	// opener opens storage locations, tenants' through the policy's
	// allowed endpoints.
	opener objectstore.Opener
	// observers see every transition the engines write.
	observers []status.Observer
	// crash is the crash point of the crash-point tests (failpoint.EnvVar).
	crash failpoint.Set
	// scratch is where running backups and restores spool.
	scratch string
	// volumeRoot is where VM backups push ("" without one: they fail on
	// their own).
	volumes string
	// orphanLoops are the tenant engines' orphan loops, filled as they are
	// built.
	orphanLoops []nonadmin.Resyncer
	// recorder records Events on the engines' objects (aggregated; nil
	// standalone, which serves no Events).
	recorder record.EventRecorder
}

// orphans are the orphan loops of the term's tenant engines, for the
// tenant garbage collection (read when it runs: every engine is built by
// then).
func (e *engineContext) orphans() []nonadmin.Resyncer { return e.orphanLoops }

// startEngines returns the post-start hook that runs the engines: at
// once, or (with leader election) while this replica holds the engines'
// Lease, and the VM engines while it holds its VM host's Lease (libvirt is
// local: each host runs them for its own VMs). They reach the API through
// the loopback client, like any client, so every transition is
// authenticated, authorized and visible to watchers. They process objects
// of the admin namespace only, as Velero processes its install namespace.
func (c CompletedConfig) startEngines(signer *download.Signer) genericapiserver.PostStartHookFunc {
	return func(hookCtx genericapiserver.PostStartHookContext) error {
		once := processShared{signer: signer, libvirt: virtConn(c.extra.LibvirtURI), metrics: metrics.New(legacyregistry.MustRegister), vmLocks: vmhost.NewLocks()}
		election := c.extra.Election
		if election == nil {
			_, err := c.runEngines(hookCtx, hookCtx.LoopbackClientConfig, nil, once, everyPart)
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
		elect := func(name string, parts []enginePart, m *leader.Metrics) {
			err := leader.Run(hookCtx, leader.Config{Leases: leases, Namespace: c.extra.Namespace, Name: name, Identity: election.Identity,
				LeaseDuration: election.LeaseDuration, RenewDeadline: election.RenewDeadline, RetryPeriod: election.RetryPeriod,
				Metrics: m,
				Run: func(ctx context.Context, term leader.Term) {
					for ctx.Err() == nil {
						wait, err := c.runEngines(ctx, hookCtx.LoopbackClientConfig, &term, once, parts)
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
		go elect(election.Name, clusterParts, election.Metrics)
		go elect(leader.HostLease(election.Name, election.VMHost), hostParts, nil)
		return nil
	}
}

// runEngines builds the engines of the parts of one term (nil: no
// election) and starts them until ctx is done; wait returns once they all
// stopped.
func (c CompletedConfig) runEngines(ctx context.Context, loopback *restclient.Config, term *leader.Term, once processShared, parts []enginePart) (wait func(), err error) {
	if term != nil {
		// Every write to this server carries the term (the engines',
		// and restores' into it standalone): the fence refuses it once
		// the term has ended.
		loopback = leader.WithTerm(loopback, *term)
	}
	client, err := versioned.NewForConfig(c.engineClientConfig(loopback))
	if err != nil {
		return nil, fmt.Errorf("engine client: %w", err)
	}
	// The admin namespace's objects, and (everywhere) VM backups and
	// trackers in the VMs' namespaces and tenants' objects in theirs.
	factory := externalversions.NewSharedInformerFactoryWithOptions(client, 10*time.Minute,
		externalversions.WithNamespace(c.extra.Namespace), externalversions.WithTransform(withoutManagedFields))
	everywhere := externalversions.NewSharedInformerFactoryWithOptions(client, 10*time.Minute, externalversions.WithTransform(withoutManagedFields))
	ectx := &engineContext{CompletedConfig: c, process: once, loopback: loopback, client: client,
		velero: factory.Velero().V1(), dataMovement: factory.Velero().V2alpha1(), admin: factory.Oadp().V1alpha1(),
		tenants: everywhere.Oadp().V1alpha1(), kubevirt: everywhere.Backup().V1alpha1(),
		opener: c.extra.Opener, observers: []status.Observer{once.metrics}, crash: failpoint.FromEnv()}
	// Tenants' storage locations reach what the admin's policy allows.
	ectx.opener.TenantEndpoints = nonadmin.AllowedLocationEndpoints(ectx.admin.DataProtectionApplications().Lister(), c.extra.Namespace)
	ectx.volumes, _ = c.volumeRoot()
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
		ectx.observers = append(ectx.observers, events.Observer{Recorder: recorder})
		ectx.recorder = recorder
	}
	if ectx.scratch, err = c.scratchDir("scratch"); err != nil {
		return nil, err
	}
	if slices.Contains(parts, generalPart) {
		if err := c.ensureConfiguration(ctx, client); err != nil {
			return nil, err
		}
	}
	type built struct {
		engine
		descriptor engineDescriptor
	}
	var engines []built
	for _, d := range engineDescriptors() {
		if !slices.Contains(parts, d.part) || c.extra.DisabledControllers.Has(d.name) {
			continue
		}
		e, err := d.new(ectx)
		if err != nil {
			return nil, fmt.Errorf("engine %s: %w", d.name, err)
		}
		if o, ok := e.(orphanLooper); ok {
			ectx.orphanLoops = append(ectx.orphanLoops, o.Orphans())
		}
		engines = append(engines, built{engine: e, descriptor: d})
	}
	factory.Start(ctx.Done())
	everywhere.Start(ctx.Done())
	var running sync.WaitGroup
	for _, e := range engines {
		running.Add(1)
		go func() {
			defer running.Done()
			e.Run(ctx, e.descriptor.workers)
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

// engineClientConfig is the engines' client configuration: the loopback
// one with the engines' rate limits (--engine-qps, --engine-burst).
func (c CompletedConfig) engineClientConfig(loopback *restclient.Config) *restclient.Config {
	cfg := restclient.CopyConfig(loopback)
	if c.extra.EngineQPS > 0 {
		cfg.QPS, cfg.Burst = c.extra.EngineQPS, c.extra.EngineBurst
	}
	return cfg
}

// scratchDir is a scratch directory, <data-dir>/<name>, emptied at start:
// "scratch" where running backups and restores spool their logs and
// lists, "preview" where restore previews do (apart: each term of the
// engines empties its own).
func (c CompletedConfig) scratchDir(name string) (string, error) {
	base := c.extra.ScratchDir
	if base == "" {
		base = c.extra.DataDir
	}
	if base == "" {
		return os.MkdirTemp("", "backstop-"+name+"-")
	}
	dir := filepath.Join(base, name)
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("emptying %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	return dir, nil
}
