package framework

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/backstop-io/backstop/pkg/standalone/pki"
)

// The CSI stack's names, as the hostpath driver's deploy directory has
// them.
const (
	// CSIDriver is the hostpath driver's name.
	CSIDriver = "hostpath.csi.k8s.io"
	// CSIStorageClass provisions claims on the driver (Immediate binding:
	// no scheduler places a pod first).
	CSIStorageClass = "csi-hostpath-sc"
	// CSISnapshotClass is the driver's VolumeSnapshotClass, labelled as
	// Velero's default class for the driver (VolumeSnapshotClassLabel).
	CSISnapshotClass = "csi-hostpath-snapclass"
	// VolumeSnapshotClassLabel marks the VolumeSnapshotClass Velero uses
	// for a driver's claims when neither the backup nor the claim names one.
	VolumeSnapshotClassLabel = "velero.io/csi-volumesnapshot-class"
)

// CSI is a cluster's CSI stack: the hostpath driver (controller and node
// service in one process, its volumes and snapshots under StateDir),
// csi-provisioner and csi-snapshotter talking to it over its socket,
// snapshot-controller, the snapshot.storage.k8s.io CRDs, a StorageClass and
// a VolumeSnapshotClass. Processes, not pods. Without nodes, there is no
// kubelet: a test reaches a volume's files as kubelet would, through the
// node service (WriteFiles, ReadFiles). With nodes (OnNode), the driver
// runs in the first node, registered with its kubelet (csi-registrar),
// and requires attach, as most production drivers do: csi-attacher and
// kube-controller-manager's attach/detach controller attach a pod's
// volume before kubelet mounts it.
type CSI struct {
	c *Cluster
	// OnNode is the node the driver runs in, else nil (the driver a
	// process of the test's namespaces, without attach).
	OnNode *Node
	// Socket is the driver's endpoint (a unix socket).
	Socket string
	// StateDir holds the driver's state: its volumes and snapshots.
	StateDir   string
	driver     *process
	driverArgs []string
	conn       *grpc.ClientConn
	// sidecars talk to the driver; each exits when it loses the driver
	// (csi-lib-utils), as in a pod, where kubelet restarts it.
	sidecars []*sidecar
	// snapshotMetadataService is the driver's SnapshotMetadataService
	// (WithoutSnapshotMetadata, WithSnapshotMetadata).
	snapshotMetadataService string
	// onNode: the driver runs in node-0 (OnNode once it runs).
	onNode bool
}

// SnapshotMetadataAudience is the audience of the tokens the CSI stack's
// SnapshotMetadata service takes.
const SnapshotMetadataAudience = "snapshot-metadata.backstop.test"

// WithoutSnapshotMetadata deletes the driver's SnapshotMetadataService: to
// its clients, the driver serves no SnapshotMetadata API.
func (s *CSI) WithoutSnapshotMetadata() {
	s.c.t.Helper()
	if out, err := s.c.Kubectl(s.c.AdminKubeconfig, []byte(s.snapshotMetadataService), "delete", "-f", "-"); err != nil {
		s.c.t.Fatalf("deleting the SnapshotMetadataService: %v\n%s", err, out)
	}
}

// WithSnapshotMetadata makes the driver's SnapshotMetadataService again.
func (s *CSI) WithSnapshotMetadata() {
	s.c.t.Helper()
	if out, err := s.c.Kubectl(s.c.AdminKubeconfig, []byte(s.snapshotMetadataService), "apply", "-f", "-"); err != nil {
		s.c.t.Fatalf("making the SnapshotMetadataService: %v\n%s", err, out)
	}
}

// sidecar is a CSI sidecar process and how to start it again.
type sidecar struct {
	name, bin string
	env, args []string
	proc      *process
}

