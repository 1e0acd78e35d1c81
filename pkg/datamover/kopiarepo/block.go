package kopiarepo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kopia/kopia/fs"
	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/repo/object"
	"github.com/kopia/kopia/snapshot"
	"github.com/kopia/kopia/snapshot/snapshotfs"
)

// A block volume (volumeMode: Block) is kept as one file, its device's
// bytes, in a snapshot's root directory, as Velero's block uploader keeps
// it (so a Velero restore writes it back to a device). Backstop writes
// that file in fixed blocks of BlockSize, each its own kopia object, and
// the file's object is the list of them (kopia's index object, as its
// own splitter writes it): the next upload, told which byte ranges
// changed since this one's storage snapshot (the CSI SnapshotMetadata
// API), reads only the blocks those ranges touch and takes every other
// block's object from this snapshot, unread. This is how Velero's next
// release uploads block volumes by changed blocks (its "kopia object
// writer" over a parent's index).

// BlockSize is the unit a block volume is read and stored in.
const BlockSize = 1 << 20

// blockSplitter keeps each block one kopia content.
const blockSplitter = "FIXED-1M"

// blockFile is the name of a block volume's file in its snapshot.
const blockFile = "volume"

// blockReaders is how many blocks are read and written at once.
const blockReaders = 4

// Range is a byte range of a block volume.
type Range struct{ Offset, Length int64 }

// BlockUpload says what UploadBlock uploads.
type BlockUpload struct {
	// Device is the volume's device (or any file of its bytes).
	Device string
	// Source is the snapshot's source (SourcePath); Tags are added to
	// Velero's.
	Source string
	Tags   map[string]string
	// Base is a snapshot of the same volume and Changed the ranges that
	// changed since it (ranges the CSI SnapshotMetadata API gave between
	// Base's storage snapshot and this one's): only the blocks they touch
	// are read. No Base reads the whole device.
	Base    string
	Changed []Range
}

// BlockResult is what UploadBlock made.
type BlockResult struct {
	UploadResult
	// ReusedBytes are the bytes taken from the base snapshot unread.
	ReusedBytes int64
	// FullReadReason says why a base was given but the whole device read
	// (empty when the base was used, or none given).
	FullReadReason string
}

