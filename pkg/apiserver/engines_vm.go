package apiserver

import (
	"fmt"
	"path/filepath"
	"sync"

	"k8s.io/utils/clock"

	kvv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/engine/vmbackup"
	"github.com/backstop-io/backstop/pkg/engine/vmcbt"
	"github.com/backstop-io/backstop/pkg/virt"
)

// vmHostEngines run VM disk backups and changed block tracking on this
// host's libvirt (each host its own, under its Lease).
func vmHostEngines() []engineDescriptor {
	return []engineDescriptor{
		{name: kvv1alpha1.EngineVMBackup, part: vmHostPart, workers: 2, new: newVMBackupEngine},
		{name: kvv1alpha1.EngineVMCBT, part: vmHostPart, workers: 1, new: newVMCBTEngine},
	}
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
