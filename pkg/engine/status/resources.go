package status

import (
	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
)

// The writers of each resource an engine writes the status of.

// Backups writes the status of the backups of namespace.
func (w Writer) Backups(c versioned.Interface, namespace string) *ResourceWriter[velerov1.Backup, *velerov1.Backup] {
	return For[velerov1.Backup](w, velerov1.Resource("backups"), c.VeleroV1().Backups(namespace),
		func(b *velerov1.Backup) string { return string(b.Status.Phase) })
}

// Restores writes the status of the restores of namespace.
func (w Writer) Restores(c versioned.Interface, namespace string) *ResourceWriter[velerov1.Restore, *velerov1.Restore] {
	return For[velerov1.Restore](w, velerov1.Resource("restores"), c.VeleroV1().Restores(namespace),
		func(r *velerov1.Restore) string { return string(r.Status.Phase) })
}

// DeleteBackupRequests writes the status of the deletion requests of
// namespace.
func (w Writer) DeleteBackupRequests(c versioned.Interface, namespace string) *ResourceWriter[velerov1.DeleteBackupRequest, *velerov1.DeleteBackupRequest] {
	return For[velerov1.DeleteBackupRequest](w, velerov1.Resource("deletebackuprequests"), c.VeleroV1().DeleteBackupRequests(namespace),
		func(r *velerov1.DeleteBackupRequest) string { return string(r.Status.Phase) })
}

// Schedules writes the status of the schedules of namespace.
func (w Writer) Schedules(c versioned.Interface, namespace string) *ResourceWriter[velerov1.Schedule, *velerov1.Schedule] {
	return For[velerov1.Schedule](w, velerov1.Resource("schedules"), c.VeleroV1().Schedules(namespace),
		func(s *velerov1.Schedule) string { return string(s.Status.Phase) })
}

// BackupStorageLocations writes the status of the locations of namespace.
func (w Writer) BackupStorageLocations(c versioned.Interface, namespace string) *ResourceWriter[velerov1.BackupStorageLocation, *velerov1.BackupStorageLocation] {
	return For[velerov1.BackupStorageLocation](w, velerov1.Resource("backupstoragelocations"), c.VeleroV1().BackupStorageLocations(namespace),
		func(l *velerov1.BackupStorageLocation) string { return string(l.Status.Phase) })
}

// DownloadRequests writes the status of the download requests of
// namespace.
func (w Writer) DownloadRequests(c versioned.Interface, namespace string) *ResourceWriter[velerov1.DownloadRequest, *velerov1.DownloadRequest] {
	return For[velerov1.DownloadRequest](w, velerov1.Resource("downloadrequests"), c.VeleroV1().DownloadRequests(namespace),
		func(r *velerov1.DownloadRequest) string { return string(r.Status.Phase) })
}

// ServerStatusRequests writes the status of the server status requests of
// namespace.
func (w Writer) ServerStatusRequests(c versioned.Interface, namespace string) *ResourceWriter[velerov1.ServerStatusRequest, *velerov1.ServerStatusRequest] {
	return For[velerov1.ServerStatusRequest](w, velerov1.Resource("serverstatusrequests"), c.VeleroV1().ServerStatusRequests(namespace),
		func(r *velerov1.ServerStatusRequest) string { return string(r.Status.Phase) })
}

// VirtualMachineBackups writes the status of the VM backups of namespace;
// their phase is their state (kv.StateOf).
func (w Writer) VirtualMachineBackups(c versioned.Interface, namespace string) *ResourceWriter[kv.VirtualMachineBackup, *kv.VirtualMachineBackup] {
	return For[kv.VirtualMachineBackup](w, kv.Resource("virtualmachinebackups"), c.BackupV1alpha1().VirtualMachineBackups(namespace),
		func(b *kv.VirtualMachineBackup) string { return string(b.State()) })
}

// VirtualMachineBackupTrackers writes the status of the trackers of
// namespace; their phase is their changed block tracking state.
func (w Writer) VirtualMachineBackupTrackers(c versioned.Interface, namespace string) *ResourceWriter[kv.VirtualMachineBackupTracker, *kv.VirtualMachineBackupTracker] {
	return For[kv.VirtualMachineBackupTracker](w, kv.Resource("virtualmachinebackuptrackers"), c.BackupV1alpha1().VirtualMachineBackupTrackers(namespace),
		func(t *kv.VirtualMachineBackupTracker) string {
			if t.Status == nil || t.Status.ChangedBlockTracking == nil {
				return ""
			}
			return string(t.Status.ChangedBlockTracking.State)
		})
}

// NonAdminBackups writes the status of the NonAdminBackups of namespace.
func (w Writer) NonAdminBackups(c versioned.Interface, namespace string) *ResourceWriter[oadpv1alpha1.NonAdminBackup, *oadpv1alpha1.NonAdminBackup] {
	return For[oadpv1alpha1.NonAdminBackup](w, oadpv1alpha1.Resource("nonadminbackups"), c.OadpV1alpha1().NonAdminBackups(namespace),
		func(b *oadpv1alpha1.NonAdminBackup) string { return string(b.Status.Phase) })
}

