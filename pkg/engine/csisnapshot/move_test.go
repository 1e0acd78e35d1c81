package csisnapshot

import (
	"context"
	"fmt"
	"strings"
	"testing"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/engine/backup"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned/fake"
	"github.com/backstop-io/backstop/pkg/volumeinfo"
)

// moveFixture is the fixture with a backup that moves data, and this
// server's client for the DataUploads.
func moveFixture(t *testing.T) (*fixture, MoveAction, *fake.Clientset) {
	f := newFixture(t)
	f.backup.Spec.SnapshotMoveData = ptr.To(true)
	f.backup.Spec.StorageLocation = "default"
	client := fake.NewSimpleClientset()
	n := 0
	client.PrependReactor("create", "datauploads", func(a clienttesting.Action) (bool, runtime.Object, error) {
		du := a.(clienttesting.CreateAction).GetObject().(*velerov2alpha1.DataUpload)
		if du.Name == "" {
			n++
			du.Name = fmt.Sprintf("%s%05d", du.GenerateName, n)
		}
		return false, nil, nil
	})
	return f, MoveAction{Action: f.action, Client: client}, client
}

func TestMoveStart(t *testing.T) {
	ctx := context.Background()
	t.Run("a backup that moves data: the claim's snapshot and Velero's DataUpload of it", func(t *testing.T) {
		f, move, client := moveFixture(t)
		pvc, _ := f.kube.CoreV1().PersistentVolumeClaims("shop").Get(ctx, "data", metav1.GetOptions{})
		pvc.UID = "pvc-uid"
		if _, err := f.kube.CoreV1().PersistentVolumeClaims("shop").Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		item := f.item(t, "data")
		if started, err := f.action.Start(ctx, f.backup, item); err != nil || started.OperationID != "" {
			t.Fatalf("the snapshot action started %+v (%v) for a backup that moves data; want nothing", started, err)
		}
		started, err := move.Start(ctx, f.backup, item)
		if err != nil {
			t.Fatal(err)
		}
		wantID := "du-backup-uid.pvc-uid"
		if started.OperationID != wantID || !started.Modified || started.Resource != nil || len(started.PostOperationItems) != 1 {
			t.Fatalf("started %+v, want operation %s for the claim, modified, the DataUpload after", started, wantID)
		}
		list, err := client.VeleroV2alpha1().DataUploads("velero").List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			t.Fatalf("DataUploads: %v (%v), want one", list, err)
		}
		du := list.Items[0]
		vs, err := f.snaps.SnapshotV1().VolumeSnapshots("shop").List(ctx, metav1.ListOptions{})
		if err != nil || len(vs.Items) != 1 {
			t.Fatalf("VolumeSnapshots: %v (%v), want one", vs, err)
		}
		wantLabels := map[string]string{velerov1.BackupNameLabel: "nightly", velerov1.BackupUIDLabel: "backup-uid",
			velerov1.PVCUIDLabel: "pvc-uid", velerov1.AsyncOperationIDLabel: wantID}
		for k, v := range wantLabels {
			if du.Labels[k] != v {
				t.Errorf("DataUpload label %s = %q, want %q", k, du.Labels[k], v)
			}
		}
		spec := du.Spec
		if !strings.HasPrefix(du.Name, "nightly-") || spec.SnapshotType != velerov2alpha1.SnapshotTypeCSI || spec.SourcePVC != "data" || spec.SourceNamespace != "shop" ||
			spec.BackupStorageLocation != "default" || spec.CSISnapshot == nil || spec.CSISnapshot.VolumeSnapshot != vs.Items[0].Name ||
			spec.CSISnapshot.Driver != driver || spec.CSISnapshot.StorageClass != "csi-hostpath-sc" || spec.CSISnapshot.SnapshotClass != "csi-hostpath-snapclass" ||
			len(du.OwnerReferences) != 1 || du.OwnerReferences[0].UID != "backup-uid" {
			t.Errorf("DataUpload %s: %+v, owners %v", du.Name, spec, du.OwnerReferences)
		}
		if got := item.GetAnnotations()[velerov1.DataUploadNameAnnotation]; got != "velero/"+du.Name {
			t.Errorf("the claim's %s = %q, want velero/%s", velerov1.DataUploadNameAnnotation, got, du.Name)
		}
		if p := started.PostOperationItems[0]; p.Resource != "datauploads" || p.Name != du.Name || p.Namespace != "velero" {
			t.Errorf("post-operation item %+v", p)
		}
	})
	t.Run("a backup that does not move data: nothing", func(t *testing.T) {
		f, move, client := moveFixture(t)
		f.backup.Spec.SnapshotMoveData = ptr.To(false)
		started, err := move.Start(ctx, f.backup, f.item(t, "data"))
		list, _ := client.VeleroV2alpha1().DataUploads("velero").List(ctx, metav1.ListOptions{})
		if err != nil || started.OperationID != "" || len(list.Items) != 0 {
			t.Errorf("started %+v (%v), %d DataUploads; want nothing", started, err, len(list.Items))
		}
	})
	t.Run("the DataUpload cannot be made: the snapshot is discarded", func(t *testing.T) {
		f, move, client := moveFixture(t)
		client.PrependReactor("create", "datauploads", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, fmt.Errorf("refused")
		})
		// Bound at once (the discard waits for a content a while).
		f.snaps.PrependReactor("create", "volumesnapshots", func(a clienttesting.Action) (bool, runtime.Object, error) {
			a.(clienttesting.CreateAction).GetObject().(*snapshotv1.VolumeSnapshot).Status = &snapshotv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: ptr.To("content-1")}
			return false, nil, nil
		})
		if _, err := move.Start(ctx, f.backup, f.item(t, "data")); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("Start: %v, want the refusal", err)
		}
		vs, _ := f.snaps.SnapshotV1().VolumeSnapshots("shop").List(ctx, metav1.ListOptions{})
		if len(vs.Items) != 0 {
			t.Errorf("%d VolumeSnapshots left, want the one taken deleted", len(vs.Items))
		}
	})
}