// newCSI prepares the CSI stack: its socket, state and the driver's
// arguments. On nodes (onNode), node-0 runs the driver (nodeDaemons).
func (c *Cluster) newCSI(onNode bool) *CSI {
	t := c.t
	// A unix socket's path is short (108 bytes): not under the test's
	// directory, whose name carries the test's.
	sockDir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	c.afterStop = append(c.afterStop, func() { _ = os.RemoveAll(sockDir) })
	s := &CSI{c: c, Socket: filepath.Join(sockDir, "csi.sock"), StateDir: c.path("csi-data"), onNode: onNode}
	// The driver attaches a loop device to each block volume and leaves
	// it attached when the volume goes: detached once the driver has
	// stopped.
	c.afterStop = append(c.afterStop, func() { detachLoops(t, s.StateDir) })
	nodeID := HarnessNode
	if onNode {
		nodeID = nodeName(0)
	}
	s.driverArgs = []string{"--endpoint=unix://" + s.Socket, "--drivername=" + CSIDriver, "--nodeid=" + nodeID,
		"--statedir=" + s.StateDir, "--enable-topology=false", "--enable-snapshot-metadata", "--v=4"}
	if onNode {
		// ControllerPublishVolume before a node may stage the volume.
		s.driverArgs = append(s.driverArgs, "--enable-attach")
	}
	return s
}

// nodeDaemons are what node i runs of the stack besides kubelet: node-0
// the driver and its registration with kubelet.
func (s *CSI) nodeDaemons(i int) [][]string {
	if !s.onNode || i != 0 {
		return nil
	}
	return [][]string{
		append([]string{"hostpathplugin", Binary(s.c.t, "hostpathplugin")}, s.driverArgs...),
		{"csi-registrar", Binary(s.c.t, "csi-registrar"), "-driver", CSIDriver, "-endpoint", s.Socket},
	}
}

