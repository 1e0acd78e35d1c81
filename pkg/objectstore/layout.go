package objectstore

import (
	"context"
	"fmt"
	"path"
	"strings"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

// Layout names the objects of backups and restores under a location's
// prefix, exactly as Velero's persistence.ObjectStoreLayout does.
type Layout struct {
	prefix string
}

// NewLayout returns the layout under prefix ("" for the bucket root).
func NewLayout(prefix string) Layout {
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	return Layout{prefix: prefix}
}

// Root is the prefix of every object of the location ("" for none).
func (l Layout) Root() string { return l.prefix }

// BackupDir is the directory of a backup's objects ("backups/<name>/").
func (l Layout) BackupDir(backup string) string { return l.prefix + "backups/" + backup + "/" }

// RestoreDir is the directory of a restore's objects ("restores/<name>/").
func (l Layout) RestoreDir(restore string) string { return l.prefix + "restores/" + restore + "/" }

// WalkBackupNames calls fn with the name of each backup of the location
// (a velero-backup.json under backups/), as the store lists them, holding
// none of them. An error from fn ends the walk and is returned.
func (l Layout) WalkBackupNames(ctx context.Context, store Store, fn func(name string) error) error {
	return store.Walk(ctx, l.prefix+"backups/", func(key string) error {
		rest := strings.TrimPrefix(key, l.prefix+"backups/")
		name, file, ok := strings.Cut(rest, "/")
		if ok && file == "velero-backup.json" && name != "" {
			return fn(name)
		}
		return nil
	})
}

// BackupMetadataKey is the backup object as JSON (velero-backup.json).
func (l Layout) BackupMetadataKey(backup string) string {
	return path.Join(l.BackupDir(backup), "velero-backup.json")
}

// backupFile and restoreFile name the per-kind files.
var (
	backupFiles = map[velerov1.DownloadTargetKind]string{
		velerov1.DownloadTargetKindBackupContents:                  "%s.tar.gz",
		velerov1.DownloadTargetKindBackupLog:                       "%s-logs.gz",
		velerov1.DownloadTargetKindBackupResults:                   "%s-results.gz",
		velerov1.DownloadTargetKindBackupResourceList:              "%s-resource-list.json.gz",
		velerov1.DownloadTargetKindBackupItemOperations:            "%s-itemoperations.json.gz",
		velerov1.DownloadTargetKindBackupVolumeSnapshots:           "%s-volumesnapshots.json.gz",
		velerov1.DownloadTargetKindCSIBackupVolumeSnapshots:        "%s-csi-volumesnapshots.json.gz",
		velerov1.DownloadTargetKindCSIBackupVolumeSnapshotContents: "%s-csi-volumesnapshotcontents.json.gz",
		velerov1.DownloadTargetKindBackupVolumeInfos:               "%s-volumeinfo.json.gz",
	}
	restoreFiles = map[velerov1.DownloadTargetKind]string{
		velerov1.DownloadTargetKindRestoreLog:            "restore-%s-logs.gz",
		velerov1.DownloadTargetKindRestoreResults:        "restore-%s-results.gz",
		velerov1.DownloadTargetKindRestoreResourceList:   "restore-%s-resource-list.json.gz",
		velerov1.DownloadTargetKindRestoreItemOperations: "restore-%s-itemoperations.json.gz",
		velerov1.DownloadTargetKindRestoreVolumeInfo:     "%s-volumeinfo.json.gz",
	}
)

// IsRestoreTarget reports whether kind names a restore's file.
func IsRestoreTarget(kind velerov1.DownloadTargetKind) bool {
	_, ok := restoreFiles[kind]
	return ok
}

// Key is the object a DownloadRequest target names.
func (l Layout) Key(kind velerov1.DownloadTargetKind, name string) (string, error) {
	if f, ok := backupFiles[kind]; ok {
		return path.Join(l.BackupDir(name), fmt.Sprintf(f, name)), nil
	}
	if f, ok := restoreFiles[kind]; ok {
		return path.Join(l.RestoreDir(name), fmt.Sprintf(f, name)), nil
	}
	return "", fmt.Errorf("unknown download target kind %q", kind)
}
