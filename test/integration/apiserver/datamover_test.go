package apiserver

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
)

// dataUpload is a valid DataUpload of claim shop/data.
func dataUpload(name, namespace string) *velerov2alpha1.DataUpload {
	return &velerov2alpha1.DataUpload{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: velerov2alpha1.DataUploadSpec{
			SnapshotType: velerov2alpha1.SnapshotTypeCSI,
			CSISnapshot:  &velerov2alpha1.CSISnapshotSpec{VolumeSnapshot: "velero-data-x1", StorageClass: "csi-hostpath-sc"},
			SourcePVC:    "data", SourceNamespace: "shop", BackupStorageLocation: "default",
			OperationTimeout: metav1.Duration{Duration: 10 * time.Minute},
		},
	}
}

// TestDataMoverAPI: velero.io/v2alpha1 is served beside v1 (still the
// preferred version) with Velero's DataUpload and DataDownload: created in
// the admin namespace only, their names and IDs checked as what they
// become, the spec changed only to be cancelled, the status written by the
// engines along the transition table, and kubectl shows Velero's columns.
func TestDataMoverAPI(t *testing.T) {
	s := apiServer(t)
	ctx := context.Background()
	uploads := s.Clientset.VeleroV2alpha1().DataUploads(ns)

	t.Run("discovery", func(t *testing.T) {
		out := mustKubectl(t, s, "api-versions")
		if !strings.Contains(out, "velero.io/v1\n") || !strings.Contains(out, "velero.io/v2alpha1\n") {
			t.Errorf("api-versions lacks velero.io/v1 or v2alpha1:\n%s", out)
		}
		group, err := s.Clientset.Discovery().ServerGroups()
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range group.Groups {
			if g.Name == "velero.io" && g.PreferredVersion.Version != "v1" {
				t.Errorf("velero.io prefers %s, want v1", g.PreferredVersion.Version)
			}
		}
	})
	t.Run("admin namespace only", func(t *testing.T) {
		if _, err := s.Clientset.VeleroV2alpha1().DataUploads("shop").Create(ctx, dataUpload("elsewhere", "shop"), metav1.CreateOptions{}); !invalidAt(err, "metadata.namespace", "admin namespace") {
			t.Errorf("a DataUpload outside the admin namespace: %v, want 422 at metadata.namespace", err)
		}
	})
	t.Run("hostile names", func(t *testing.T) {
		du := dataUpload("hostile", ns)
		du.Spec.SourcePVC = "../../etc"
		if _, err := uploads.Create(ctx, du, metav1.CreateOptions{}); !invalidAt(err, "spec.sourcePVC", "PersistentVolumeClaim") {
			t.Errorf("a claim name that is a path: %v, want 422 at spec.sourcePVC", err)
		}
		dd := &velerov2alpha1.DataDownload{ObjectMeta: metav1.ObjectMeta{Name: "hostile", Namespace: ns}, Spec: velerov2alpha1.DataDownloadSpec{
			TargetVolume: velerov2alpha1.TargetVolumeSpec{PVC: "data", Namespace: "shop"}, SnapshotID: "../../k1",
			SourceNamespace: "shop", BackupStorageLocation: "default"}}
		if _, err := s.Clientset.VeleroV2alpha1().DataDownloads(ns).Create(ctx, dd, metav1.CreateOptions{}); !invalidAt(err, "spec.snapshotID", "snapshot ID") {
			t.Errorf("a snapshot ID that is a path: %v, want 422 at spec.snapshotID", err)
		}
	})
	if _, err := uploads.Create(ctx, dataUpload("du-1", ns), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("the spec changes only to be cancelled", func(t *testing.T) {
		if _, err := uploads.Patch(ctx, "du-1", types.MergePatchType, []byte(`{"spec":{"sourcePVC":"other"}}`), metav1.PatchOptions{}); !invalidAt(err, "spec", "immutable") {
			t.Errorf("changing the claim: %v, want 422 at spec", err)
		}
		if _, err := uploads.Patch(ctx, "du-1", types.MergePatchType, []byte(`{"spec":{"cancel":true}}`), metav1.PatchOptions{}); err != nil {
			t.Errorf("cancelling: %v", err)
		}
		if _, err := uploads.Patch(ctx, "du-1", types.MergePatchType, []byte(`{"spec":{"cancel":false}}`), metav1.PatchOptions{}); !invalidAt(err, "spec.cancel", "un-cancelled") {
			t.Errorf("un-cancelling: %v, want 422 at spec.cancel", err)
		}
	})
	t.Run("the status is the engines'", func(t *testing.T) {
		if _, err := uploads.Patch(ctx, "du-1", types.MergePatchType, []byte(`{"status":{"phase":"Completed"}}`), metav1.PatchOptions{}, "status"); !invalidAt(err, "status", "server's engines only") {
			t.Errorf("an admin writing the status: %v, want 422 at status", err)
		}
		engine := s.EngineClientset().VeleroV2alpha1().DataUploads(ns)
		if _, err := engine.Patch(ctx, "du-1", types.MergePatchType, []byte(`{"status":{"phase":"Completed"}}`), metav1.PatchOptions{}, "status"); !invalidAt(err, "status.phase", "Completed") {
			t.Errorf("an engine completing a DataUpload nothing took: %v, want 422 at status.phase", err)
		}
		if _, err := engine.Patch(ctx, "du-1", types.MergePatchType, []byte(`{"status":{"phase":"Canceled","progress":{"bytesDone":5,"totalBytes":9}}}`), metav1.PatchOptions{}, "status"); err != nil {
			t.Errorf("an engine ending a cancelled DataUpload: %v", err)
		}
	})
	t.Run("kubectl columns", func(t *testing.T) {
		out := mustKubectl(t, s, "get", "datauploads", "-n", ns)
		if h := strings.Join(strings.Fields(strings.SplitN(out, "\n", 2)[0]), " "); h != "NAME STATUS STARTED BYTES DONE TOTAL BYTES STORAGE LOCATION AGE NODE" {
			t.Errorf("dataupload columns %q", h)
		}
		if !strings.Contains(out, "du-1") || !strings.Contains(out, "Canceled") {
			t.Errorf("dataupload row:\n%s", out)
		}
		if out := mustKubectl(t, s, "get", "datauploads", "-n", ns, "-o", "wide"); !strings.Contains(out, "INCREMENTAL BYTES") {
			t.Errorf("-o wide lacks INCREMENTAL BYTES:\n%s", out)
		}
		dd := &velerov2alpha1.DataDownload{ObjectMeta: metav1.ObjectMeta{Name: "dd-1", Namespace: ns}, Spec: velerov2alpha1.DataDownloadSpec{
			TargetVolume: velerov2alpha1.TargetVolumeSpec{PVC: "data", Namespace: "shop"}, SnapshotID: "k3f9a0b1c2d3e4f5",
			SourceNamespace: "shop", BackupStorageLocation: "default"}}
		if _, err := s.Clientset.VeleroV2alpha1().DataDownloads(ns).Create(ctx, dd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		out = mustKubectl(t, s, "get", "datadownloads", "-n", ns)
		if h := strings.Join(strings.Fields(strings.SplitN(out, "\n", 2)[0]), " "); h != "NAME STATUS STARTED BYTES DONE TOTAL BYTES STORAGE LOCATION AGE NODE" {
			t.Errorf("datadownload columns %q", h)
		}
	})
}
