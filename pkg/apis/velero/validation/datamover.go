package validation

import (
	"regexp"
	"strings"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/velero"
)

// The rules of DataUploads and DataDownloads (velero.io/v2alpha1). Their
// strings name claims, namespaces, locations and snapshots the data mover
// opens: each is checked as the name it becomes.

// csiDriverName is Kubernetes' rule for CSI driver names
// (k8s.io/kubernetes pkg/apis/storage/validation).
var csiDriverName = regexp.MustCompile(`^[a-zA-Z0-9][-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9]$`)

// repositorySnapshotID is a snapshot's ID in a kopia repository (a
// manifest ID: letters and digits).
var repositorySnapshotID = regexp.MustCompile(`^[a-zA-Z0-9]{1,128}$`)

// maxDataMoverConfig bounds spec.dataMoverConfig (keys and values).
const maxDataMoverConfig = 16 << 10

// maxForeignValue bounds a string only another data mover reads.
const maxForeignValue = 1024

// builtInMover reports whether a data mover's name is the built-in one's
// (Velero's: "" or "velero").
func builtInMover(name string) bool { return name == "" || name == "velero" }

// ValidateDataMoveName checks the name of a new DataUpload or
// DataDownload: it names the objects the data mover makes for it (claims,
// label values), so it is a DNS-1123 label (generated names are).
func ValidateDataMoveName(name string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(fld, name, msg))
	}
	return errs
}

// ValidateDataUploadSpec checks a DataUpload's spec.
func ValidateDataUploadSpec(spec *velero.DataUploadSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch spec.SnapshotType {
	case "":
		errs = append(errs, field.Required(fldPath.Child("snapshotType"), "the type of the snapshot to move is required"))
	case velero.SnapshotTypeCSI:
		csi := fldPath.Child("csiSnapshot")
		if spec.CSISnapshot == nil {
			errs = append(errs, field.Required(csi, "a CSI snapshot's upload names it"))
			break
		}
		errs = append(errs, requiredName(csi.Child("volumeSnapshot"), spec.CSISnapshot.VolumeSnapshot, "a VolumeSnapshot")...)
		// A statically provisioned claim has none.
		if spec.CSISnapshot.StorageClass != "" {
			errs = append(errs, requiredName(csi.Child("storageClass"), spec.CSISnapshot.StorageClass, "a StorageClass")...)
		}
		if spec.CSISnapshot.SnapshotClass != "" {
			errs = append(errs, requiredName(csi.Child("snapshotClass"), spec.CSISnapshot.SnapshotClass, "a VolumeSnapshotClass")...)
		}
		if d := spec.CSISnapshot.Driver; d != "" && !csiDriverName.MatchString(d) {
			errs = append(errs, field.Invalid(csi.Child("driver"), d, "a CSI driver's name: at most 63 letters, digits, '-', '_' or '.', beginning and ending with a letter or digit"))
		}
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("snapshotType"), spec.SnapshotType, []velero.SnapshotType{velero.SnapshotTypeCSI}))
	}
	errs = append(errs, requiredName(fldPath.Child("sourcePVC"), spec.SourcePVC, "a PersistentVolumeClaim")...)
	errs = append(errs, requiredNamespace(fldPath.Child("sourceNamespace"), spec.SourceNamespace)...)
	errs = append(errs, validateDataMover(spec.BackupStorageLocation, spec.DataMover, spec.DataMoverConfig, spec.OperationTimeout.Duration, fldPath)...)
	return errs
}

var nodeOSes = sets.New(velero.NodeOSAuto, velero.NodeOSLinux, velero.NodeOSWindows)

