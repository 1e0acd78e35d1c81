package backup

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/archive"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/objectstore"
	"github.com/backstop-io/backstop/pkg/volumeinfo"
)

var (
	snapshotsResource = items.Resource{GVR: schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"},
		Kind: "VolumeSnapshot", Namespaced: true}
	classesResource = items.Resource{GVR: schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotclasses"},
		Kind: "VolumeSnapshotClass"}
)

// finisher is an OperationFinisher that records what it was asked: each
// completed operation leaves a VolumeSnapshot of its name and the one
// class they share.
type finisher struct {
	canceled, discarded, released []string
}

func (f *finisher) Name() string             { return "test/snapshots" }
func (f *finisher) AppliesTo(gr string) bool { return gr == "persistentvolumeclaims" }
func (f *finisher) Start(context.Context, *velerov1.Backup, *unstructured.Unstructured) (Started, error) {
	return Started{}, nil
}
func (f *finisher) Progress(context.Context, *velerov1.Backup, string) (OperationProgress, error) {
	return OperationProgress{}, nil
}
func (f *finisher) Cancel(_ context.Context, _ *velerov1.Backup, id string) error {
	f.canceled = append(f.canceled, id)
	return nil
}
func (f *finisher) FinalItems(_ context.Context, _ *velerov1.Backup, op *BackupOperation) (FinalItems, error) {
	id := op.Spec.ResourceIdentifier
	result := volumeinfo.ResultFailed
	if op.Status.Phase == OperationPhaseCompleted {
		result = volumeinfo.ResultSucceeded
	}
	out := FinalItems{Volume: &volumeinfo.BackupVolumeInfo{PVCNamespace: id.Namespace, PVCName: id.Name,
		BackupMethod: volumeinfo.MethodCSISnapshot, Result: result}}
	if op.Status.Phase != OperationPhaseCompleted {
		return out, nil
	}
	vs := &unstructured.Unstructured{}
	vs.SetAPIVersion("snapshot.storage.k8s.io/v1")
	vs.SetKind("VolumeSnapshot")
	vs.SetNamespace(id.Namespace)
	vs.SetName(id.Name)
	class := &unstructured.Unstructured{}
	class.SetAPIVersion("snapshot.storage.k8s.io/v1")
	class.SetKind("VolumeSnapshotClass")
	class.SetName("shared")
	out.Items = []FinalItem{{Resource: snapshotsResource, Object: vs}, {Resource: classesResource, Object: class}}
	return out, nil
}
func (f *finisher) Release(_ context.Context, _ *velerov1.Backup, op *BackupOperation) error {
	f.released = append(f.released, op.Spec.OperationID)
	return nil
}
func (f *finisher) Discard(_ context.Context, _ *velerov1.Backup, op *BackupOperation) error {
	f.discarded = append(f.discarded, op.Spec.OperationID)
	return nil
}

func operation(id, phase string) *BackupOperation {
	return &BackupOperation{
		Spec:   BackupOperationSpec{BackupItemAction: "test/snapshots", OperationID: id, ResourceIdentifier: ResourceIdentifier{Namespace: "shop", Name: id}},
		Status: OperationStatus{Phase: phase},
	}
}

