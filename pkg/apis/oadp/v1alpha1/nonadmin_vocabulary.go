package v1alpha1

import (
	"strings"

	"github.com/google/uuid"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

// The vocabulary the non-admin kinds share with the upstream OADP
// non-admin controller (its internal/common/constant package): the labels,
// annotations and finalizers of the objects it links, the condition
// reasons and messages tenants and their tools read. Defined once here;
// registry, engines and tests use these names.

// Labels every admin-side object made for a tenant carries.
const (
	// OadpLabel marks an object as made by OADP, with OadpLabelValue.
	OadpLabel      = "openshift.io/oadp"
	OadpLabelValue = "True"
	// ManagedByLabel names the maker, ManagedByLabelValue.
	ManagedByLabel      = "app.kubernetes.io/managed-by"
	ManagedByLabelValue = "oadp-nac-controller"
)

// Link labels: the NACUUID of the tenant object an admin-side object was
// made for. They route events; ownership is decided from the tenant
// object's status, which only the server writes.
const (
	NabOriginNACUUIDLabel   = "openshift.io/oadp-nab-origin-nacuuid"
	NarOriginNACUUIDLabel   = "openshift.io/oadp-nar-origin-nacuuid"
	NabslOriginNACUUIDLabel = "openshift.io/oadp-nabsl-origin-nacuuid"
	NadrOriginNACUUIDLabel  = "openshift.io/oadp-nadr-origin-nacuuid"
	// NabSyncLabel marks a NonAdminBackup made by sync from a backup found
	// in a storage location.
	NabSyncLabel = "openshift.io/oadp-nab-synced-from-nacuuid"
)

// MadeFor reports whether an admin-side object (its labels and
// annotations) was made for the tenant object of namespace whose status,
// written by the server alone, records nacuuid: its link label carries
// that NACUUID and its origin annotation that namespace.
func MadeFor(labels, annotations map[string]string, linkLabel, namespaceAnnotation, nacuuid, namespace string) bool {
	return nacuuid != "" && labels[linkLabel] == nacuuid && annotations[namespaceAnnotation] == namespace
}

// Origin annotations: the tenant object's name and namespace.
const (
	NabOriginNameAnnotation        = "openshift.io/oadp-nab-origin-name"
	NabOriginNamespaceAnnotation   = velerov1.TenantOriginNamespaceAnnotation
	NarOriginNameAnnotation        = "openshift.io/oadp-nar-origin-name"
	NarOriginNamespaceAnnotation   = "openshift.io/oadp-nar-origin-namespace"
	NabslOriginNameAnnotation      = "openshift.io/oadp-nabsl-origin-name"
	NabslOriginNamespaceAnnotation = velerov1.TenantLocationNamespaceAnnotation
	NadrOriginNameAnnotation       = "openshift.io/oadp-nadr-origin-name"
	NadrOriginNamespaceAnnotation  = "openshift.io/oadp-nadr-origin-namespace"
)

// Finalizers: the engine removes them once the admin-side objects are gone.
const (
	NonAdminBackupFinalizer                = "nonadminbackup.oadp.openshift.io/finalizer"
	NonAdminRestoreFinalizer               = "nonadminrestore.oadp.openshift.io/finalizer"
	NonAdminBackupStorageLocationFinalizer = "nonadminbackupstoragelocation.oadp.openshift.io/finalizer"
)

// Condition reasons, as upstream spells them.
const (
	ReasonBackupAccepted        = "BackupAccepted"
	ReasonInvalidBackupSpec     = "InvalidBackupSpec"
	ReasonVeleroBackupNotFound  = "VeleroBackupNotFound"
	ReasonBackupScheduled       = "BackupScheduled"
	ReasonRestoreAccepted       = "RestoreAccepted"
	ReasonInvalidRestoreSpec    = "InvalidRestoreSpec"
	ReasonVeleroRestoreNotFound = "VeleroRestoreNotFound"
	ReasonRestoreScheduled      = "RestoreScheduled"
	ReasonDeletionPending       = "DeletionPending"
)

// Condition messages, as upstream writes them.
const (
	MessageBackupAccepted        = "backup accepted"
	MessageBackupScheduled       = "Created Velero Backup object"
	MessageRestoreAccepted       = "restore accepted"
	MessageRestoreScheduled      = "Created Velero Restore object"
	MessageBackupDeletionPending = "backup accepted for deletion"
	// MessageBackupDeleteNeedsSpec is the seed's message for a plain
	// delete: the NonAdminBackup waits until the owner says what becomes
	// of the backup's data.
	MessageBackupDeleteNeedsSpec  = "backup deletion requires setting spec.deleteBackup or spec.forceDeleteBackup to true or finalizer removal"
	MessageRestoreDeletionPending = "restore accepted for deletion"
	MessageVeleroBackupNotFound   = "NonAdminBackup is finalized and its associated Velero Backup has been removed"
	MessageVeleroRestoreNotFound  = "NonAdminRestore is finalized and its associated Velero Restore has been removed"
)

// The length limits of a NACUUID: a DNS-1123 label, ending in a UUID.
const (
	maxNACUUIDLength = 63
	nameDelimiter    = "-"
)

// NewNACUUID is the name of the admin-side object made for a tenant object
// name in namespace: <namespace>-<name>-<uuid>, within 63 characters.
// When that is too long the name is cut first, then dropped and the
// namespace cut, as upstream's GenerateNacObjectUUID does.
func NewNACUUID(namespace, name string) string {
	return nacUUID(namespace, name, uuid.NewString())
}

func nacUUID(namespace, name, id string) string {
	join := func(ns, n string) string {
		parts := make([]string, 0, 3)
		for _, p := range []string{ns, n, id} {
			if p != "" {
				parts = append(parts, p)
			}
		}
		return strings.Join(parts, nameDelimiter)
	}
	out := join(namespace, name)
	if len(out) <= maxNACUUIDLength {
		return out
	}
	room := maxNACUUIDLength - len(id)
	if len(namespace) > room-2*len(nameDelimiter) {
		// Not even one character of the name fits: the namespace, cut.
		return join(namespace[:room-2*len(nameDelimiter)], "")
	}
	name = name[:room-len(namespace)-2*len(nameDelimiter)]
	return join(namespace, name)
}

// DataProtectionApplication condition types and reasons.
const (
	// ConditionReconciled: True when the DPA's nonAdmin policy is the one
	// in effect, False (ReasonNotInEffect) when an older DPA's is.
	ConditionReconciled = "Reconciled"
	// ConditionNotActedOn lists the spec fields set that Backstop keeps
	// but does not act on (True when there are any).
	ConditionNotActedOn = "NotActedOn"
	ReasonReconciled    = "Reconciled"
	ReasonNotInEffect   = "NotInEffect"
	ReasonNoPolicy      = "NoNonAdminPolicy"
	ReasonKeptOnly      = "KeptNotActedOn"
	ReasonAllActedOn    = "AllActedOn"
)

// NonAdminBackupStorageLocation condition types besides Accepted, as
// upstream names them.
const (
	NonAdminBSLConditionSecretSynced NonAdminCondition = "SecretSynced"
	NonAdminBSLConditionBSLSynced    NonAdminCondition = "BackupStorageLocationSynced"
	NonAdminBSLConditionApproved     NonAdminCondition = "ClusterAdminApproved"
)

// NonAdminBackupStorageLocation condition reasons and messages, as upstream
// spells them.
const (
	ReasonBslSpecValidation              = "BslSpecValidation"
	ReasonBslSpecApprovalPending         = "BslSpecApprovalPending"
	ReasonBslSpecApproved                = "BslSpecApproved"
	ReasonBslSpecRejected                = "BslSpecRejected"
	ReasonBslSpecInvalid                 = "BslSpecInvalid"
	ReasonSecretCreated                  = "SecretCreated"
	ReasonSecretUpdated                  = "SecretUpdated"
	ReasonSecretSyncFailed               = "SecretSyncFailed"
	ReasonBackupStorageLocationCreated   = "BackupStorageLocationCreated"
	ReasonBackupStorageLocationUpdated   = "BackupStorageLocationUpdated"
	ReasonBackupStorageLocationSyncError = "BackupStorageLocationSyncError"

	MessageBslSpecValid       = "NonAdminBackupStorageLocation spec validation successful"
	MessageBslApprovalPending = "NonAdminBackupStorageLocationRequest approval pending"
	MessageBslApproved        = "NonAdminBackupStorageLocationRequest approval decision set to Approve"
	MessageBslRejected        = "NonAdminBackupStorageLocationRequest approval decision set to Reject"
	MessageBslDecisionInvalid = "NonAdminBackupStorageLocationRequest approval decision is invalid"
	MessageSecretSynced       = "Secret successfully created in the OADP namespace"
	MessageBSLSynced          = "BackupStorageLocation successfully created in the OADP namespace"
	MessageBSLDeletionPending = "backup storage location accepted for deletion"
)

// NonAdminDownloadRequest condition types and reasons, as upstream names
// them: a request has exactly one condition at a time.
const (
	NonAdminDownloadConditionProcessed           NonAdminCondition = "Processed"
	NonAdminDownloadConditionBackupNotAvailable  NonAdminCondition = "NonAdminBackupNotAvailable"
	NonAdminDownloadConditionRestoreNotAvailable NonAdminCondition = "NonAdminRestoreNotAvailable"
	NonAdminDownloadConditionLocationNotUsed     NonAdminCondition = "NonAdminBackupStorageLocationNotUsed"
	ReasonDownloadSuccess                                          = "Success"
	ReasonDownloadError                                            = "Error"
	VeleroDownloadRequestPrefix                                    = "nadr-"
)

// NonAdminSchedule vocabulary. Upstream's reasons; the link label,
// annotations and finalizer follow the other kinds' pattern.
const (
	NasOriginNACUUIDLabel          = "openshift.io/oadp-nas-origin-nacuuid"
	NasOriginNameAnnotation        = "openshift.io/oadp-nas-origin-name"
	NasOriginNamespaceAnnotation   = "openshift.io/oadp-nas-origin-namespace"
	NonAdminScheduleFinalizer      = "nonadminschedule.oadp.openshift.io/finalizer"
	ReasonScheduleAccepted         = "ScheduleAccepted"
	ReasonInvalidScheduleSpec      = "InvalidScheduleSpec"
	MessageScheduleAccepted        = "schedule accepted"
	MessageScheduleCreated         = "Created Velero Schedule object"
	MessageScheduleDeletionPending = "schedule accepted for deletion"
	// RecentScheduledBackups is how many generated backups a
	// NonAdminSchedule's status lists.
	RecentScheduledBackups = 5
)

// CreatedByAnnotation, on a NonAdminRestore, NonAdminBackup or
// NonAdminSchedule, is who created it (restoreas.User JSON), recorded by
// the server at admission over whatever the request said, and kept on
// every update: a NonAdminRestore's Velero Restore restores with that
// user's rights (restoreas.Annotation); the Backups (and Schedules) made
// for the others carry it, and an admin's restore of such a Backup runs
// with that user's rights too (FullRightsAnnotation says otherwise).
const CreatedByAnnotation = "backstop.io/created-by"

// FullRightsAnnotation, set to "true" on a Restore, lets an admin's restore
// of a backup whose contents a tenant controls (made for a NonAdminBackup
// or NonAdminSchedule, or on a tenant's storage location) run with the
// server's rights, everywhere its spec says, instead of as the tenant
// would: a warning in the restore's log says so.
const FullRightsAnnotation = "backstop.io/restore-with-full-rights"

// SyncedNameAnnotation is the name a backup's NonAdminBackup had where the
// backup was made, read from a tenant's storage location by the backup
// sync: the name sync gives the backup's new NonAdminBackup when it is
// free. It names nothing else (the origin annotations of a backup found in
// a tenant's bucket are not believed).
const SyncedNameAnnotation = "backstop.io/synced-nonadminbackup-name"

// TenantSyncable reports whether a backup found in a tenant's storage
// location may become a Backup of the admin namespace: its name is one
// the server gives tenants' backups, a NACUUID (a NonAdminBackup's
// backup) or a NACUUID and a timestamp (a run of a NonAdminSchedule).
// Those end in a random UUID, so a tenant's bucket cannot take the name
// of a backup the admin or another tenant will make.
func TenantSyncable(name string) bool {
	if len(name) > maxNACUUIDLength+len("-20060102150405") {
		return false
	}
	if i := strings.LastIndex(name, nameDelimiter); i >= 0 && len(name)-i-1 == len("20060102150405") && allDigits(name[i+1:]) {
		name = name[:i] // a scheduled run: <nacuuid>-<timestamp>
	}
	const uuidLength = 36
	if len(name) < uuidLength+2 || len(name) > maxNACUUIDLength || name[len(name)-uuidLength-1:len(name)-uuidLength] != nameDelimiter {
		return false
	}
	id, err := uuid.Parse(name[len(name)-uuidLength:])
	return err == nil && id.String() == name[len(name)-uuidLength:]
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// OriginNamespace is the tenant namespace a Backup was made for, by its
// annotations: a NonAdminBackup's or a NonAdminSchedule's; "" for none.
func OriginNamespace(annotations map[string]string) string {
	for _, key := range []string{NabOriginNamespaceAnnotation, NasOriginNamespaceAnnotation} {
		if ns := annotations[key]; ns != "" {
			return ns
		}
	}
	return ""
}
