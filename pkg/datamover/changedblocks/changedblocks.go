// Package changedblocks asks a CSI driver which blocks of a volume changed
// between two of its snapshots, through the Kubernetes SnapshotMetadata
// API (KEP-3314) as any backup application does: the driver's
// SnapshotMetadataService names the external-snapshot-metadata sidecar's
// address and audience, a token of the data mover's ServiceAccount for
// that audience authenticates the call (the sidecar checks that the
// account may get the VolumeSnapshot), and GetMetadataDelta streams the
// changed ranges. The client is the sidecar project's own iterator.
package changedblocks

import (
	"context"
	"fmt"

	"github.com/kubernetes-csi/external-snapshot-metadata/pkg/iterator"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/backstop-io/backstop/pkg/datamover/kopiarepo"
)

// Client asks the drivers of one cluster for changed blocks.
type Client struct {
	clients iterator.Clients
	account types.NamespacedName
}

// New returns the client of the cluster cfg reaches, presenting tokens of
// account.
func New(cfg *rest.Config, account types.NamespacedName) (*Client, error) {
	clients, err := iterator.BuildClients(cfg)
	if err != nil {
		return nil, fmt.Errorf("the SnapshotMetadata clients: %w", err)
	}
	return &Client{clients: clients, account: account}, nil
}

// Serves reports whether driver serves the SnapshotMetadata API.
func (c *Client) Serves(ctx context.Context, driver string) (bool, error) {
	_, err := c.clients.SmsCRClient.CbtV1alpha1().SnapshotMetadataServices().Get(ctx, driver, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the SnapshotMetadataService of CSI driver %s: %w", driver, err)
	}
	return true, nil
}

// Delta returns the byte ranges of the volume that changed between the
// storage snapshot base (a CSI snapshot handle) and the VolumeSnapshot
// namespace/name, both of the same volume, of CSI driver driver.
func (c *Client) Delta(ctx context.Context, driver, namespace, name, base string) ([]kopiarepo.Range, error) {
	// The iterator reads the driver's SnapshotMetadataService itself
	// (callers ask Serves first).
	var ranges collector
	err := iterator.GetSnapshotMetadata(ctx, iterator.Args{Clients: c.clients, Emitter: &ranges, Namespace: namespace, SnapshotName: name,
		PrevSnapshotID: base, CSIDriver: driver, SANamespace: c.account.Namespace, SAName: c.account.Name})
	if err != nil {
		return nil, fmt.Errorf("the blocks changed since snapshot %s (GetMetadataDelta of CSI driver %s, as ServiceAccount %s): %w", base, driver, c.account, err)
	}
	return ranges.ranges, nil
}

// collector keeps the ranges of the records it is given.
type collector struct{ ranges []kopiarepo.Range }

func (c *collector) SnapshotMetadataIteratorRecord(_ int, md iterator.IteratorMetadata) error {
	for _, b := range md.BlockMetadata {
		if b.GetSizeBytes() < 0 || b.GetByteOffset() < 0 {
			return fmt.Errorf("the driver gave a negative block range (%d, %d)", b.GetByteOffset(), b.GetSizeBytes())
		}
		c.ranges = append(c.ranges, kopiarepo.Range{Offset: b.GetByteOffset(), Length: b.GetSizeBytes()})
	}
	return nil
}

func (c *collector) SnapshotMetadataIteratorDone(int) error { return nil }
