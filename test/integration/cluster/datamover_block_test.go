package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/datamover/kopiarepo"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestDataMoverBlockVolumes moves a block volume's data (volumeMode:
// Block, the hostpath driver's loop device) by changed blocks: the first
// backup reads the whole volume; the next asks the driver's
// SnapshotMetadata API (the external-snapshot-metadata sidecar,
// GetMetadataDelta) which blocks changed since the first's storage
// snapshot, kept for it, and reads only those; each backup restores byte
// for byte. Without the API the volume is read whole and the DataUpload
// says so; with it back, the changes are asked since the last snapshot
// kept.
func TestDataMoverBlockVolumes(t *testing.T) {
	t.Parallel()
	c, snaps := csiCluster(t)
	ctx := context.Background()
	step := inOrder(t)
	velero, wants := veleroCLI(t, c)
	const ns, claim, size = "disks", "disk", 32 << 20
	block := int64(kopiarepo.BlockSize)
	var volume []byte

	// backup runs a backup that moves the claim's data and returns its
	// DataUpload.
	backup := func(t *testing.T, name string) *velerov2alpha1.DataUpload {
		t.Helper()
		wants("backup create --snapshot-move-data --wait",
			velero("backup", "create", name, "--include-namespaces", ns, "--snapshot-move-data", "--wait"),
			"Backup completed with status: Completed")
		list, err := c.Backstop.VeleroV2alpha1().DataUploads(adminNamespace).List(ctx, metav1.ListOptions{LabelSelector: velerov1.BackupNameLabel + "=" + name})
		if err != nil || len(list.Items) != 1 {
			t.Fatalf("the DataUploads of %s: %v (%v), want one", name, list, err)
		}
		du := &list.Items[0]
		if du.Status.Phase != velerov2alpha1.DataUploadPhaseCompleted || du.Status.Progress.TotalBytes != size {
			t.Fatalf("DataUpload %s: phase %s, progress %+v: %s", du.Name, du.Status.Phase, du.Status.Progress, du.Status.Message)
		}
		t.Logf("DataUpload %s: read %d bytes: %s", du.Name, du.Status.IncrementalBytes, du.Status.Message)
		return du
	}
	// change writes random bytes at offsets and returns the volume's
	// content after.
	change := func(t *testing.T, ranges map[int64]int) {
		t.Helper()
		writes := map[int64][]byte{}
		for off, n := range ranges {
			data := make([]byte, n)
			if _, err := rand.Read(data); err != nil {
				t.Fatal(err)
			}
			writes[off] = data
			copy(volume[off:], data)
		}
		c.CSI.WriteBlocks(ns, claim, writes)
	}
	// keptBases lists the DataUploads whose storage snapshots are kept as
	// the claim's base, once the driver holds those snapshots and no
	// other.
	keptBases := func(t *testing.T) []string {
		t.Helper()
		var names []string
		var kept map[string]bool
		poll(t, "the driver holding the kept snapshots only", time.Minute, func(ctx context.Context) (bool, error) {
			list, err := snaps.SnapshotV1().VolumeSnapshots(adminNamespace).List(ctx, metav1.ListOptions{LabelSelector: "backstop.io/changed-block-base"})
			if err != nil {
				return false, err
			}
			names, kept = nil, map[string]bool{}
			for _, vs := range list.Items {
				names = append(names, vs.Name)
				if vs.Status == nil || vs.Status.BoundVolumeSnapshotContentName == nil {
					return false, nil
				}
				// A snapshot being deleted may have lost its content
				// already: not settled yet.
				vsc, err := snaps.SnapshotV1().VolumeSnapshotContents().Get(ctx, *vs.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return false, nil
				}
				if err != nil || vsc.Status == nil || vsc.Status.SnapshotHandle == nil {
					return false, err
				}
				kept[*vsc.Status.SnapshotHandle] = true
			}
			return maps.Equal(snapshotIDs(c.CSI.Snapshots()), kept), nil
		})
		return names
	}
	// restore restores a backup into a namespace and compares the block
	// claim's bytes.
	restore := func(t *testing.T, backup, into string, want []byte) {
		t.Helper()
		name := backup + "-restore"
		wants("restore create --wait",
			velero("restore", "create", name, "--from-backup", backup, "--namespace-mappings", ns+":"+into, "--wait"),
			"Restore completed with status: Completed")
		pvc := c.CSI.WaitBound(into, claim)
		if pvc.Spec.VolumeMode == nil || *pvc.Spec.VolumeMode != corev1.PersistentVolumeBlock {
			t.Errorf("restored claim %s/%s: volume mode %v, want Block", into, claim, pvc.Spec.VolumeMode)
		}
		got := c.CSI.ReadBlocks(into, claim)
		if len(got) < len(want) || !bytes.Equal(got[:len(want)], want) {
			t.Errorf("restored claim %s/%s differs from the backup's volume (%d bytes, want %d)", into, claim, len(got), len(want))
		}
	}

	step("a block claim", func(t *testing.T) {
		if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.CSI.CreateBlockClaim(ns, claim, "32Mi", nil)
		volume = make([]byte, size)
		change(t, map[int64]int{0: size})
	})

	first := bytes.Clone(volume)
	var du1 *velerov2alpha1.DataUpload
	step("the first backup reads the whole volume and keeps its storage snapshot", func(t *testing.T) {
		du1 = backup(t, "block-1")
		if du1.Status.IncrementalBytes != size {
			t.Errorf("the first upload read %d bytes, want the volume's %d", du1.Status.IncrementalBytes, size)
		}
		if got := keptBases(t); len(got) != 1 || got[0] != du1.Name {
			t.Errorf("kept bases %v, want the first upload's %s", got, du1.Name)
		}
	})

	second := []byte(nil)
	var du2 *velerov2alpha1.DataUpload
	step("the next backup reads only the blocks changed since", func(t *testing.T) {
		// Blocks 0, 5 and 31 of 32.
		change(t, map[int64]int{100: 4096, 5*block + 7: 10, size - 1024: 1024})
		second = bytes.Clone(volume)
		du2 = backup(t, "block-2")
		if want := 3 * block; du2.Status.IncrementalBytes != want {
			t.Errorf("the second upload read %d bytes, want the 3 changed blocks' %d", du2.Status.IncrementalBytes, want)
		}
		if want := fmt.Sprintf("read %d of the volume's %d bytes: the blocks changed since kopia snapshot %s", 3*block, size, du1.Status.SnapshotID); du2.Status.Message != want {
			t.Errorf("message %q, want %q", du2.Status.Message, want)
		}
		if got := keptBases(t); len(got) != 1 || got[0] != du2.Name {
			t.Errorf("kept bases %v, want only the second upload's %s", got, du2.Name)
		}
	})

	step("each backup restores the volume byte for byte", func(t *testing.T) {
		restore(t, "block-2", "disks-2", second)
		restore(t, "block-1", "disks-1", first)
	})

	step("without the SnapshotMetadata API the volume is read whole, and the DataUpload says so", func(t *testing.T) {
		c.CSI.WithoutSnapshotMetadata()
		change(t, map[int64]int{10 * block: 512})
		du := backup(t, "block-3")
		if du.Status.IncrementalBytes != size || !strings.Contains(du.Status.Message, "read the whole volume: CSI driver "+framework.CSIDriver+" serves no SnapshotMetadata API") {
			t.Errorf("read %d bytes (%q), want the whole volume and why", du.Status.IncrementalBytes, du.Status.Message)
		}
		if got := keptBases(t); len(got) != 1 || got[0] != du2.Name {
			t.Errorf("kept bases %v, want still the second upload's %s", got, du2.Name)
		}
	})

	step("with the API back, the changes are asked since the last snapshot kept", func(t *testing.T) {
		c.CSI.WithSnapshotMetadata()
		change(t, map[int64]int{20 * block: 512})
		want := bytes.Clone(volume)
		du := backup(t, "block-4")
		// Blocks 10 (changed before block-3) and 20, since block-2's.
		if du.Status.IncrementalBytes != 2*block || !strings.Contains(du.Status.Message, du2.Status.SnapshotID) {
			t.Errorf("read %d bytes (%q), want the 2 blocks changed since %s", du.Status.IncrementalBytes, du.Status.Message, du2.Status.SnapshotID)
		}
		restore(t, "block-4", "disks-4", want)
	})

	step("the backup of the kept base deleted, the base goes with it", func(t *testing.T) {
		if got := keptBases(t); len(got) != 1 {
			t.Fatalf("kept bases %v, want block-4's", got)
		}
		wants("backup delete", velero("backup", "delete", "block-4", "--confirm"), `Request to delete backup "block-4" submitted successfully`)
		poll(t, "backup block-4 gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
			_, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, "block-4", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		// keptBases waits for the driver to hold none either.
		if got := keptBases(t); len(got) != 0 {
			t.Errorf("kept bases %v after their backup was deleted, want none", got)
		}
	})
}
