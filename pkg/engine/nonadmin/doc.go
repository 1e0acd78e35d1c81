// Package nonadmin is the tenants' engine: it makes each NonAdminBackup and
// NonAdminRestore of a tenant's namespace real as a Velero Backup or
// Restore in the admin namespace, mirrors what happens to that object back
// into the tenant's status, and carries out the delete flows. It follows
// the non-admin design document (../shared/seeds/nonadmin-backup-restore-status.md)
// and upstream's wire format (pkg/apis/oadp/v1alpha1's vocabulary), and
// closes upstream's holes:
//
//   - Ownership is decided from the server's own records: a tenant object's
//     status (which only the server writes) names its Velero object by its
//     NACUUID, and the Velero object's link label must carry that NACUUID.
//     Labels and annotations route events; they never decide.
//   - A spec refused (BackingOff) is checked again when what it depends on
//     changes, and recovers by itself (BackingOff → Created).
//   - A Velero object whose tenant object is gone is an orphan and is
//     deleted with its data; a tenant object deleted without saying what
//     becomes of its data waits (Deleting, DeletionPending) and is never
//     recreated by sync.
//   - A backup found in a tenant's storage location becomes a
//     NonAdminBackup in that location's namespace only (sync.go); what the
//     bucket's labels and annotations say never places it.
//   - Every garbageCollectionPeriod the orphans are looked for again
//     (gc.go), beside the events that find them as they come.
//   - Each sync is level-triggered, reads listers (O(1) per event), and
//     writes the status through the shared status writer.
//
// What the engines share is in mirror.go: the link of an admin-side object
// to its tenant object (label and annotations: made, read, routed and
// checked there only), and one generic mirror of a tenant kind and the
// admin-side kind made for it (read, made, orphans deleted); each engine's
// file holds only its kind's own rules.
//
// Queue positions are not written here: the registry fills
// status.queueInfo in when a NonAdminBackup is read, from the backup
// queue's index, like a Backup's status.queuePosition.
package nonadmin
