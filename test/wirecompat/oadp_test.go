package wirecompat

import (
	"reflect"
	"strings"
	"testing"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
)

// jsonPaths lists the JSON paths of a Go type ("spec.backupSpec",
// "status.veleroBackup.nacuuid", ...), into structs, pointers and slices;
// the Velero and Kubernetes types inside are not walked (their own checks
// are the Velero round trip and Kubernetes').
func jsonPaths(t reflect.Type, prefix string, out map[string]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || !strings.Contains(t.PkgPath(), "/apis/oadp/") {
		return
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous || name == "" || name == "-" {
			continue
		}
		path := prefix + name
		out[path] = true
		jsonPaths(f.Type, path+".", out)
	}
}

func join(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// TestOADPNonAdminWireFormat checks the JSON names and enum values of the
// served oadp.openshift.io/v1alpha1 kinds against upstream's, as recorded
// from github.com/migtools/oadp-non-admin api/v1alpha1 and
// openshift/oadp-operator api/v1alpha1 (../shared/reference/oadp-nonadmin.md):
// that module is not on the Go module proxy, so its types cannot be
// round-tripped as Velero's are.
func TestOADPNonAdminWireFormat(t *testing.T) {
	counters := func(prefix string, names ...string) []string {
		out := []string{prefix}
		for _, n := range names {
			out = append(out, prefix+"."+n)
		}
		return out
	}
	dataCounters := []string{"total", "new", "accepted", "prepared", "inProgress", "canceling", "canceled", "failed", "completed"}
	fsCounters := []string{"total", "new", "inProgress", "failed", "completed"}
	kinds := []struct {
		kind  string
		typ   any
		paths []string
	}{
		{"NonAdminBackup", oadpv1alpha1.NonAdminBackup{}, join([]string{
			"spec.backupSpec", "spec.deleteBackup",
			"status.veleroBackup.spec", "status.veleroBackup.status", "status.veleroBackup.nacuuid", "status.veleroBackup.name", "status.veleroBackup.namespace",
			"status.veleroDeleteBackupRequest.status", "status.veleroDeleteBackupRequest.nacuuid", "status.veleroDeleteBackupRequest.name", "status.veleroDeleteBackupRequest.namespace",
			"status.queueInfo.estimatedQueuePosition", "status.phase", "status.conditions",
		}, counters("status.dataMoverDataUploads", dataCounters...), counters("status.fileSystemPodVolumeBackups", fsCounters...))},
		{"NonAdminRestore", oadpv1alpha1.NonAdminRestore{}, join([]string{
			"spec.restoreSpec",
			"status.veleroRestore.status", "status.veleroRestore.name", "status.veleroRestore.nacuuid", "status.veleroRestore.namespace",
			"status.queueInfo.estimatedQueuePosition", "status.phase", "status.conditions",
		}, counters("status.dataMoverDataDownloads", dataCounters...), counters("status.fileSystemPodVolumeRestores", fsCounters...))},
		{"NonAdminBackupStorageLocation", oadpv1alpha1.NonAdminBackupStorageLocation{}, []string{
			"spec.backupStorageLocationSpec",
			"status.veleroBackupStorageLocation.status", "status.veleroBackupStorageLocation.nacuuid", "status.veleroBackupStorageLocation.name",
			"status.veleroBackupStorageLocation.namespace", "status.phase", "status.conditions",
		}},
		{"NonAdminBackupStorageLocationRequest", oadpv1alpha1.NonAdminBackupStorageLocationRequest{}, []string{
			"spec.approvalDecision",
			"status.nonAdminBackupStorageLocation.requestedSpec", "status.nonAdminBackupStorageLocation.nacuuid",
			"status.nonAdminBackupStorageLocation.name", "status.nonAdminBackupStorageLocation.namespace", "status.phase",
		}},
		{"NonAdminDownloadRequest", oadpv1alpha1.NonAdminDownloadRequest{}, []string{
			"spec.target", "status.velero.status", "status.phase", "status.conditions",
		}},
		{"NonAdminSchedule", oadpv1alpha1.NonAdminSchedule{}, []string{
			"spec.schedule", "spec.paused", "spec.skipImmediately", "spec.template.backupSpec",
			"status.veleroSchedule.status", "status.veleroSchedule.nacuuid", "status.veleroSchedule.name", "status.veleroSchedule.namespace",
			"status.nextRun", "status.lastBackup.name", "status.lastBackup.veleroBackupName", "status.lastBackup.phase",
			"status.lastBackup.startTimestamp", "status.lastBackup.completionTimestamp", "status.lastBackup.expiration",
			"status.recentBackups.name", "status.phase", "status.conditions",
		}},
		{"DataProtectionApplication", oadpv1alpha1.DataProtectionApplication{}, []string{
			"spec.backupLocations", "spec.snapshotLocations", "spec.unsupportedOverrides", "spec.podAnnotations", "spec.podDnsPolicy",
			"spec.podDnsConfig", "spec.backupImages", "spec.configuration", "spec.features", "spec.imagePullPolicy", "spec.logFormat",
			"spec.nonAdmin.enable", "spec.nonAdmin.enforceBackupSpec", "spec.nonAdmin.enforceRestoreSpec",
			"spec.nonAdmin.enforceBSLSpec.provider", "spec.nonAdmin.enforceBSLSpec.config", "spec.nonAdmin.enforceBSLSpec.credential",
			"spec.nonAdmin.enforceBSLSpec.objectStorage", "spec.nonAdmin.enforceBSLSpec.accessMode", "spec.nonAdmin.enforceBSLSpec.backupSyncPeriod",
			"spec.nonAdmin.enforceBSLSpec.validationFrequency",
			"spec.nonAdmin.requireApprovalForBSL", "spec.nonAdmin.garbageCollectionPeriod", "spec.nonAdmin.backupSyncPeriod",
			"status.conditions",
		}},
	}
	for _, k := range kinds {
		ours := map[string]bool{}
		jsonPaths(reflect.TypeOf(k.typ), "", ours)
		for _, p := range k.paths {
			if !ours[p] {
				t.Errorf("%s: upstream's JSON field %s is missing", k.kind, p)
			}
		}
	}

	enums := []struct {
		what      string
		got, want []string
	}{
		{"NonAdminPhase", []string{string(oadpv1alpha1.NonAdminPhaseNew), string(oadpv1alpha1.NonAdminPhaseBackingOff),
			string(oadpv1alpha1.NonAdminPhaseCreated), string(oadpv1alpha1.NonAdminPhaseDeleting)}, []string{"New", "BackingOff", "Created", "Deleting"}},
		{"NonAdminCondition", []string{string(oadpv1alpha1.NonAdminConditionAccepted), string(oadpv1alpha1.NonAdminConditionQueued),
			string(oadpv1alpha1.NonAdminConditionDeleting)}, []string{"Accepted", "Queued", "Deleting"}},
		{"reasons", []string{oadpv1alpha1.ReasonBackupAccepted, oadpv1alpha1.ReasonInvalidBackupSpec, oadpv1alpha1.ReasonVeleroBackupNotFound,
			oadpv1alpha1.ReasonBackupScheduled, oadpv1alpha1.ReasonRestoreAccepted, oadpv1alpha1.ReasonInvalidRestoreSpec,
			oadpv1alpha1.ReasonVeleroRestoreNotFound, oadpv1alpha1.ReasonRestoreScheduled, oadpv1alpha1.ReasonDeletionPending},
			[]string{"BackupAccepted", "InvalidBackupSpec", "VeleroBackupNotFound", "BackupScheduled", "RestoreAccepted", "InvalidRestoreSpec",
				"VeleroRestoreNotFound", "RestoreScheduled", "DeletionPending"}},
		{"labels and annotations", []string{oadpv1alpha1.OadpLabel + "=" + oadpv1alpha1.OadpLabelValue, oadpv1alpha1.ManagedByLabel + "=" + oadpv1alpha1.ManagedByLabelValue,
			oadpv1alpha1.NabOriginNACUUIDLabel, oadpv1alpha1.NarOriginNACUUIDLabel, oadpv1alpha1.NabSyncLabel,
			oadpv1alpha1.NabOriginNameAnnotation, oadpv1alpha1.NabOriginNamespaceAnnotation, oadpv1alpha1.NarOriginNameAnnotation, oadpv1alpha1.NarOriginNamespaceAnnotation},
			[]string{"openshift.io/oadp=True", "app.kubernetes.io/managed-by=oadp-nac-controller",
				"openshift.io/oadp-nab-origin-nacuuid", "openshift.io/oadp-nar-origin-nacuuid", "openshift.io/oadp-nab-synced-from-nacuuid",
				"openshift.io/oadp-nab-origin-name", "openshift.io/oadp-nab-origin-namespace", "openshift.io/oadp-nar-origin-name", "openshift.io/oadp-nar-origin-namespace"}},
		{"finalizers", []string{oadpv1alpha1.NonAdminBackupFinalizer, oadpv1alpha1.NonAdminRestoreFinalizer, oadpv1alpha1.NonAdminBackupStorageLocationFinalizer},
			[]string{"nonadminbackup.oadp.openshift.io/finalizer", "nonadminrestore.oadp.openshift.io/finalizer", "nonadminbackupstoragelocation.oadp.openshift.io/finalizer"}},
		{"storage location conditions", []string{string(oadpv1alpha1.NonAdminBSLConditionSecretSynced), string(oadpv1alpha1.NonAdminBSLConditionBSLSynced),
			string(oadpv1alpha1.NonAdminBSLConditionApproved)}, []string{"SecretSynced", "BackupStorageLocationSynced", "ClusterAdminApproved"}},
		{"storage location reasons", []string{oadpv1alpha1.ReasonBslSpecValidation, oadpv1alpha1.ReasonBslSpecApprovalPending, oadpv1alpha1.ReasonBslSpecApproved,
			oadpv1alpha1.ReasonBslSpecRejected, oadpv1alpha1.ReasonSecretCreated, oadpv1alpha1.ReasonSecretUpdated, oadpv1alpha1.ReasonSecretSyncFailed,
			oadpv1alpha1.ReasonBackupStorageLocationCreated, oadpv1alpha1.ReasonBackupStorageLocationUpdated, oadpv1alpha1.ReasonBackupStorageLocationSyncError},
			[]string{"BslSpecValidation", "BslSpecApprovalPending", "BslSpecApproved", "BslSpecRejected", "SecretCreated", "SecretUpdated", "SecretSyncFailed",
				"BackupStorageLocationCreated", "BackupStorageLocationUpdated", "BackupStorageLocationSyncError"}},
		{"request decisions and phases", []string{string(oadpv1alpha1.NonAdminBSLRequestApproved), string(oadpv1alpha1.NonAdminBSLRequestRejected),
			string(oadpv1alpha1.NonAdminBSLRequestPending), string(oadpv1alpha1.NonAdminBSLRequestPhasePending), string(oadpv1alpha1.NonAdminBSLRequestPhaseApproved),
			string(oadpv1alpha1.NonAdminBSLRequestPhaseRejected)}, []string{"approve", "reject", "pending", "Pending", "Approved", "Rejected"}},
		{"download request conditions", []string{string(oadpv1alpha1.NonAdminDownloadConditionProcessed), string(oadpv1alpha1.NonAdminDownloadConditionBackupNotAvailable),
			string(oadpv1alpha1.NonAdminDownloadConditionRestoreNotAvailable), string(oadpv1alpha1.NonAdminDownloadConditionLocationNotUsed),
			oadpv1alpha1.ReasonDownloadSuccess, oadpv1alpha1.ReasonDownloadError, oadpv1alpha1.VeleroDownloadRequestPrefix},
			[]string{"Processed", "NonAdminBackupNotAvailable", "NonAdminRestoreNotAvailable", "NonAdminBackupStorageLocationNotUsed", "Success", "Error", "nadr-"}},
		{"schedule reasons", []string{oadpv1alpha1.ReasonScheduleAccepted, oadpv1alpha1.ReasonInvalidScheduleSpec}, []string{"ScheduleAccepted", "InvalidScheduleSpec"}},
		{"storage location link", []string{oadpv1alpha1.NabslOriginNACUUIDLabel, oadpv1alpha1.NabslOriginNameAnnotation, oadpv1alpha1.NabslOriginNamespaceAnnotation},
			[]string{"openshift.io/oadp-nabsl-origin-nacuuid", "openshift.io/oadp-nabsl-origin-name", "openshift.io/oadp-nabsl-origin-namespace"}},
	}
	for _, e := range enums {
		if strings.Join(e.got, " ") != strings.Join(e.want, " ") {
			t.Errorf("%s: %v, upstream's are %v", e.what, e.got, e.want)
		}
	}
}