func TestMoveProgress(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		st    velerov2alpha1.DataUploadStatus
		want  backup.OperationProgress
		noDU  bool
		other bool
	}{
		{name: "not taken", st: velerov2alpha1.DataUploadStatus{}, want: backup.OperationProgress{}},
		{name: "running", st: velerov2alpha1.DataUploadStatus{Phase: velerov2alpha1.DataUploadPhaseInProgress, Progress: velerov2alpha1.DataMoveOperationProgress{BytesDone: 5, TotalBytes: 10}},
			want: backup.OperationProgress{Description: "InProgress", OperationUnits: "Bytes", NCompleted: 5, NTotal: 10}},
		{name: "completed", st: velerov2alpha1.DataUploadStatus{Phase: velerov2alpha1.DataUploadPhaseCompleted, Progress: velerov2alpha1.DataMoveOperationProgress{BytesDone: 10, TotalBytes: 10}},
			want: backup.OperationProgress{Completed: true, Description: "Completed", OperationUnits: "Bytes", NCompleted: 10, NTotal: 10}},
		{name: "failed", st: velerov2alpha1.DataUploadStatus{Phase: velerov2alpha1.DataUploadPhaseFailed, Message: "disk full"},
			want: backup.OperationProgress{Completed: true, Err: "disk full", Description: "Failed", OperationUnits: "Bytes"}},
		{name: "canceled", st: velerov2alpha1.DataUploadStatus{Phase: velerov2alpha1.DataUploadPhaseCanceled},
			want: backup.OperationProgress{Completed: true, Err: "DataUpload is canceled", Description: "Canceled", OperationUnits: "Bytes"}},
		{name: "gone", noDU: true, want: backup.OperationProgress{Completed: true, Err: "its DataUpload is gone"}},
		{name: "another backup's", other: true, want: backup.OperationProgress{Completed: true, Err: "its DataUpload is gone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, move, client := moveFixture(t)
			if !tc.noDU {
				uid := "backup-uid"
				if tc.other {
					uid = "other-uid"
				}
				du := &velerov2alpha1.DataUpload{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "nightly-1",
					Labels: map[string]string{velerov1.AsyncOperationIDLabel: "du-x", velerov1.BackupUIDLabel: uid}}, Status: tc.st}
				if _, err := client.VeleroV2alpha1().DataUploads("velero").Create(ctx, du, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := move.Progress(ctx, f.backup, "du-x")
			if err != nil || got != tc.want {
				t.Errorf("Progress = %+v (%v), want %+v", got, err, tc.want)
			}
		})
	}
}

