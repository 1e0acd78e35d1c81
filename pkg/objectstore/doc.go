// Package objectstore owns the storage locations' object stores: the
// provider behind a BackupStorageLocation (filesystem today, S3 next), and
// the key layout of backups and restores inside it, which is Velero's, so
// tools that read a Velero bucket read Backstop's.
package objectstore