// TestFinishOperations: the items of the completed operations go into the
// tarball (each once, beside what it held) and the resource list, every
// ended operation's volume into the volume info; what failed ones made is
// discarded, and only the completed ones are released.
func TestFinishOperations(t *testing.T) {
	ctx := context.Background()
	store, err := objectstore.NewFilesystem(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	layout := objectstore.NewLayout("")
	var tarball bytes.Buffer
	w, err := archive.NewWriter(&tarball, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddItem("persistentvolumeclaims", "v1", "shop", "data", []byte(`{"kind":"PersistentVolumeClaim"}`)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	tarKey, _ := layout.Key(velerov1.DownloadTargetKindBackupContents, "b")
	if err := store.Put(ctx, tarKey, &tarball); err != nil {
		t.Fatal(err)
	}
	listKey, _ := layout.Key(velerov1.DownloadTargetKindBackupResourceList, "b")
	if err := objectstore.PutGzip(ctx, store, listKey, []byte(`{"v1/PersistentVolumeClaim":["shop/data"]}`)); err != nil {
		t.Fatal(err)
	}

	clk := clocktesting.NewFakeClock(time.Unix(100, 0))
	b := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "b", UID: "u"}}
	log, err := items.NewLog(t.TempDir(), clk, klog.Background(), "backup", "b")
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	f := &finisher{}
	ops := newOperations([]ItemAction{f}, b, log, clk)
	ops.list = []*BackupOperation{operation("a", OperationPhaseCompleted), operation("x", OperationPhaseFailed), operation("c", OperationPhaseCompleted)}
	r := &backupRun{c: &Controller{cfg: Config{Clock: clk}}, b: b, store: store, layout: layout, log: log, ops: ops}

	fin, err := r.finishOperations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("the tarball", func(t *testing.T) {
		rc, err := store.Get(ctx, tarKey)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		ar, err := archive.NewReader(rc)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for {
			it, err := ar.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, it.GroupResource+" "+it.Version+" "+it.Namespace+"/"+it.Name)
		}
		want := []string{
			"persistentvolumeclaims  shop/data", "persistentvolumeclaims v1 shop/data",
			"volumesnapshots.snapshot.storage.k8s.io  shop/a", "volumesnapshots.snapshot.storage.k8s.io v1 shop/a",
			"volumesnapshotclasses.snapshot.storage.k8s.io  /shared", "volumesnapshotclasses.snapshot.storage.k8s.io v1 /shared",
			"volumesnapshots.snapshot.storage.k8s.io  shop/c", "volumesnapshots.snapshot.storage.k8s.io v1 shop/c",
		}
		if !slices.Equal(got, want) {
			t.Errorf("tarball items:\n got %q\nwant %q", got, want)
		}
	})
	t.Run("the resource list", func(t *testing.T) {
		rc, err := store.Get(ctx, listKey)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		gz, err := gzip.NewReader(rc)
		if err != nil {
			t.Fatal(err)
		}
		list := map[string][]string{}
		if err := json.NewDecoder(gz).Decode(&list); err != nil {
			t.Fatal(err)
		}
		if got := list["snapshot.storage.k8s.io/v1/VolumeSnapshot"]; !slices.Equal(got, []string{"shop/a", "shop/c"}) {
			t.Errorf("VolumeSnapshots listed: %v", got)
		}
		if got := list["snapshot.storage.k8s.io/v1/VolumeSnapshotClass"]; !slices.Equal(got, []string{"shared"}) {
			t.Errorf("classes listed: %v", got)
		}
		if got := list["v1/PersistentVolumeClaim"]; !slices.Equal(got, []string{"shop/data"}) {
			t.Errorf("claims listed: %v", got)
		}
	})
	t.Run("the volumes and what is discarded and released", func(t *testing.T) {
		if attempted, completed := csiSnapshotCounts(fin.volumes); attempted != 3 || completed != 2 {
			t.Errorf("CSI snapshots %d attempted, %d completed; want 3, 2", attempted, completed)
		}
		if !slices.Equal(f.discarded, []string{"x"}) {
			t.Errorf("discarded %v, want the failed operation x", f.discarded)
		}
		releaseOperations(ctx, ops, b, log)
		if !slices.Equal(f.released, []string{"a", "c"}) {
			t.Errorf("released %v, want the completed operations a and c", f.released)
		}
	})
	t.Run("cancelled: the running operation cancelled, what the ended ones made discarded", func(t *testing.T) {
		f := &finisher{}
		ops := newOperations([]ItemAction{f}, b, log, clk)
		ops.list = []*BackupOperation{operation("done", OperationPhaseCompleted), operation("running", OperationPhaseInProgress)}
		ops.cancelAll(ctx, velerov1.BackupCancelledReason)
		if !slices.Equal(f.canceled, []string{"running"}) || !slices.Equal(f.discarded, []string{"done"}) {
			t.Errorf("cancelled %v, discarded %v; want [running] and [done]", f.canceled, f.discarded)
		}
		if ops.list[1].Status.Phase != OperationPhaseFailed {
			t.Errorf("the cancelled operation is %s", ops.list[1].Status.Phase)
		}
	})
}
