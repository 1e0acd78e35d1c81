package apiserver

import (
	"k8s.io/utils/clock"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	"github.com/backstop-io/backstop/pkg/engine/nonadmin"
)

// tenantEngines mirror tenants' oadp.openshift.io objects to the admin
// namespace's Velero objects and back (OADP's non-admin controller).
func tenantEngines() []engineDescriptor {
	return []engineDescriptor{
		{name: oadpv1alpha1.EngineNonAdminBackup, part: tenantPart, workers: 8, new: newNonAdminBackupEngine},
		{name: oadpv1alpha1.EngineNonAdminRestore, part: tenantPart, workers: 2, new: newNonAdminRestoreEngine},
		{name: oadpv1alpha1.EngineNonAdminDownload, part: tenantPart, workers: 1, new: newNonAdminDownloadEngine},
		{name: oadpv1alpha1.EngineNonAdminSchedule, part: tenantPart, workers: 1, new: newNonAdminScheduleEngine},
		{name: oadpv1alpha1.EngineNonAdminBSL, part: tenantPart, workers: 1, new: newNonAdminBSLEngine},
		{name: nonadmin.EngineNonAdminSync, part: tenantPart, workers: 1, new: newNonAdminSyncEngine},
		{name: oadpv1alpha1.EngineNonAdminPolicy, part: tenantPart, workers: 1, new: newNonAdminPolicyEngine},
		{name: nonadmin.EngineNonAdminGC, part: tenantPart, workers: 1, new: newNonAdminGCEngine},
	}
}

func newNonAdminBackupEngine(e *engineContext) (engine, error) {
	return nonadmin.NewBackupController(nonadmin.BackupConfig{Client: e.client, AdminNamespace: e.extra.Namespace,
		NonAdminBackups: e.tenants.NonAdminBackups(), NonAdminRestores: e.tenants.NonAdminRestores(),
		Backups: e.velero.Backups(), Requests: e.velero.DeleteBackupRequests(), DPAs: e.admin.DataProtectionApplications(),
		TenantLocations: e.tenants.NonAdminBackupStorageLocations(), VeleroLocations: e.velero.BackupStorageLocations(),
		Clock: clock.RealClock{}, Observers: e.observers, Crash: e.crash})
}

func newNonAdminRestoreEngine(e *engineContext) (engine, error) {
	return nonadmin.NewRestoreController(nonadmin.RestoreConfig{Client: e.client, AdminNamespace: e.extra.Namespace,
		NonAdminRestores: e.tenants.NonAdminRestores(), NonAdminBackups: e.tenants.NonAdminBackups(),
		Restores: e.velero.Restores(), Backups: e.velero.Backups(), DPAs: e.admin.DataProtectionApplications(), Observers: e.observers, Crash: e.crash})
}

func newNonAdminDownloadEngine(e *engineContext) (engine, error) {
	return nonadmin.NewDownloadController(nonadmin.DownloadConfig{Client: e.client, AdminNamespace: e.extra.Namespace,
		Requests: e.tenants.NonAdminDownloadRequests(), NonAdminBackups: e.tenants.NonAdminBackups(), NonAdminRestores: e.tenants.NonAdminRestores(),
		DownloadRequests: e.velero.DownloadRequests(), Backups: e.velero.Backups(), Restores: e.velero.Restores(),
		Clock: clock.RealClock{}, Observers: e.observers})
}

func newNonAdminScheduleEngine(e *engineContext) (engine, error) {
	return nonadmin.NewScheduleController(nonadmin.ScheduleConfig{Client: e.client, AdminNamespace: e.extra.Namespace,
		Schedules: e.tenants.NonAdminSchedules(), NonAdminBackups: e.tenants.NonAdminBackups(),
		VeleroSchedules: e.velero.Schedules(), Backups: e.velero.Backups(), DPAs: e.admin.DataProtectionApplications(),
		TenantLocations: e.tenants.NonAdminBackupStorageLocations(), VeleroLocations: e.velero.BackupStorageLocations(),
		Clock: clock.RealClock{}, Observers: e.observers, Crash: e.crash})
}

func newNonAdminBSLEngine(e *engineContext) (engine, error) {
	return nonadmin.NewBSLController(nonadmin.BSLConfig{Client: e.client, Secrets: e.extra.Secrets, AdminNamespace: e.extra.Namespace,
		Locations: e.tenants.NonAdminBackupStorageLocations(), Requests: e.admin.NonAdminBackupStorageLocationRequests(),
		VeleroLocations: e.velero.BackupStorageLocations(), DPAs: e.admin.DataProtectionApplications(), Observers: e.observers})
}

func newNonAdminSyncEngine(e *engineContext) (engine, error) {
	return nonadmin.NewSyncController(nonadmin.SyncConfig{Client: e.client, AdminNamespace: e.extra.Namespace,
		Backups: e.velero.Backups(), VeleroLocations: e.velero.BackupStorageLocations(),
		TenantLocations: e.tenants.NonAdminBackupStorageLocations(), NonAdminBackups: e.tenants.NonAdminBackups(),
		DPAs: e.admin.DataProtectionApplications(), Observers: e.observers})
}

func newNonAdminPolicyEngine(e *engineContext) (engine, error) {
	return nonadmin.NewPolicyController(e.client, e.extra.Namespace, e.admin.DataProtectionApplications())
}

// newNonAdminGCEngine runs the orphan loops of the tenant engines built
// beside it, whatever their order in the table.
func newNonAdminGCEngine(e *engineContext) (engine, error) {
	return nonadmin.NewGCController(nonadmin.GCConfig{AdminNamespace: e.extra.Namespace, DPAs: e.admin.DataProtectionApplications(),
		Orphans: e.orphans, Clock: clock.RealClock{}})
}
