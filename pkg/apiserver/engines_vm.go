package apiserver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	snapshotclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/clock"

	kvv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/datamover/changedblocks"
	"github.com/backstop-io/backstop/pkg/datamover/csivolume"
	"github.com/backstop-io/backstop/pkg/engine/backuprepo"
	"github.com/backstop-io/backstop/pkg/engine/datamover"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/engine/vmbackup"
	"github.com/backstop-io/backstop/pkg/engine/vmcbt"
	"github.com/backstop-io/backstop/pkg/virt"
)

// vmHostEngines run VM disk backups and changed block tracking on this
// host's libvirt, and moves volume data through this host's CSI node
// services (each host its own, under its Lease).
func vmHostEngines() []engineDescriptor {
	return []engineDescriptor{
		{name: kvv1alpha1.EngineVMBackup, part: vmHostPart, workers: 2, new: newVMBackupEngine},
		{name: kvv1alpha1.EngineVMCBT, part: vmHostPart, workers: 1, new: newVMCBTEngine},
		{name: velerov2alpha1.EngineDataMover, part: vmHostPart, workers: 2, new: newDataMoverEngine},
	}
}

func newDataMoverEngine(e *engineContext) (engine, error) {
	cfg := e.sourceConfig(e.loopback)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("source client: %w", err)
	}
	snapshots, err := snapshotclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("source snapshot client: %w", err)
	}
	dm := e.extra.DataMover
	drivers := map[string]*csivolume.Node{}
	for driver, endpoint := range dm.CSIEndpoints {
		n, err := csivolume.Dial(endpoint)
		if err != nil {
			return nil, fmt.Errorf("CSI driver %s: %w", driver, err)
		}
		drivers[driver] = n
	}
	dirs, err := e.dataMoverDirs()
	if err != nil {
		return nil, err
	}
	repos, err := e.repositories(kube, velerov2alpha1.EngineDataMover, filepath.Join(dirs.repositories, "mover"))
	if err != nil {
		return nil, err
	}
	var changed *changedblocks.Client
	if sa := dm.ServiceAccount; sa != "" && e.extra.Source != nil {
		account := types.NamespacedName{Namespace: e.extra.Namespace, Name: sa}
		if ns, name, ok := strings.Cut(sa, "/"); ok {
			account = types.NamespacedName{Namespace: ns, Name: name}
		}
		if changed, err = changedblocks.New(cfg, account); err != nil {
			return nil, err
		}
	}
	c, err := datamover.New(datamover.Config{ChangedBlocks: changed, Client: e.client, DataUploads: e.dataMovement.DataUploads(), DataDownloads: e.dataMovement.DataDownloads(), Kube: kube, Snapshots: snapshots,
		Namespace: e.extra.Namespace, Node: dm.Node, Hosts: e.process.hosts, Drivers: drivers, Repositories: repos,
		WorkDir: dirs.volumes, Concurrency: dm.Concurrency, Clock: clock.RealClock{}, Observers: e.observers, Crash: e.crash})
	if err != nil {
		return nil, err
	}
	c.WaitFor(e.velero.BackupStorageLocations().Informer())
	return c, nil
}

// repositories are the kopia repositories of the locations, as the engine
// named uses them, with their connections under dir (each engine its own).
func (e *engineContext) repositories(kube kubernetes.Interface, engine, dir string) (*backuprepo.Repositories, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	// The source cluster keeps the repositories' password; this server,
	// the source standalone, serves no Secrets: Velero's default password.
	var secrets typedcorev1.SecretsGetter
	if e.extra.Source != nil {
		secrets = kube.CoreV1()
	}
	return backuprepo.New(backuprepo.Config{Client: e.client, Namespace: e.extra.Namespace, Locations: e.velero.BackupStorageLocations().Lister(),
		Secrets: secrets, Opener: e.opener, Dir: dir, Status: status.Writer{Engine: engine, Observers: e.observers},
		UploadBytesPerSecond: float64(e.extra.DataMover.UploadBytesPerSecond), StorageCheckInterval: e.extra.DataMover.StorageCheckInterval,
		Maintained: e.process.metrics.RepositoryMaintenance}), nil
}

// dataMoverDirs are the data mover's private directories.
type dataMoverDirs struct {
	// volumes is where volumes are published; repositories where the
	// repositories' connections (with the locations' credentials) and
	// caches are.
	volumes, repositories string
}

// dataMoverDirs are <data-dir>/datamover/{volumes,repositories} (a
// temporary directory without a data directory), private to the server.
func (c CompletedConfig) dataMoverDirs() (dataMoverDirs, error) {
	root := filepath.Join(c.extra.DataDir, "datamover")
	if c.extra.DataDir == "" {
		dir, err := os.MkdirTemp("", "backstop-datamover-")
		if err != nil {
			return dataMoverDirs{}, err
		}
		root = dir
	}
	d := dataMoverDirs{volumes: filepath.Join(root, "volumes"), repositories: filepath.Join(root, "repositories")}
	for _, dir := range []string{root, d.volumes, d.repositories} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return dataMoverDirs{}, fmt.Errorf("creating %s: %w", dir, err)
		}
	}
	return d, nil
}

func newVMBackupEngine(e *engineContext) (engine, error) {
	root, err := e.volumeRoot()
	if err != nil {
		return nil, err
	}
	return vmbackup.New(vmbackup.Config{Client: e.client, Backups: e.kubevirt.VirtualMachineBackups(), Trackers: e.kubevirt.VirtualMachineBackupTrackers(),
		Virt: e.process.libvirt, VolumeRoot: root, Clock: clock.RealClock{}, FullBackupPull: e.extra.VMFullBackupMode == "pull",
		Observers: e.observers, Crash: e.crash, Hosts: e.process.hosts, Locks: e.process.vmLocks})
}

func newVMCBTEngine(e *engineContext) (engine, error) {
	stateDir := e.extra.CBTStateDir
	if stateDir == "" {
		root, err := e.volumeRoot()
		if err != nil {
			return nil, err
		}
		stateDir = filepath.Join(root, ".cbt")
	}
	return vmcbt.New(vmcbt.Config{Client: e.client, Trackers: e.kubevirt.VirtualMachineBackupTrackers(), Virt: e.process.libvirt,
		StateDir: stateDir, Observers: e.observers, Hosts: e.process.hosts})
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