// NonAdminRestores writes the status of the NonAdminRestores of namespace.
func (w Writer) NonAdminRestores(c versioned.Interface, namespace string) *ResourceWriter[oadpv1alpha1.NonAdminRestore, *oadpv1alpha1.NonAdminRestore] {
	return For[oadpv1alpha1.NonAdminRestore](w, oadpv1alpha1.Resource("nonadminrestores"), c.OadpV1alpha1().NonAdminRestores(namespace),
		func(r *oadpv1alpha1.NonAdminRestore) string { return string(r.Status.Phase) })
}

// DataProtectionApplications writes the status of the DPAs of namespace.
func (w Writer) DataProtectionApplications(c versioned.Interface, namespace string) *ResourceWriter[oadpv1alpha1.DataProtectionApplication, *oadpv1alpha1.DataProtectionApplication] {
	return For[oadpv1alpha1.DataProtectionApplication](w, oadpv1alpha1.Resource("dataprotectionapplications"), c.OadpV1alpha1().DataProtectionApplications(namespace), nil)
}

// NonAdminBackupStorageLocations writes the status of the tenant storage
// locations of namespace.
func (w Writer) NonAdminBackupStorageLocations(c versioned.Interface, namespace string) *ResourceWriter[oadpv1alpha1.NonAdminBackupStorageLocation, *oadpv1alpha1.NonAdminBackupStorageLocation] {
	return For[oadpv1alpha1.NonAdminBackupStorageLocation](w, oadpv1alpha1.Resource("nonadminbackupstoragelocations"), c.OadpV1alpha1().NonAdminBackupStorageLocations(namespace),
		func(l *oadpv1alpha1.NonAdminBackupStorageLocation) string { return string(l.Status.Phase) })
}

// NonAdminBackupStorageLocationRequests writes the status of the requests
// of namespace (the admin namespace).
func (w Writer) NonAdminBackupStorageLocationRequests(c versioned.Interface, namespace string) *ResourceWriter[oadpv1alpha1.NonAdminBackupStorageLocationRequest, *oadpv1alpha1.NonAdminBackupStorageLocationRequest] {
	return For[oadpv1alpha1.NonAdminBackupStorageLocationRequest](w, oadpv1alpha1.Resource("nonadminbackupstoragelocationrequests"), c.OadpV1alpha1().NonAdminBackupStorageLocationRequests(namespace),
		func(r *oadpv1alpha1.NonAdminBackupStorageLocationRequest) string { return string(r.Status.Phase) })
}

// NonAdminDownloadRequests writes the status of the tenants' download
// requests of namespace.
func (w Writer) NonAdminDownloadRequests(c versioned.Interface, namespace string) *ResourceWriter[oadpv1alpha1.NonAdminDownloadRequest, *oadpv1alpha1.NonAdminDownloadRequest] {
	return For[oadpv1alpha1.NonAdminDownloadRequest](w, oadpv1alpha1.Resource("nonadmindownloadrequests"), c.OadpV1alpha1().NonAdminDownloadRequests(namespace),
		func(r *oadpv1alpha1.NonAdminDownloadRequest) string { return string(r.Status.Phase) })
}

// NonAdminSchedules writes the status of the tenants' schedules of
// namespace.
func (w Writer) NonAdminSchedules(c versioned.Interface, namespace string) *ResourceWriter[oadpv1alpha1.NonAdminSchedule, *oadpv1alpha1.NonAdminSchedule] {
	return For[oadpv1alpha1.NonAdminSchedule](w, oadpv1alpha1.Resource("nonadminschedules"), c.OadpV1alpha1().NonAdminSchedules(namespace),
		func(s *oadpv1alpha1.NonAdminSchedule) string { return string(s.Status.Phase) })
}

// DataUploads writes the status of the DataUploads of namespace.
func (w Writer) DataUploads(c versioned.Interface, namespace string) *ResourceWriter[velerov2alpha1.DataUpload, *velerov2alpha1.DataUpload] {
	return For[velerov2alpha1.DataUpload](w, velerov2alpha1.Resource("datauploads"), c.VeleroV2alpha1().DataUploads(namespace),
		func(d *velerov2alpha1.DataUpload) string { return string(d.Status.Phase) })
}

// BackupRepositories writes the status of the repositories of namespace.
func (w Writer) BackupRepositories(c versioned.Interface, namespace string) *ResourceWriter[velerov1.BackupRepository, *velerov1.BackupRepository] {
	return For[velerov1.BackupRepository](w, velerov1.Resource("backuprepositories"), c.VeleroV1().BackupRepositories(namespace),
		func(r *velerov1.BackupRepository) string { return string(r.Status.Phase) })
}

// DataDownloads writes the status of the DataDownloads of namespace.
func (w Writer) DataDownloads(c versioned.Interface, namespace string) *ResourceWriter[velerov2alpha1.DataDownload, *velerov2alpha1.DataDownload] {
	return For[velerov2alpha1.DataDownload](w, velerov2alpha1.Resource("datadownloads"), c.VeleroV2alpha1().DataDownloads(namespace),
		func(d *velerov2alpha1.DataDownload) string { return string(d.Status.Phase) })
}