// UploadBlock uploads a block volume's device as a snapshot of u.Source:
// incremental over u.Base when it is given and usable (its blocks are
// this layout's), otherwise reading every block (kopia still writes only
// contents the repository does not hold). A snapshot is saved whole or
// not at all, as Upload's.
func (r *Repository) UploadBlock(ctx context.Context, u BlockUpload, progress Progress) (BlockResult, error) {
	if ctx.Err() != nil {
		return BlockResult{}, fmt.Errorf("uploading %s: %w", u.Device, ErrCanceled)
	}
	if err := r.refresh(ctx); err != nil {
		return BlockResult{}, err
	}
	dev, err := os.Open(u.Device)
	if err != nil {
		return BlockResult{}, fmt.Errorf("opening the volume's device: %w", err)
	}
	defer dev.Close()
	size, err := dev.Seek(0, io.SeekEnd)
	if err != nil {
		return BlockResult{}, fmt.Errorf("reading the size of the volume's device: %w", err)
	}
	var result BlockResult
	var base []object.IndirectObjectEntry
	if u.Base != "" {
		base, err = r.blocksOf(ctx, u.Base, u.Source)
		if err != nil {
			result.FullReadReason = err.Error()
			base = nil
		}
	}
	plan := planBlocks(size, base, u.Changed, u.Base != "" && base != nil)
	start := time.Now()
	var uploaded, read, reused atomic.Int64
	for _, b := range plan {
		if b.reuse {
			reused.Add(b.Length)
		}
	}
	tell := func() {
		if progress != nil {
			progress(read.Load()+reused.Load(), size)
		}
	}
	tell()
	opts := repo.WriteSessionOptions{Purpose: "block data upload", OnUpload: func(n int64) { uploaded.Add(n) }}
	uploadCtx, stopWatch := r.watchStorage(ctx, &uploaded)
	defer stopWatch()
	err = repo.WriteSession(context.WithoutCancel(ctx), r.rep, opts, func(sessionCtx context.Context, w repo.RepositoryWriter) error {
		if err := readBlocks(uploadCtx, w, dev, plan, func(n int64) { read.Add(n); tell() }); err != nil {
			return fmt.Errorf("uploading %s: %w", u.Device, err)
		}
		file, err := writeIndex(sessionCtx, w, plan)
		if err != nil {
			return err
		}
		now := fs.UTCTimestampFromTime(time.Now())
		entry := &snapshot.DirEntry{Name: blockFile, Type: snapshot.EntryTypeFile, Permissions: 0o600, FileSize: size, ModTime: now, ObjectID: file}
		b := &snapshotfs.DirManifestBuilder{}
		b.AddEntry(entry)
		dir := b.Build(now, "")
		dirID, err := snapshotfs.WriteDirManifest(sessionCtx, w, ".", dir, "")
		if err != nil {
			return fmt.Errorf("writing the snapshot's directory: %w", err)
		}
		man := &snapshot.Manifest{
			Source: sourceInfo(u.Source), Description: description, Pins: []string{pin},
			StartTime: fs.UTCTimestampFromTime(start), EndTime: now,
			Stats:     snapshot.Stats{TotalFileSize: size, TotalFileCount: 1, TotalDirectoryCount: 1},
			RootEntry: &snapshot.DirEntry{Type: snapshot.EntryTypeDirectory, Permissions: 0o700, ModTime: now, ObjectID: dirID, DirSummary: dir.Summary},
			Tags:      map[string]string{RequesterTag: Requester, UploaderTag: Uploader},
		}
		for k, v := range u.Tags {
			man.Tags[k] = v
		}
		id, err := snapshot.SaveSnapshot(sessionCtx, w, man)
		if err != nil {
			return fmt.Errorf("saving the snapshot of %s: %w", u.Device, err)
		}
		result.SnapshotID, result.TotalBytes = string(id), size
		return nil
	})
	result.UploadedBytes, result.HashedBytes, result.ReusedBytes = uploaded.Load(), read.Load(), reused.Load()
	return result, err
}

// plannedBlock is one block of an upload: read from the device, or its
// base's object reused.
type plannedBlock struct {
	object.IndirectObjectEntry
	reuse bool
}

// planBlocks divides a device of size bytes into blocks and says which
// are read: with a usable base, those the changed ranges touch and those
// the base has no block of the same place and length for; otherwise
// every one.
func planBlocks(size int64, base []object.IndirectObjectEntry, changed []Range, incremental bool) []plannedBlock {
	n := (size + BlockSize - 1) / BlockSize
	plan := make([]plannedBlock, n)
	for i := range plan {
		off := int64(i) * BlockSize
		plan[i].Start, plan[i].Length = off, min(BlockSize, size-off)
	}
	if !incremental {
		return plan
	}
	dirty := make([]bool, n)
	for _, c := range changed {
		if c.Length <= 0 || c.Offset >= size {
			continue
		}
		first, last := max(c.Offset, 0)/BlockSize, min(c.Offset+c.Length-1, size-1)/BlockSize
		for i := first; i <= last; i++ {
			dirty[i] = true
		}
	}
	for _, e := range base {
		if e.Start%BlockSize != 0 {
			continue
		}
		i := e.Start / BlockSize
		if i < n && !dirty[i] && e.Length == plan[i].Length {
			plan[i].Object, plan[i].reuse = e.Object, true
		}
	}
	return plan
}

