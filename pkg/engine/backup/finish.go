package backup

// The end of the async operations of OperationFinishers (Velero's
// finalize step for its CSI snapshots): what the ended operations leave
// (a VolumeSnapshot and its content, ready) is added to the tarball and the
// resource list, their volumes to the volume info file, and only once the
// backup records it all are the cluster objects let go.
//
// A crash before the backup's Finalizing status leaves the backup to be
// failed at the next start, its recorded operations discarded (the
// cluster objects are still there); after it, the next start releases
// them again (idempotent) and completes the backup.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/archive"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/objectstore"
	"github.com/backstop-io/backstop/pkg/volumeinfo"
)

// maxRecordSize bounds a record file of a backup read back (the item
// operations, the resource list), uncompressed.
const maxRecordSize = 256 << 20

// finished is what the ended operations left to the backup.
type finished struct {
	items   []FinalItem
	volumes []volumeinfo.BackupVolumeInfo
}

// finishOperations asks each ended operation of an OperationFinisher what
// it leaves, discards what the failed ones made, and writes the items into
// the tarball and the resource list.
func (r *backupRun) finishOperations(ctx context.Context) (*finished, error) {
	out := &finished{}
	added := sets.New[string]()
	for _, op := range r.ops.list {
		f, ok := r.ops.byName[op.Spec.BackupItemAction].(OperationFinisher)
		if !ok || !op.done() {
			continue
		}
		got, err := f.FinalItems(ctx, r.b, op)
		if err != nil && op.Status.Phase == OperationPhaseCompleted {
			r.ops.failOp(op, fmt.Sprintf("reading what it leaves to the backup: %v", err))
		}
		if got.Volume != nil {
			out.volumes = append(out.volumes, *got.Volume)
		}
		if op.Status.Phase != OperationPhaseCompleted {
			if err := f.Discard(ctx, r.b, op); err != nil {
				r.log.Warning(op.Spec.ResourceIdentifier.Namespace, "", fmt.Sprintf("%s: removing what failed operation %s made: %v",
					f.Name(), op.Spec.OperationID, err))
			}
			continue
		}
		for _, it := range got.Items {
			// Once each (two snapshots of one class give the class twice).
			key := itemKey(it.Resource.GroupResource(), it.Object.GetNamespace(), it.Object.GetName())
			if !added.Has(key) {
				added.Insert(key)
				out.items = append(out.items, it)
			}
		}
	}
	if len(out.items) == 0 {
		return out, nil
	}
	if err := rewriteTarball(ctx, r.store, r.layout, r.b.Name, out.items, r.c.cfg.Clock.Now()); err != nil {
		return nil, err
	}
	if err := addToResourceList(ctx, r.store, r.layout, r.b.Name, out.items); err != nil {
		return nil, err
	}
	return out, nil
}

// putFinished writes what the operations' end changed before the backup
// is Finalizing: the item operations file with their final phases (a
// restart in Finalizing releases the completed ones), the volume info
// file, and the CSI snapshot records.
func (r *backupRun) putFinished(ctx context.Context, fin *finished) error {
	if err := putOperations(ctx, r.store, r.layout, r.b.Name, r.ops); err != nil {
		return err
	}
	if err := putVolumeInfo(ctx, r.store, r.layout, r.b.Name, fin.volumes); err != nil {
		return err
	}
	return putCSIRecords(ctx, r.store, r.layout, r.b.Name, fin.items)
}

// csiSnapshotCounts counts the CSI snapshots of the volumes, and those
// that succeeded.
func csiSnapshotCounts(volumes []volumeinfo.BackupVolumeInfo) (attempted, completed int) {
	for _, v := range volumes {
		if v.BackupMethod != volumeinfo.MethodCSISnapshot || v.SnapshotDataMoved {
			continue
		}
		attempted++
		if v.Result == volumeinfo.ResultSucceeded {
			completed++
		}
	}
	return attempted, completed
}

// releaseOperations lets the OperationFinishers release the cluster
// objects of the operations that completed (the backup holds them now).
func releaseOperations(ctx context.Context, ops *operations, b *velerov1.Backup, log *items.Log) {
	for _, op := range ops.list {
		f, ok := ops.byName[op.Spec.BackupItemAction].(OperationFinisher)
		if !ok || op.Status.Phase != OperationPhaseCompleted {
			continue
		}
		if err := f.Release(ctx, b, op); err != nil {
			log.Warning(op.Spec.ResourceIdentifier.Namespace, "", fmt.Sprintf("%s: releasing what operation %s made: %v",
				f.Name(), op.Spec.OperationID, err))
		}
	}
}

// itemKey names an item in a tarball, whatever its version directory.
func itemKey(groupResource, namespace, name string) string {
	return groupResource + "/" + namespace + "/" + name
}