// startCSI installs the snapshot CRDs and starts the stack (the driver
// itself, when it runs in a node, started with the node).
func (c *Cluster) startCSI() {
	t := c.t
	s := c.CSI
	if s.onNode {
		s.OnNode = c.Nodes[0]
	}

	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	// The binaries first: without BACKSTOP_BIN_DIR this runs
	// hack/install-csi.sh, which also copies the CRDs.
	bins := map[string]string{}
	for _, name := range []string{"hostpathplugin", "snapshot-controller", "csi-snapshotter", "csi-provisioner", "csi-snapshot-metadata", "csi-attacher"} {
		bins[name] = Binary(t, name)
	}
	crds := filepath.Join(root, "_output", "csi", "crd")
	if out, err := c.Kubectl(c.AdminKubeconfig, nil, "apply", "-f", crds); err != nil {
		t.Fatalf("the snapshot CRDs (%s; hack/install-csi.sh puts them there): %v\n%s", crds, err, out)
	}
	if out, err := c.Kubectl(c.AdminKubeconfig, nil, "wait", "--for=condition=Established", "--timeout=60s", "-f", crds); err != nil {
		t.Fatalf("the snapshot CRDs established: %v\n%s", err, out)
	}
	s.startDriver()

	kubeconfig := c.AdminKubeconfig
	// Retries back off to 5 minutes by default; a test that stops the
	// driver waits for them: 5 seconds at most here. The snapshot
	// controllers go over every object again each resync period (15
	// minutes by default), which is how a cluster ends a deletion whose
	// event they let pass (seen: a VolumeSnapshot deleted while the driver
	// was down stays terminating until then): 15 seconds here.
	retry, resync := "--retry-interval-max=5s", "--resync-period=15s"
	// Volume group snapshots are not installed (no CRDs): with the gate on,
	// snapshot-controller looks for their CRDs 30 seconds before it starts.
	noGroups := "--feature-gates=CSIVolumeGroupSnapshot=false"
	c.start("snapshot-controller", bins["snapshot-controller"], "--kubeconfig="+kubeconfig, retry, resync, noGroups, "--v=4")
	s.sidecars = []*sidecar{
		{name: "csi-snapshotter", bin: bins["csi-snapshotter"], args: []string{"--kubeconfig=" + kubeconfig, "--csi-address=" + s.Socket, retry, resync, noGroups, "--v=4"}},
		// KUBECONFIG in the environment would win over the flag.
		{name: "csi-provisioner", bin: bins["csi-provisioner"], env: []string{"KUBECONFIG="},
			args: []string{"--kubeconfig=" + kubeconfig, "--csi-address=" + s.Socket, retry, "--v=4"}},
	}
	// The SnapshotMetadata API of the driver's block volumes, served over
	// TLS on the slot's port.
	mdCA, err := pki.New(c.path("snapshot-metadata")).EnsureCA()
	if err != nil {
		t.Fatal(err)
	}
	mdCert, mdKey, err := pki.New(c.path("snapshot-metadata")).EnsureServing(mdCA, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	mdCAPEM, err := os.ReadFile(pki.New(c.path("snapshot-metadata")).CAFile())
	if err != nil {
		t.Fatal(err)
	}
	s.sidecars = append(s.sidecars, &sidecar{name: "csi-snapshot-metadata", bin: bins["csi-snapshot-metadata"],
		args: []string{"--kubeconfig=" + kubeconfig, "--csi-address=" + s.Socket, "--tls-cert=" + mdCert, "--tls-key=" + mdKey,
			fmt.Sprintf("--port=%d", c.slot.snapshotMetadataPort()), "--v=4"}})
	if s.onNode {
		s.sidecars = append(s.sidecars, &sidecar{name: "csi-attacher", bin: bins["csi-attacher"], env: []string{"KUBECONFIG="},
			args: []string{"--kubeconfig=" + kubeconfig, "--csi-address=" + s.Socket, retry, "--v=4"}})
	}
	for _, sc := range s.sidecars {
		sc.proc = c.startEnv(sc.name, sc.bin, sc.env, sc.args...)
	}
	s.snapshotMetadataService = fmt.Sprintf(`apiVersion: cbt.storage.k8s.io/v1alpha1
kind: SnapshotMetadataService
metadata:
  name: %s
spec:
  address: 127.0.0.1:%d
  audience: %s
  caCert: %s
`, CSIDriver, c.slot.snapshotMetadataPort(), SnapshotMetadataAudience, base64.StdEncoding.EncodeToString(mdCAPEM))

	objects := s.snapshotMetadataService + "---\n" + fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata:
  name: %[1]s
spec:
  attachRequired: %[5]t
  podInfoOnMount: true
  volumeLifecycleModes: [Persistent]
  fsGroupPolicy: File
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: %[2]s
provisioner: %[1]s
reclaimPolicy: Delete
volumeBindingMode: Immediate
allowVolumeExpansion: true
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotClass
metadata:
  name: %[3]s
  labels:
    %[4]s: "true"
driver: %[1]s
deletionPolicy: Delete
`, CSIDriver, CSIStorageClass, CSISnapshotClass, VolumeSnapshotClassLabel, s.onNode)
	if out, err := c.Kubectl(c.AdminKubeconfig, []byte(objects), "apply", "-f", "-"); err != nil {
		t.Fatalf("the CSIDriver, StorageClass and VolumeSnapshotClass: %v\n%s", err, out)
	}
}

// startDriver starts hostpathplugin (in a node, it started with the
// node) and waits until it answers a probe.
func (s *CSI) startDriver() {
	c := s.c
	if s.OnNode != nil {
		s.driver = s.OnNode.init
	} else {
		_ = os.Remove(s.Socket)
		s.driver = c.start("hostpathplugin", Binary(c.t, "hostpathplugin"), s.driverArgs...)
	}
	if s.conn == nil {
		conn, err := grpc.NewClient("unix://"+s.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			c.t.Fatalf("a client of the CSI driver: %v", err)
		}
		s.conn = conn
		c.t.Cleanup(func() { _ = conn.Close() })
	}
	c.waitFor("the CSI driver's probe", s.driver, time.Minute, func(ctx context.Context) error {
		// Not before the socket is there: gRPC logs each failed dial.
		if _, err := os.Stat(s.Socket); err != nil {
			return err
		}
		ready, err := csi.NewIdentityClient(s.conn).Probe(ctx, &csi.ProbeRequest{})
		if err != nil {
			return err
		}
		if r := ready.GetReady(); r != nil && !r.GetValue() {
			return errors.New("not ready")
		}
		return nil
	})
}

// StopDriver stops the CSI driver's pod, as it were: the driver (SIGKILL
// when kill is set) and its sidecars (which would exit without it).
// Snapshots and volumes wait until StartDriver; snapshot-controller runs
// on.
func (s *CSI) StopDriver(kill bool) {
	s.requireProcess("StopDriver")
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	s.driver.stop(sig)
	for _, sc := range s.sidecars {
		sc.proc.stop(syscall.SIGTERM)
	}
}

// StartDriver starts the driver again (after StopDriver), with its state,
// and its sidecars.
func (s *CSI) StartDriver() {
	s.c.t.Helper()
	s.requireProcess("StartDriver")
	s.startDriver()
	for _, sc := range s.sidecars {
		sc.proc = s.c.startEnv(sc.name, sc.bin, sc.env, sc.args...)
	}
}

// requireProcess fails the test when the driver runs in a node, whose
// daemons live and die with it.
func (s *CSI) requireProcess(what string) {
	s.c.t.Helper()
	if s.OnNode != nil {
		s.c.t.Fatalf("%s: the driver runs in node %s, with it", what, s.OnNode.Name)
	}
}

// CreateClaim creates a claim of the CSI storage class and waits until it
// is Bound to its provisioned volume.
func (s *CSI) CreateClaim(namespace, name, size string, labels map[string]string) *corev1.PersistentVolumeClaim {
	s.c.t.Helper()
	return s.createClaim(namespace, name, size, corev1.PersistentVolumeFilesystem, labels)
}

// CreateBlockClaim creates a claim of volumeMode Block (the driver's
// volume a loop device) and waits until it is Bound.
func (s *CSI) CreateBlockClaim(namespace, name, size string, labels map[string]string) *corev1.PersistentVolumeClaim {
	s.c.t.Helper()
	return s.createClaim(namespace, name, size, corev1.PersistentVolumeBlock, labels)
}

func (s *CSI) createClaim(namespace, name, size string, mode corev1.PersistentVolumeMode, labels map[string]string) *corev1.PersistentVolumeClaim {
	c := s.c
	c.t.Helper()
	class := CSIStorageClass
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			VolumeMode:       &mode,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	if _, err := c.Kube.CoreV1().PersistentVolumeClaims(namespace).Create(context.Background(), pvc, metav1.CreateOptions{}); err != nil {
		c.t.Fatalf("creating claim %s/%s: %v", namespace, name, err)
	}
	return s.WaitBound(namespace, name)
}

// WaitBound waits until a claim is Bound, and returns it.
func (s *CSI) WaitBound(namespace, name string) *corev1.PersistentVolumeClaim {
	c := s.c
	c.t.Helper()
	var pvc *corev1.PersistentVolumeClaim
	c.waitFor(fmt.Sprintf("claim %s/%s Bound", namespace, name), nil, 2*time.Minute, func(ctx context.Context) error {
		got, err := c.Kube.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("phase %q", got.Status.Phase)
		}
		pvc = got
		return nil
	})
	return pvc
}

// volume returns the CSI volume a Bound claim's PersistentVolume points
// at, and whether it is a block volume.
func (s *CSI) volume(ctx context.Context, namespace, claim string) (*corev1.CSIPersistentVolumeSource, bool, error) {
	pvc, err := s.c.Kube.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return nil, false, err
	}
	if pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
		return nil, false, fmt.Errorf("claim %s/%s is not bound (phase %q)", namespace, claim, pvc.Status.Phase)
	}
	pv, err := s.c.Kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return nil, false, err
	}
	if pv.Spec.CSI == nil {
		return nil, false, fmt.Errorf("volume %s of claim %s/%s is not a CSI volume", pv.Name, namespace, claim)
	}
	return pv.Spec.CSI, pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock, nil
}

// withVolume stages and publishes a claim's volume on a directory, as
// kubelet does for a pod, runs fn on that directory, and unpublishes it.
func (s *CSI) withVolume(ctx context.Context, namespace, claim string, readOnly bool, fn func(dir string) error) (err error) {
	vol, block, err := s.volume(ctx, namespace, claim)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(s.c.Dir, "publish-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	staging, target := filepath.Join(dir, "staging"), filepath.Join(dir, "target")
	if err := os.Mkdir(staging, 0o750); err != nil {
		return err
	}
	capability := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: vol.FSType}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	if block {
		// The target is the device's file, which the driver makes.
		capability.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	}
	node := csi.NewNodeClient(s.conn)
	if _, err := node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol.VolumeHandle, StagingTargetPath: staging,
		VolumeCapability: capability, VolumeContext: vol.VolumeAttributes}); err != nil {
		return fmt.Errorf("NodeStageVolume %s: %w", vol.VolumeHandle, err)
	}
	defer func() {
		if _, uerr := node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol.VolumeHandle, StagingTargetPath: staging}); uerr != nil && err == nil {
			err = fmt.Errorf("NodeUnstageVolume %s: %w", vol.VolumeHandle, uerr)
		}
	}()
	if _, err := node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: vol.VolumeHandle, StagingTargetPath: staging,
		TargetPath: target, VolumeCapability: capability, Readonly: readOnly, VolumeContext: vol.VolumeAttributes}); err != nil {
		return fmt.Errorf("NodePublishVolume %s: %w", vol.VolumeHandle, err)
	}
	defer func() {
		if _, uerr := node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol.VolumeHandle, TargetPath: target}); uerr != nil && err == nil {
			err = fmt.Errorf("NodeUnpublishVolume %s: %w", vol.VolumeHandle, uerr)
		}
	}()
	return fn(target)
}

// WithVolume publishes a Bound claim's volume on a directory, as kubelet
// does for a pod (read-only if asked), runs fn on that directory, and
// unpublishes it.
func (s *CSI) WithVolume(namespace, claim string, readOnly bool, fn func(dir string)) {
	s.c.t.Helper()
	if err := s.withVolume(context.Background(), namespace, claim, readOnly, func(dir string) error {
		fn(dir)
		return nil
	}); err != nil {
		s.c.t.Fatalf("claim %s/%s: %v", namespace, claim, err)
	}
}

// WriteFiles writes files (a path relative to the volume's root, "/"
// separated, and its content) into a Bound claim's volume.
func (s *CSI) WriteFiles(namespace, claim string, files map[string][]byte) {
	c := s.c
	c.t.Helper()
	err := s.withVolume(context.Background(), namespace, claim, false, func(dir string) error {
		root, err := os.OpenRoot(dir)
		if err != nil {
			return err
		}
		defer root.Close()
		for name, data := range files {
			if d := filepath.Dir(filepath.FromSlash(name)); d != "." {
				if err := root.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
			if err := root.WriteFile(filepath.FromSlash(name), data, 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		c.t.Fatalf("writing %d files into claim %s/%s: %v", len(files), namespace, claim, err)
	}
}

// WriteBlocks writes data at byte offsets of a Bound block claim's device,
// and flushes it to the driver's volume.
func (s *CSI) WriteBlocks(namespace, claim string, writes map[int64][]byte) {
	c := s.c
	c.t.Helper()
	err := s.withVolume(context.Background(), namespace, claim, false, func(device string) error {
		f, err := os.OpenFile(device, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		for off, data := range writes {
			if _, err := f.WriteAt(data, off); err != nil {
				_ = f.Close()
				return err
			}
		}
		if err := f.Sync(); err != nil {
			_ = f.Close()
			return err
		}
		return f.Close()
	})
	if err != nil {
		c.t.Fatalf("writing %d ranges into block claim %s/%s: %v", len(writes), namespace, claim, err)
	}
}

// ReadBlocks reads the whole device of a Bound block claim.
func (s *CSI) ReadBlocks(namespace, claim string) []byte {
	c := s.c
	c.t.Helper()
	var data []byte
	err := s.withVolume(context.Background(), namespace, claim, true, func(device string) error {
		var err error
		data, err = os.ReadFile(device)
		return err
	})
	if err != nil {
		c.t.Fatalf("reading block claim %s/%s: %v", namespace, claim, err)
	}
	return data
}

// ReadFiles reads every regular file of a Bound claim's volume (by its
// "/"-separated path relative to the volume's root), through a read-only
// publication.
func (s *CSI) ReadFiles(namespace, claim string) map[string][]byte {
	c := s.c
	c.t.Helper()
	var files map[string][]byte
	err := s.withVolume(context.Background(), namespace, claim, true, func(dir string) error {
		var err error
		files, err = ReadTree(dir)
		return err
	})
	if err != nil {
		c.t.Fatalf("reading the files of claim %s/%s: %v", namespace, claim, err)
	}
	return files
}

// ReadTree reads every regular file under dir, by its "/"-separated path
// relative to dir.
func ReadTree(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	fsys := os.DirFS(dir)
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := fs.ReadFile(fsys, name)
		files[name] = data
		return err
	})
	return files, err
}

// FileSizes lists the files under dir (slash-separated paths relative to
// it) with their sizes: a bucket's or a repository's blobs. A file gone
// between its directory's listing and its stat (a temporary file of a
// repository in use, renamed or removed meanwhile) is not listed.
func FileSizes(t testing.TB, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	fsys := os.DirFS(dir)
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if name != "." && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		}
		out[name] = info.Size()
		return nil
	})
	if err != nil {
		t.Fatalf("listing the files under %s: %v", dir, err)
	}
	return out
}

// DirBytes is the size of the files under dir.
func DirBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	for _, size := range FileSizes(t, dir) {
		n += size
	}
	return n
}

// DiffFiles says how got differs from want (file names and sizes; ""
// when they are equal).
func DiffFiles(want, got map[string][]byte) string {
	var diffs []string
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s: missing (want %d bytes)", name, len(w)))
		case string(g) != string(w):
			diffs = append(diffs, fmt.Sprintf("%s: %d bytes differ from the %d wanted", name, len(g), len(w)))
		}
	}
	for name, g := range got {
		if _, ok := want[name]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: not wanted (%d bytes)", name, len(g)))
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "; ")
}

// Snapshots lists the driver's snapshots (ListSnapshots): what a backup
// took and not yet deleted, whatever the API says.
func (s *CSI) Snapshots() []*csi.Snapshot {
	c := s.c
	c.t.Helper()
	var out []*csi.Snapshot
	ctrl := csi.NewControllerClient(s.conn)
	req := &csi.ListSnapshotsRequest{}
	for {
		resp, err := ctrl.ListSnapshots(context.Background(), req)
		if err != nil {
			c.t.Fatalf("listing the CSI driver's snapshots: %v", err)
		}
		for _, e := range resp.GetEntries() {
			out = append(out, e.GetSnapshot())
		}
		if resp.GetNextToken() == "" {
			return out
		}
		req.StartingToken = resp.GetNextToken()
	}
}

// RandomBytes is n random bytes (data no repository holds yet).
func RandomBytes(t testing.TB, n int) []byte {
	t.Helper()
	data := make([]byte, n)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	return data
}

// detachLoops detaches the loop devices whose backing files are under dir.
func detachLoops(t testing.TB, dir string) {
	out, err := exec.Command("losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE").Output()
	if err != nil {
		t.Logf("listing loop devices: %v", err)
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, file, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || !strings.HasPrefix(strings.TrimSpace(file), dir+string(filepath.Separator)) {
			continue
		}
		if out, err := exec.Command("losetup", "--detach", name).CombinedOutput(); err != nil {
			t.Logf("detaching loop device %s (%s): %v %s", name, strings.TrimSpace(file), err, out)
		}
	}
}