// readBlocks reads the blocks plan does not reuse from dev and writes
// each as its own object, setting its object in plan; read reports each
// block's bytes. It stops when ctx ends (ErrCanceled).
func readBlocks(ctx context.Context, w repo.RepositoryWriter, dev io.ReaderAt, plan []plannedBlock, read func(int64)) error {
	next := make(chan int)
	errs := make(chan error, blockReaders)
	var wg sync.WaitGroup
	for range blockReaders {
		wg.Go(func() {
			buf := make([]byte, BlockSize)
			for i := range next {
				b := &plan[i]
				if _, err := dev.ReadAt(buf[:b.Length], b.Start); err != nil {
					errs <- fmt.Errorf("reading the block at %d: %w", b.Start, err)
					return
				}
				// On ctx, as kopia's uploader writes: kopia's retries of a
				// failing storage end with it.
				id, err := writeObject(ctx, w, buf[:b.Length])
				if err != nil {
					errs <- fmt.Errorf("writing the block at %d: %w", b.Start, err)
					return
				}
				b.Object = id
				read(b.Length)
			}
		})
	}
	var err error
feed:
	for i := range plan {
		if plan[i].reuse {
			continue
		}
		select {
		case next <- i:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = stopped(ctx)
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return stopped(ctx)
	}
	return <-errs
}

// writeObject writes data as one object of one content.
func writeObject(ctx context.Context, w repo.RepositoryWriter, data []byte) (object.ID, error) {
	ow := w.NewObjectWriter(ctx, object.WriterOptions{Description: "BLOCK", Splitter: blockSplitter})
	defer ow.Close()
	if _, err := ow.Write(data); err != nil {
		return object.EmptyID, err
	}
	return ow.Result()
}

// indexStream is the stream type of kopia's index objects.
const indexStream = "kopia:indirect"

// indexObject is an index object's JSON, as kopia's object writer writes
// it.
type indexObject struct {
	Stream  string                       `json:"stream"`
	Entries []object.IndirectObjectEntry `json:"entries"`
}

// writeIndex writes the index object of plan's blocks and returns the
// file's object: the concatenation of the blocks (a single block is its
// own object).
func writeIndex(ctx context.Context, w repo.RepositoryWriter, plan []plannedBlock) (object.ID, error) {
	switch len(plan) {
	case 0:
		return writeObject(ctx, w, nil)
	case 1:
		return plan[0].Object, nil
	}
	idx := indexObject{Stream: indexStream, Entries: make([]object.IndirectObjectEntry, len(plan))}
	for i, b := range plan {
		idx.Entries[i] = b.IndirectObjectEntry
	}
	ow := w.NewObjectWriter(ctx, object.WriterOptions{Description: "LIST(BLOCKS)", Prefix: "x"})
	defer ow.Close()
	if err := json.NewEncoder(ow).Encode(idx); err != nil {
		return object.EmptyID, fmt.Errorf("writing the volume's block list: %w", err)
	}
	id, err := ow.Result()
	if err != nil {
		return object.EmptyID, fmt.Errorf("writing the volume's block list: %w", err)
	}
	file, err := object.ParseID("I" + id.String())
	if err != nil {
		return object.EmptyID, fmt.Errorf("naming the volume's object: %w", err)
	}
	return file, nil
}

// blockVolume is the file of a block volume's snapshot.
func (r *Repository) blockVolume(ctx context.Context, id string) (*snapshot.Manifest, *snapshot.DirEntry, error) {
	man, err := r.load(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if man.RootEntry == nil || man.RootEntry.Type != snapshot.EntryTypeDirectory {
		return nil, nil, fmt.Errorf("snapshot %s is not of a block volume: its root is no directory", id)
	}
	rd, err := r.rep.OpenObject(ctx, man.RootEntry.ObjectID)
	if err != nil {
		return nil, nil, fmt.Errorf("reading snapshot %s: %w", id, err)
	}
	defer rd.Close()
	var dir snapshot.DirManifest
	if err := json.NewDecoder(rd).Decode(&dir); err != nil {
		return nil, nil, fmt.Errorf("reading the directory of snapshot %s: %w", id, err)
	}
	if len(dir.Entries) != 1 || dir.Entries[0].Type != snapshot.EntryTypeFile {
		return nil, nil, fmt.Errorf("snapshot %s is not of a block volume: it holds %d entries, not one file", id, len(dir.Entries))
	}
	return man, dir.Entries[0], nil
}

// blocksOf lists the blocks of snapshot id's volume, which must be a
// snapshot of source.
func (r *Repository) blocksOf(ctx context.Context, id, source string) ([]object.IndirectObjectEntry, error) {
	man, file, err := r.blockVolume(ctx, id)
	if err != nil {
		return nil, err
	}
	if man.Source.Path != source {
		return nil, fmt.Errorf("snapshot %s is of %s, not %s", id, man.Source.Path, source)
	}
	if file.Name != blockFile {
		return nil, fmt.Errorf("snapshot %s holds %q, not the %q of a block volume uploaded in blocks", id, file.Name, blockFile)
	}
	idx, indirect := file.ObjectID.IndexObjectID()
	if !indirect {
		return []object.IndirectObjectEntry{{Length: file.FileSize, Object: file.ObjectID}}, nil
	}
	rd, err := r.rep.OpenObject(ctx, idx)
	if err != nil {
		return nil, fmt.Errorf("reading the block list of snapshot %s: %w", id, err)
	}
	defer rd.Close()
	var list indexObject
	if err := json.NewDecoder(rd).Decode(&list); err != nil {
		return nil, fmt.Errorf("reading the block list of snapshot %s: %w", id, err)
	}
	if list.Stream != indexStream {
		return nil, fmt.Errorf("the block list of snapshot %s is a %q stream", id, list.Stream)
	}
	return list.Entries, nil
}

// RestoreBlock writes snapshot id's block volume onto device (a block
// device at least as large, or a file), reporting the bytes written so
// far, and returns how many it wrote. It stops when ctx ends.
func (r *Repository) RestoreBlock(ctx context.Context, id, device string, progress Progress) (int64, error) {
	_, file, err := r.blockVolume(ctx, id)
	if err != nil {
		return 0, err
	}
	src, err := r.rep.OpenObject(ctx, file.ObjectID)
	if err != nil {
		return 0, fmt.Errorf("reading the volume of snapshot %s: %w", id, err)
	}
	defer src.Close()
	dst, err := os.OpenFile(device, os.O_WRONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("opening the device to restore into: %w", err)
	}
	defer dst.Close()
	if end, err := dst.Seek(0, io.SeekEnd); err != nil {
		return 0, fmt.Errorf("reading the size of the device to restore into: %w", err)
	} else if st, serr := dst.Stat(); serr == nil && !st.Mode().IsRegular() && end < file.FileSize {
		return 0, fmt.Errorf("the device to restore into holds %d bytes, the volume %d", end, file.FileSize)
	}
	if _, err := dst.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("seeking the device to restore into: %w", err)
	}
	buf := make([]byte, BlockSize)
	var written int64
	for written < file.FileSize {
		if ctx.Err() != nil {
			return written, fmt.Errorf("restoring snapshot %s onto %s: %w", id, device, ErrCanceled)
		}
		n, rerr := io.ReadFull(src, buf[:min(BlockSize, file.FileSize-written)])
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return written, fmt.Errorf("writing onto %s: %w", device, err)
			}
			written += int64(n)
			if progress != nil {
				progress(written, file.FileSize)
			}
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
				break
			}
			return written, fmt.Errorf("reading the volume of snapshot %s: %w", id, rerr)
		}
	}
	if written != file.FileSize {
		return written, fmt.Errorf("the volume of snapshot %s ended after %d of its %d bytes", id, written, file.FileSize)
	}
	if err := dst.Sync(); err != nil {
		return written, fmt.Errorf("flushing %s: %w", device, err)
	}
	return written, nil
}