// rewriteTarball writes the backup's tarball again with items added, each
// replacing an item of its resource, namespace and name (all its copies).
// The old tarball is read while the new one is written in its place (the
// stores replace an object whole when its upload ends).
func rewriteTarball(ctx context.Context, store objectstore.Store, layout objectstore.Layout, name string, add []FinalItem, now time.Time) error {
	key, _ := layout.Key(velerov1.DownloadTargetKindBackupContents, name)
	old, err := store.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("reading the tarball to add the operations' items: %w", err)
	}
	defer old.Close()
	reader, err := archive.NewReader(old)
	if err != nil {
		return err
	}
	defer reader.Close()
	replaced := sets.New[string]()
	for _, it := range add {
		replaced.Insert(itemKey(it.Resource.GroupResource(), it.Object.GetNamespace(), it.Object.GetName()))
	}

	return putStreamed(ctx, store, key, "the tarball with the operations' items", func(w io.Writer) error {
		if err := copyWith(reader, w, replaced, add, now); err != nil {
			return fmt.Errorf("writing the tarball with the operations' items: %w", err)
		}
		return nil
	})
}

// putStreamed uploads to key what write writes, as it writes it (the
// store reads a pipe: nothing is held whole). An error of write aborts
// the upload and is returned as it is; a failed upload says what failed.
func putStreamed(ctx context.Context, store objectstore.Store, key, what string, write func(io.Writer) error) error {
	pr, pw := io.Pipe()
	uploaded := make(chan error, 1)
	go func() {
		err := store.Put(ctx, key, pr)
		_ = pr.CloseWithError(fmt.Errorf("upload ended: %v", err))
		uploaded <- err
	}()
	if err := write(pw); err != nil {
		_ = pw.CloseWithError(err)
		<-uploaded
		return err
	}
	_ = pw.Close()
	if err := <-uploaded; err != nil {
		return fmt.Errorf("uploading %s: %w", what, err)
	}
	return nil
}

func copyWith(reader *archive.Reader, w io.Writer, replaced sets.Set[string], add []FinalItem, now time.Time) error {
	writer, err := archive.NewWriter(w, now)
	if err != nil {
		return err
	}
	for {
		it, err := reader.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if replaced.Has(itemKey(it.GroupResource, it.Namespace, it.Name)) {
			continue
		}
		if err := writer.Copy(it); err != nil {
			return err
		}
	}
	for _, it := range add {
		data, err := json.Marshal(it.Object.Object)
		if err != nil {
			return fmt.Errorf("encoding %s %s: %w", it.Resource.GroupResource(), it.Object.GetName(), err)
		}
		if err := writer.AddItem(it.Resource.GroupResource(), it.Resource.GVR.Version, it.Object.GetNamespace(), it.Object.GetName(), data); err != nil {
			return err
		}
	}
	return writer.Close()
}

// addToResourceList adds the items to the backup's resource list.
func addToResourceList(ctx context.Context, store objectstore.Store, layout objectstore.Layout, name string, add []FinalItem) error {
	key, _ := layout.Key(velerov1.DownloadTargetKindBackupResourceList, name)
	stored, err := objectstore.GetGzip(ctx, store, key, maxRecordSize)
	if err != nil {
		return fmt.Errorf("reading the resource list: %w", err)
	}
	list := map[string][]string{}
	if err := json.Unmarshal(stored, &list); err != nil {
		return fmt.Errorf("decoding the resource list: %w", err)
	}
	for _, it := range add {
		k := it.Resource.GVR.GroupVersion().String() + "/" + it.Resource.Kind
		entry := it.Object.GetName()
		if ns := it.Object.GetNamespace(); ns != "" {
			entry = ns + "/" + entry
		}
		if !sets.New(list[k]...).Has(entry) {
			list[k] = append(list[k], entry)
		}
	}
	data, err := json.Marshal(list)
	if err != nil {
		return err
	}
	return objectstore.PutGzip(ctx, store, key, data)
}

// putVolumeInfo writes the volume info file.
func putVolumeInfo(ctx context.Context, store objectstore.Store, layout objectstore.Layout, name string, volumes []volumeinfo.BackupVolumeInfo) error {
	if volumes == nil {
		volumes = []volumeinfo.BackupVolumeInfo{}
	}
	data, err := json.Marshal(volumes)
	if err != nil {
		return err
	}
	return putGzip(ctx, store, layout, velerov1.DownloadTargetKindBackupVolumeInfos, name, data)
}

// putCSIRecords writes the VolumeSnapshots and VolumeSnapshotContents the
// backup holds as the files Velero before v1.14 wrote
// (<backup>-csi-volumesnapshots.json.gz,
// <backup>-csi-volumesnapshotcontents.json.gz), which `velero backup
// describe` reads when a backup has no volume info file.
func putCSIRecords(ctx context.Context, store objectstore.Store, layout objectstore.Layout, name string, held []FinalItem) error {
	snapshots, contents := []any{}, []any{}
	for _, it := range held {
		switch it.Resource.GroupResource() {
		case "volumesnapshots.snapshot.storage.k8s.io":
			snapshots = append(snapshots, it.Object.Object)
		case "volumesnapshotcontents.snapshot.storage.k8s.io":
			contents = append(contents, it.Object.Object)
		}
	}
	for kind, list := range map[velerov1.DownloadTargetKind][]any{
		velerov1.DownloadTargetKindCSIBackupVolumeSnapshots:        snapshots,
		velerov1.DownloadTargetKindCSIBackupVolumeSnapshotContents: contents,
	} {
		if len(list) == 0 {
			continue
		}
		data, err := json.Marshal(list)
		if err != nil {
			return err
		}
		if err := putGzip(ctx, store, layout, kind, name, data); err != nil {
			return err
		}
	}
	return nil
}
