// Package csivolume publishes a CSI volume on a directory of this host
// through the driver's node service, as kubelet does for a pod (staged
// first when the driver stages), and takes it down again. The data mover
// reads a snapshot's claim and writes a restored one this way, without a
// pod.
package csivolume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Node is a CSI driver's node service on this host.
type Node struct {
	conn *grpc.ClientConn
	node csi.NodeClient
}

// Dial connects to a driver's node service at endpoint: unix:///<path>
// or a socket's absolute path (the driver's own socket, never a network
// address).
func Dial(endpoint string) (*Node, error) {
	path := strings.TrimPrefix(endpoint, "unix://")
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("CSI endpoint %q: not a unix socket's absolute path (unix:///path)", endpoint)
	}
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("CSI endpoint %s: %w", endpoint, err)
	}
	return &Node{conn: conn, node: csi.NewNodeClient(conn)}, nil
}

// Close closes the connection.
func (n *Node) Close() error { return n.conn.Close() }

// Volume is a CSI volume as its PersistentVolume names it.
type Volume struct {
	// Handle is the driver's volume ID (spec.csi.volumeHandle).
	Handle string
	// FSType is the filesystem of a mounted volume (spec.csi.fsType).
	FSType string
	// Attributes is the volume's context (spec.csi.volumeAttributes).
	Attributes map[string]string
	// Block: the volume is published as a block device (volumeMode
	// Block), not mounted.
	Block bool
}

// Publication is a volume published under a directory: Path is the
// volume's root directory (or its device file, Block).
type Publication struct {
	Path    string
	staging string
	vol     Volume
}

// capability is how the volume is used: mounted or raw, by one node.
func (v Volume) capability() *csi.VolumeCapability {
	c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
	if v.Block {
		c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	} else {
		c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: v.FSType}}
	}
	return c
}

// paths are the staging and target paths of a volume under dir.
func paths(dir string) (staging, target string) {
	return filepath.Join(dir, "staging"), filepath.Join(dir, "target")
}

// stages reports whether the driver stages volumes (STAGE_UNSTAGE_VOLUME).
func (n *Node) stages(ctx context.Context) (bool, error) {
	caps, err := n.node.NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
	if err != nil {
		return false, fmt.Errorf("NodeGetCapabilities: %w", err)
	}
	for _, c := range caps.GetCapabilities() {
		if c.GetRpc().GetType() == csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME {
			return true, nil
		}
	}
	return false, nil
}

// Publish publishes vol under dir (made private to the server: 0700),
// read-only or not. Publishing again what is published is harmless (CSI
// calls are idempotent): after a crash, Publish or Unpublish with the same
// dir picks up where it was.
func (n *Node) Publish(ctx context.Context, vol Volume, dir string, readOnly bool) (*Publication, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	staging, target := paths(dir)
	stages, err := n.stages(ctx)
	if err != nil {
		return nil, err
	}
	p := &Publication{Path: target, vol: vol}
	if stages {
		if err := os.MkdirAll(staging, 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", staging, err)
		}
		p.staging = staging
		if _, err := n.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol.Handle, StagingTargetPath: staging,
			VolumeCapability: vol.capability(), VolumeContext: vol.Attributes}); err != nil {
			return nil, fmt.Errorf("NodeStageVolume %s: %w", vol.Handle, err)
		}
	}
	if _, err := n.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: vol.Handle, StagingTargetPath: p.staging,
		TargetPath: target, VolumeCapability: vol.capability(), Readonly: readOnly, VolumeContext: vol.Attributes}); err != nil {
		return nil, errors.Join(fmt.Errorf("NodePublishVolume %s: %w", vol.Handle, err), n.Unpublish(ctx, vol, dir))
	}
	return p, nil
}

// Unpublish takes vol down from dir (unpublished, unstaged) and removes
// dir. A volume not published there is no error.
func (n *Node) Unpublish(ctx context.Context, vol Volume, dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	staging, target := paths(dir)
	if _, err := n.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol.Handle, TargetPath: target}); err != nil {
		return fmt.Errorf("NodeUnpublishVolume %s: %w", vol.Handle, err)
	}
	if _, err := os.Stat(staging); err == nil {
		if _, err := n.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol.Handle, StagingTargetPath: staging}); err != nil {
			return fmt.Errorf("NodeUnstageVolume %s: %w", vol.Handle, err)
		}
	}
	// What is left is empty directories (or, Block, the file the driver
	// made): each removed alone, never recursively (a mount still there
	// would have its files removed; here it makes this fail, as it should).
	for _, p := range []string{target, staging, dir} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing %s: %w", p, err)
		}
	}
	return nil
}
