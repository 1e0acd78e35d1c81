package validation

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/velero"
)

func validUpload() velero.DataUploadSpec {
	return velero.DataUploadSpec{
		SnapshotType: velero.SnapshotTypeCSI,
		CSISnapshot:  &velero.CSISnapshotSpec{VolumeSnapshot: "velero-data-x1", StorageClass: "csi-hostpath-sc", Driver: "hostpath.csi.k8s.io"},
		SourcePVC:    "data", SourceNamespace: "shop", BackupStorageLocation: "default",
		OperationTimeout: metav1.Duration{Duration: 10 * time.Minute},
	}
}

func validDownload() velero.DataDownloadSpec {
	return velero.DataDownloadSpec{
		TargetVolume: velero.TargetVolumeSpec{PVC: "data", Namespace: "shop"}, SnapshotID: "k3f9a0b1c2d3e4f5",
		SourceNamespace: "shop", BackupStorageLocation: "default", OperationTimeout: metav1.Duration{Duration: 10 * time.Minute},
	}
}

// TestValidateDataUploadSpec: every string that becomes a name, a
// namespace, a path or a key is refused at its field when it is not one.
func TestValidateDataUploadSpec(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*velero.DataUploadSpec)
		want []string
	}{
		{"valid", func(*velero.DataUploadSpec) {}, nil},
		{"another data mover's", func(s *velero.DataUploadSpec) { s.DataMover = "vendor.example.com" }, nil},
		{"no snapshot type", func(s *velero.DataUploadSpec) { s.SnapshotType = "" }, []string{"spec.snapshotType"}},
		{"an unknown snapshot type", func(s *velero.DataUploadSpec) { s.SnapshotType = "Restic" }, []string{"spec.snapshotType"}},
		{"a CSI upload without its snapshot", func(s *velero.DataUploadSpec) { s.CSISnapshot = nil }, []string{"spec.csiSnapshot"}},
		{"a snapshot name that is a path", func(s *velero.DataUploadSpec) { s.CSISnapshot.VolumeSnapshot = "../x" }, []string{"spec.csiSnapshot.volumeSnapshot"}},
		{"no storage class (a static volume)", func(s *velero.DataUploadSpec) { s.CSISnapshot.StorageClass = "" }, nil},
		{"a storage class with a slash", func(s *velero.DataUploadSpec) { s.CSISnapshot.StorageClass = "a/b" }, []string{"spec.csiSnapshot.storageClass"}},
		{"a snapshot class with a slash", func(s *velero.DataUploadSpec) { s.CSISnapshot.SnapshotClass = "a/b" }, []string{"spec.csiSnapshot.snapshotClass"}},
		{"a driver name with a slash", func(s *velero.DataUploadSpec) { s.CSISnapshot.Driver = "csi/../x" }, []string{"spec.csiSnapshot.driver"}},
		{"a driver name too long", func(s *velero.DataUploadSpec) { s.CSISnapshot.Driver = strings.Repeat("d", 64) }, []string{"spec.csiSnapshot.driver"}},
		{"no claim", func(s *velero.DataUploadSpec) { s.SourcePVC = "" }, []string{"spec.sourcePVC"}},
		{"a claim name that is a path", func(s *velero.DataUploadSpec) { s.SourcePVC = "/etc/shadow" }, []string{"spec.sourcePVC"}},
		{"a namespace with dots", func(s *velero.DataUploadSpec) { s.SourceNamespace = "a.b" }, []string{"spec.sourceNamespace"}},
		{"no location", func(s *velero.DataUploadSpec) { s.BackupStorageLocation = "" }, []string{"spec.backupStorageLocation"}},
		{"a location with a NUL", func(s *velero.DataUploadSpec) { s.BackupStorageLocation = "a\x00b" }, []string{"spec.backupStorageLocation"}},
		{"a data mover's name as Velero allows it", func(s *velero.DataUploadSpec) { s.DataMover = "My_Mover" }, nil},
		{"a data mover's name too long", func(s *velero.DataUploadSpec) { s.DataMover = strings.Repeat("m", 1025) }, []string{"spec.datamover"}},
		{"a config key that is a path", func(s *velero.DataUploadSpec) { s.DataMoverConfig = map[string]string{"../k": "v"} }, []string{"spec.dataMoverConfig[../k]"}},
		{"a config too large", func(s *velero.DataUploadSpec) {
			s.DataMoverConfig = map[string]string{"k": strings.Repeat("v", 17<<10)}
		}, []string{"spec.dataMoverConfig"}},
		{"a negative timeout", func(s *velero.DataUploadSpec) { s.OperationTimeout.Duration = -time.Second }, []string{"spec.operationTimeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := validUpload()
			spec.CSISnapshot = spec.CSISnapshot.DeepCopy()
			tc.edit(&spec)
			if got := fields(ValidateDataUploadSpec(&spec, field.NewPath("spec"))); !slices.Equal(got, tc.want) {
				t.Errorf("errors at %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidateDataDownloadSpec(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*velero.DataDownloadSpec)
		want []string
	}{
		{"valid", func(*velero.DataDownloadSpec) {}, nil},
		{"with a volume", func(s *velero.DataDownloadSpec) { s.TargetVolume.PV = "pv-1" }, nil},
		{"no claim", func(s *velero.DataDownloadSpec) { s.TargetVolume.PVC = "" }, []string{"spec.targetVolume.pvc"}},
		{"a volume name that is a path", func(s *velero.DataDownloadSpec) { s.TargetVolume.PV = "../pv" }, []string{"spec.targetVolume.pv"}},
		{"no namespace", func(s *velero.DataDownloadSpec) { s.TargetVolume.Namespace = "" }, []string{"spec.targetVolume.namespace"}},
		{"no snapshot", func(s *velero.DataDownloadSpec) { s.SnapshotID = "" }, []string{"spec.snapshotID"}},
		{"a snapshot ID that is a path", func(s *velero.DataDownloadSpec) { s.SnapshotID = "../../p" }, []string{"spec.snapshotID"}},
		{"a snapshot ID too long", func(s *velero.DataDownloadSpec) { s.SnapshotID = strings.Repeat("a", 129) }, []string{"spec.snapshotID"}},
		{"another mover's snapshot ID", func(s *velero.DataDownloadSpec) { s.DataMover = "vendor"; s.SnapshotID = "vol/snap:1" }, nil},
		{"another mover's snapshot ID too long", func(s *velero.DataDownloadSpec) { s.DataMover = "vendor"; s.SnapshotID = strings.Repeat("a", 1025) }, []string{"spec.snapshotID"}},
		{"a source namespace in capitals", func(s *velero.DataDownloadSpec) { s.SourceNamespace = "Shop" }, []string{"spec.sourceNamespace"}},
		{"an unknown node OS", func(s *velero.DataDownloadSpec) { s.NodeOS = "plan9" }, []string{"spec.nodeOS"}},
		{"a negative size", func(s *velero.DataDownloadSpec) { s.SnapshotSize = -1 }, []string{"spec.snapshotSize"}},
		{"no location", func(s *velero.DataDownloadSpec) { s.BackupStorageLocation = "" }, []string{"spec.backupStorageLocation"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := validDownload()
			tc.edit(&spec)
			if got := fields(ValidateDataDownloadSpec(&spec, field.NewPath("spec"))); !slices.Equal(got, tc.want) {
				t.Errorf("errors at %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidateDataMoveName(t *testing.T) {
	for name, want := range map[string]bool{"nightly-x7k2p": true, strings.Repeat("n", 63): true, strings.Repeat("n", 64): false, "a.b": false, "": false} {
		if got := len(ValidateDataMoveName(name, field.NewPath("metadata", "name"))) == 0; got != want {
			t.Errorf("name %q valid: %v, want %v", name, got, want)
		}
	}
}

// TestValidateDataMoveUpdate: the spec changes only to be cancelled.
func TestValidateDataMoveUpdate(t *testing.T) {
	changed := validUpload()
	changed.SourcePVC = "other"
	for _, tc := range []struct {
		name              string
		spec              velero.DataUploadSpec
		cancel, oldCancel bool
		want              []string
	}{
		{"unchanged", validUpload(), false, false, nil},
		{"cancelled", validUpload(), true, false, nil},
		{"un-cancelled", validUpload(), false, true, []string{"spec.cancel"}},
		{"another claim", changed, false, false, []string{"spec"}},
		{"another claim and cancelled", changed, true, false, []string{"spec"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fields(ValidateDataMoveUpdate(tc.spec, validUpload(), tc.cancel, tc.oldCancel, field.NewPath("spec")))
			if !slices.Equal(got, tc.want) {
				t.Errorf("errors at %v, want %v", got, tc.want)
			}
		})
	}
}
