package backup

// The files a backup leaves in its storage location beside the tarball.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// putOperations uploads the item operations file.
func putOperations(ctx context.Context, store objectstore.Store, layout objectstore.Layout, name string, ops *operations) error {
	data, err := ops.json()
	if err != nil {
		return err
	}
	return putGzip(ctx, store, layout, velerov1.DownloadTargetKindBackupItemOperations, name, data)
}

func uploadLog(ctx context.Context, store objectstore.Store, layout objectstore.Layout, name string, log *items.Log) error {
	r, err := log.Finish()
	if err != nil {
		return err
	}
	key, _ := layout.Key(velerov1.DownloadTargetKindBackupLog, name)
	if err := store.Put(ctx, key, r); err != nil {
		return fmt.Errorf("uploading the backup log: %w", err)
	}
	return nil
}

func putGzip(ctx context.Context, store objectstore.Store, layout objectstore.Layout, kind velerov1.DownloadTargetKind, name string, data []byte) error {
	key, err := layout.Key(kind, name)
	if err != nil {
		return err
	}
	return objectstore.PutGzip(ctx, store, key, data)
}

// putMetadata writes velero-backup.json, the backup as Velero stores it.
func putMetadata(ctx context.Context, store objectstore.Store, layout objectstore.Layout, b *velerov1.Backup) error {
	b = b.DeepCopy()
	b.APIVersion, b.Kind = velerov1.SchemeGroupVersion.String(), "Backup"
	b.ManagedFields = nil
	data, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("encoding the backup metadata: %w", err)
	}
	if err := store.Put(ctx, layout.BackupMetadataKey(b.Name), bytes.NewReader(data)); err != nil {
		return fmt.Errorf("uploading the backup metadata: %w", err)
	}
	return nil
}

// deleteData removes a backup's objects, its log too unless keepLog.
func deleteData(ctx context.Context, store objectstore.Store, layout objectstore.Layout, name string, keepLog bool) error {
	var keep []string
	if keepLog {
		logKey, _ := layout.Key(velerov1.DownloadTargetKindBackupLog, name)
		keep = append(keep, logKey)
	}
	return objectstore.DeletePrefix(ctx, store, layout.BackupDir(name), keep...)
}