func TestMoveCancelAndFinish(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T, st velerov2alpha1.DataUploadStatus) (*fixture, MoveAction, *fake.Clientset, *backup.BackupOperation) {
		f, move, client := moveFixture(t)
		vs := &snapshotv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "velero-data-1", UID: "vs-uid",
			Labels: map[string]string{velerov1.BackupUIDLabel: "backup-uid", velerov1.BackupNameLabel: "nightly"}},
			Status: &snapshotv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: ptr.To("content-1")}}
		if _, err := f.snaps.SnapshotV1().VolumeSnapshots("shop").Create(ctx, vs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		du := &velerov2alpha1.DataUpload{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "nightly-1",
			Labels: map[string]string{velerov1.AsyncOperationIDLabel: "du-x", velerov1.BackupUIDLabel: "backup-uid"}},
			Spec: velerov2alpha1.DataUploadSpec{SourceNamespace: "shop", SourcePVC: "data",
				CSISnapshot: &velerov2alpha1.CSISnapshotSpec{VolumeSnapshot: "velero-data-1", Driver: driver}}, Status: st}
		if _, err := client.VeleroV2alpha1().DataUploads("velero").Create(ctx, du, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		op := &backup.BackupOperation{Spec: backup.BackupOperationSpec{OperationID: "du-x", BackupItemAction: MoveName,
			ResourceIdentifier: backup.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "shop", Name: "data"}},
			Status: backup.OperationStatus{Phase: backup.OperationPhaseCompleted}}
		return f, move, client, op
	}
	t.Run("cancel: spec.cancel set, the snapshot no data mover took deleted", func(t *testing.T) {
		f, move, client, _ := setup(t, velerov2alpha1.DataUploadStatus{})
		if err := move.Cancel(ctx, f.backup, "du-x"); err != nil {
			t.Fatal(err)
		}
		du, _ := client.VeleroV2alpha1().DataUploads("velero").Get(ctx, "nightly-1", metav1.GetOptions{})
		if !du.Spec.Cancel {
			t.Error("spec.cancel is not set")
		}
		if _, err := f.snaps.SnapshotV1().VolumeSnapshots("shop").Get(ctx, "velero-data-1", metav1.GetOptions{}); err == nil {
			t.Error("the claim's snapshot is still there")
		}
		content, err := f.snaps.SnapshotV1().VolumeSnapshotContents().Get(ctx, "content-1", metav1.GetOptions{})
		if err == nil && content.Spec.DeletionPolicy != snapshotv1.VolumeSnapshotContentDelete {
			t.Errorf("content policy %s, want Delete", content.Spec.DeletionPolicy)
		}
	})
	t.Run("cancel of an ended DataUpload writes nothing", func(t *testing.T) {
		f, move, client, _ := setup(t, velerov2alpha1.DataUploadStatus{Phase: velerov2alpha1.DataUploadPhaseCompleted})
		if err := move.Cancel(ctx, f.backup, "du-x"); err != nil {
			t.Fatal(err)
		}
		if du, _ := client.VeleroV2alpha1().DataUploads("velero").Get(ctx, "nightly-1", metav1.GetOptions{}); du.Spec.Cancel {
			t.Error("a Completed DataUpload was cancelled")
		}
	})
	t.Run("final items: the completed DataUpload in the tarball, the volume moved", func(t *testing.T) {
		f, move, _, op := setup(t, velerov2alpha1.DataUploadStatus{Phase: velerov2alpha1.DataUploadPhaseCompleted, SnapshotID: "k123",
			IncrementalBytes: 4, Progress: velerov2alpha1.DataMoveOperationProgress{TotalBytes: 10, BytesDone: 10}})
		got, err := move.FinalItems(ctx, f.backup, op)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Items) != 1 || got.Items[0].Object.GetKind() != "DataUpload" || got.Items[0].Object.GetAPIVersion() != "velero.io/v2alpha1" {
			t.Fatalf("items %+v, want the DataUpload", got.Items)
		}
		v := got.Volume
		m := v.SnapshotDataMovementInfo
		if v == nil || !v.SnapshotDataMoved || v.Result != volumeinfo.ResultSucceeded || v.PVCName != "data" || m == nil ||
			m.SnapshotHandle != "k123" || m.Size != 10 || m.IncrementalSize != 4 || m.DataMover != "velero" || m.UploaderType != "kopia" ||
			m.OperationID != "du-x" || m.Phase != "Completed" || m.RetainedSnapshot != "velero-data-1" {
			t.Errorf("volume %+v, movement %+v", v, m)
		}
	})
	t.Run("final items of a failed upload: the volume failed, nothing in the tarball", func(t *testing.T) {
		f, move, _, op := setup(t, velerov2alpha1.DataUploadStatus{Phase: velerov2alpha1.DataUploadPhaseFailed, Message: "boom"})
		op.Status.Phase = backup.OperationPhaseFailed
		got, err := move.FinalItems(ctx, f.backup, op)
		if err != nil || len(got.Items) != 0 || got.Volume == nil || got.Volume.Result != volumeinfo.ResultFailed {
			t.Errorf("final items %+v (%v)", got, err)
		}
	})
	t.Run("found after a restart: the backup's DataUploads, each its claim's operation", func(t *testing.T) {
		f, move, _, _ := setup(t, velerov2alpha1.DataUploadStatus{})
		found, err := move.StartedOperations(ctx, f.backup)
		if err != nil || len(found) != 1 || found[0].OperationID != "du-x" || found[0].Resource == nil ||
			found[0].Resource.Namespace != "shop" || found[0].Resource.Name != "data" {
			t.Errorf("found %+v (%v)", found, err)
		}
	})
}