// ValidateDataDownloadSpec checks a DataDownload's spec.
func ValidateDataDownloadSpec(spec *velero.DataDownloadSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	target := fldPath.Child("targetVolume")
	errs = append(errs, requiredName(target.Child("pvc"), spec.TargetVolume.PVC, "a PersistentVolumeClaim")...)
	if spec.TargetVolume.PV != "" {
		errs = append(errs, requiredName(target.Child("pv"), spec.TargetVolume.PV, "a PersistentVolume")...)
	}
	errs = append(errs, requiredNamespace(target.Child("namespace"), spec.TargetVolume.Namespace)...)
	// The built-in data mover's IDs are kopia's; another mover's are its
	// own business.
	switch id := spec.SnapshotID; {
	case id == "":
		errs = append(errs, field.Required(fldPath.Child("snapshotID"), "the repository's snapshot to restore is required"))
	case builtInMover(spec.DataMover) && !repositorySnapshotID.MatchString(id):
		errs = append(errs, field.Invalid(fldPath.Child("snapshotID"), id, "a snapshot ID of the repository: 1 to 128 letters and digits"))
	case len(id) > maxForeignValue:
		errs = append(errs, field.TooLong(fldPath.Child("snapshotID"), "", maxForeignValue))
	}
	errs = append(errs, requiredNamespace(fldPath.Child("sourceNamespace"), spec.SourceNamespace)...)
	if spec.NodeOS != "" && !nodeOSes.Has(spec.NodeOS) {
		errs = append(errs, field.NotSupported(fldPath.Child("nodeOS"), spec.NodeOS, sets.List(nodeOSes)))
	}
	if spec.SnapshotSize < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("snapshotSize"), spec.SnapshotSize, "must not be negative"))
	}
	errs = append(errs, validateDataMover(spec.BackupStorageLocation, spec.DataMover, spec.DataMoverConfig, spec.OperationTimeout.Duration, fldPath)...)
	return errs
}

// ValidateDataMoveUpdate checks a DataUpload's or DataDownload's spec
// change: only cancel may change, and only to true. spec and oldSpec are
// the specs with their cancel fields cleared.
func ValidateDataMoveUpdate(spec, oldSpec any, cancel, oldCancel bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if oldCancel && !cancel {
		errs = append(errs, field.Forbidden(fldPath.Child("cancel"), "a cancelled data movement cannot be un-cancelled"))
	}
	if !apiequality.Semantic.DeepEqual(spec, oldSpec) {
		errs = append(errs, field.Forbidden(fldPath, "the spec is immutable but for cancel"))
	}
	return errs
}

// validateDataMover checks the fields DataUploads and DataDownloads share.
func validateDataMover(location, mover string, config map[string]string, timeout time.Duration, fldPath *field.Path) field.ErrorList {
	errs := requiredName(fldPath.Child("backupStorageLocation"), location, "a BackupStorageLocation")
	// Velero leaves a mover's name free (a Backup's spec.dataMover names
	// it); only the built-in one runs here.
	if len(mover) > maxForeignValue {
		errs = append(errs, field.TooLong(fldPath.Child("datamover"), "", maxForeignValue))
	}
	size := 0
	for k, v := range config {
		size += len(k) + len(v)
		if msgs := validation.IsConfigMapKey(k); len(msgs) > 0 {
			errs = append(errs, field.Invalid(fldPath.Child("dataMoverConfig").Key(k), k, strings.Join(msgs, "; ")))
		}
	}
	if size > maxDataMoverConfig {
		errs = append(errs, field.TooLong(fldPath.Child("dataMoverConfig"), "", maxDataMoverConfig))
	}
	if timeout < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("operationTimeout"), timeout.String(), "must not be negative"))
	}
	return errs
}

// requiredName checks a required object name (a DNS-1123 subdomain).
func requiredName(fld *field.Path, name, what string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fld, "the name of "+what+" is required")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(fld, name, "the name of "+what+": "+msg))
	}
	return errs
}

// requiredNamespace checks a required namespace name (a DNS-1123 label).
func requiredNamespace(fld *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fld, "a namespace is required")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(fld, name, "a namespace's name: "+msg))
	}
	return errs
}
