// Package kopiarepo owns the kopia repositories the data mover moves volume
// data into: one per storage location and volume namespace, laid out as
// Velero v1.18 lays them out (docs/datamover-reference.md, section 4), so
// that Velero and the kopia CLI read what Backstop writes. It opens (and
// first creates) a repository, uploads a directory as a snapshot
// (incremental over the source's previous one), restores a snapshot into a
// directory, and forgets one.
package kopiarepo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kopia/kopia/fs/localfs"
	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/repo/blob"
	"github.com/kopia/kopia/repo/blob/filesystem"
	"github.com/kopia/kopia/repo/blob/s3"
	"github.com/kopia/kopia/repo/blob/throttling"
	"github.com/kopia/kopia/repo/format"
	"github.com/kopia/kopia/repo/manifest"
	"github.com/kopia/kopia/snapshot"
	"github.com/kopia/kopia/snapshot/policy"
	"github.com/kopia/kopia/snapshot/restore"
	"github.com/kopia/kopia/snapshot/snapshotfs"
	"github.com/kopia/kopia/snapshot/upload"
)

// Velero's names in the repository.
const (
	// Requester is the snapshot-requester tag of the data mover's
	// snapshots, and the first element of their source path.
	Requester = "snapshot-data-upload-download"
	// Uploader is the snapshot-uploader tag.
	Uploader = "kopia"
	// RequesterTag and UploaderTag are the tags' keys.
	RequesterTag = "snapshot-requester"
	UploaderTag  = "snapshot-uploader"
	// clientUser and clientHost are the identity every client connects
	// as: Velero's, which owns the repository's maintenance.
	clientUser, clientHost = "default", "default"
	// description and pin are what Velero writes on its snapshots.
	description = "Kopia Uploader"
	pin         = "velero-pin"
	// backendDir is the directory of Velero's kopia repositories under a
	// location's prefix (its repository backend's name).
	backendDir = "kopia"
)

// Prefix is where a volume namespace's repository lives under a storage
// location's prefix: <prefix>/kopia/<namespace>/.
func Prefix(locationPrefix, namespace string) string {
	return path.Join(strings.Trim(locationPrefix, "/"), backendDir, namespace) + "/"
}

// SourcePath is the kopia source path of a claim's snapshots:
// snapshot-data-upload-download/kopia/<namespace>/<claim>.
func SourcePath(namespace, claim string) string {
	return path.Join(Requester, Uploader, namespace, claim)
}

// FilesystemStorage is the blob storage of a repository in a directory.
func FilesystemStorage(ctx context.Context, dir string) (blob.Storage, error) {
	st, err := filesystem.New(ctx, &filesystem.Options{Path: dir}, true)
	if err != nil {
		return nil, fmt.Errorf("opening the repository storage in %s: %w", dir, err)
	}
	return st, nil
}

// S3 says where a repository is in an S3 bucket, as Velero derives it from
// an aws storage location (its s3Url's host, TLS unless the URL is http).
type S3 struct {
	Bucket, Prefix string
	// Endpoint is host:port.
	Endpoint    string
	DisableTLS  bool
	Region      string
	AccessKeyID string
	SecretKey   string
	// SessionToken goes with temporary keys.
	SessionToken string
	// RootCA is a PEM bundle the endpoint's certificate is checked
	// against; SkipTLSVerify checks none (the location asks for it).
	RootCA        []byte
	SkipTLSVerify bool
}

// S3Storage is the blob storage of a repository in an S3 bucket.
func S3Storage(ctx context.Context, o S3) (blob.Storage, error) {
	st, err := s3.New(ctx, &s3.Options{BucketName: o.Bucket, Prefix: o.Prefix, Endpoint: o.Endpoint, DoNotUseTLS: o.DisableTLS,
		Region: o.Region, AccessKeyID: o.AccessKeyID, SecretAccessKey: o.SecretKey, SessionToken: o.SessionToken,
		RootCA: o.RootCA, DoNotVerifyTLS: o.SkipTLSVerify}, false)
	if err != nil {
		return nil, fmt.Errorf("opening the repository storage s3://%s/%s: %w", o.Bucket, o.Prefix, err)
	}
	return st, nil
}

// Config says which repository to open, and how.
type Config struct {
	// Storage holds the repository (its prefix already applied).
	Storage blob.Storage
	// Password encrypts the repository.
	Password string
	// Dir is a private directory of the server's for the connection's
	// configuration and cache (it holds the storage's credentials).
	Dir string
	// UploadBytesPerSecond limits the bytes written to the storage (0: no
	// limit).
	UploadBytesPerSecond float64
	// StorageCheckInterval is how often a running upload that has written
	// nothing since checks its storage (0: DefaultStorageCheckInterval).
	StorageCheckInterval time.Duration
	// Create creates the repository when the storage holds none (one
	// creator per repository: two creating it at once would each write
	// part of its format); otherwise that is ErrNoRepository.
	Create bool
}

// Repository is an open repository.
type Repository struct {
	rep repo.Repository
	// storage is the repository's storage, as the caller opened it: a
	// running upload checks it (watchStorage).
	storage       blob.Storage
	checkInterval time.Duration
}

// ErrWrongPassword is the error of a repository the password does not open.
var ErrWrongPassword = errors.New("the repository password does not open the repository")

// ErrNoRepository is the error of opening, without Create, a storage that
// holds no repository.
var ErrNoRepository = errors.New("the storage holds no repository")

// Open opens the repository of cfg, creating it (kopia's default hash,
// encryption and splitter, as Velero creates it) when the storage holds
// none and cfg.Create, and setting it up as Velero does (setUpForVelero).
func Open(ctx context.Context, cfg Config) (*Repository, error) {
	// Absolute: kopia resolves its local paths against the configuration
	// file's directory, and a relative one (a relative --data-dir) would
	// put them under the process's working directory.
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("the repository's local directory: %w", err)
	}
	cfg.Dir = dir
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the repository's local directory: %w", err)
	}
	_, err = cfg.Storage.GetMetadata(ctx, format.KopiaRepositoryBlobID)
	switch {
	case errors.Is(err, blob.ErrBlobNotFound) && !cfg.Create:
		return nil, ErrNoRepository
	case errors.Is(err, blob.ErrBlobNotFound):
		if err := repo.Initialize(ctx, cfg.Storage, &repo.NewRepositoryOptions{}, cfg.Password); err != nil {
			return nil, fmt.Errorf("creating the repository: %w", err)
		}
	case err != nil:
		return nil, fmt.Errorf("reading the repository's format: %w", err)
	}
	configFile := filepath.Join(cfg.Dir, "repository.config")
	if _, err := os.Stat(configFile); errors.Is(err, os.ErrNotExist) {
		// No cache on disk (kopia keeps none without cache sizes): its
		// file names would come from the bucket's listing, which kopia
		// does not check, and the index blobs' cache holds a blob's
		// bytes before they are authenticated.
		err := repo.Connect(ctx, configFile, cfg.Storage, cfg.Password, &repo.ConnectOptions{
			ClientOptions: repo.ClientOptions{Hostname: clientHost, Username: clientUser,
				Throttling: &throttling.Limits{UploadBytesPerSecond: cfg.UploadBytesPerSecond}},
		})
		if errors.Is(err, format.ErrInvalidPassword) {
			return nil, ErrWrongPassword
		}
		if err != nil {
			return nil, fmt.Errorf("connecting to the repository: %w", err)
		}
	}
	rep, err := repo.Open(ctx, configFile, cfg.Password, &repo.Options{
		// kopia's default ends the process.
		OnFatalError: func(error) {},
	})
	if errors.Is(err, format.ErrInvalidPassword) {
		return nil, ErrWrongPassword
	}
	if err != nil {
		return nil, fmt.Errorf("opening the repository: %w", err)
	}
	if err := setUpForVelero(ctx, cfg.Storage, rep); err != nil {
		_ = rep.Close(ctx)
		return nil, err
	}
	interval := cfg.StorageCheckInterval
	if interval <= 0 {
		interval = DefaultStorageCheckInterval
	}
	return &Repository{rep: rep, storage: cfg.Storage, checkInterval: interval}, nil
}

// Exists reports whether st holds a repository.
func Exists(ctx context.Context, st blob.Storage) (bool, error) {
	_, err := st.GetMetadata(ctx, format.KopiaRepositoryBlobID)
	switch {
	case errors.Is(err, blob.ErrBlobNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading the repository's format: %w", err)
	}
	return true, nil
}

// ChangePassword makes password the one that opens the repository (kopia
// encrypts the repository's format with it again: its contents and their
// keys stay as they are, and connections already open go on).
func (r *Repository) ChangePassword(ctx context.Context, password string) error {
	dr, ok := r.rep.(repo.DirectRepository)
	if !ok {
		return errors.New("changing the password: not a direct connection to the repository")
	}
	if err := dr.FormatManager().ChangePassword(ctx, password); err != nil {
		return fmt.Errorf("changing the repository's password: %w", err)
	}
	return nil
}

// Close closes the repository.
func (r *Repository) Close(ctx context.Context) error { return r.rep.Close(ctx) }

// Progress reports an upload's or a download's bytes so far, of about
// total.
type Progress func(done, total int64)

// UploadResult is what an upload made.
type UploadResult struct {
	// SnapshotID is the snapshot's manifest ID.
	SnapshotID string
	// TotalBytes is the size of the files in the snapshot.
	TotalBytes int64
	// UploadedBytes are the bytes written to the storage (new content
	// only: what the previous snapshot held is not written again).
	UploadedBytes int64
	// HashedBytes are the bytes of the files read (those the previous
	// snapshot did not hold unchanged): Velero's incremental size.
	HashedBytes int64
}

// restoreParallel is how many files a restore writes at once: the kopia
// CLI's default (8), or more on more cores. Writing many small files
// waits on the disk more than on the CPU: with one per core, a restore of
// 10,000 files ran at 0.86x the CLI's throughput on two cores.
func restoreParallel() int { return max(8, runtime.NumCPU()) }

// ErrCanceled is the error of an upload or a restore whose context ended.
var ErrCanceled = errors.New("the upload was cancelled")

// Upload uploads the files of dir as a snapshot of source (SourcePath),
// incremental over source's newest complete snapshot, with tags added to
// Velero's.
func (r *Repository) Upload(ctx context.Context, dir, source string, tags map[string]string, progress Progress) (UploadResult, error) {
	if ctx.Err() != nil {
		return UploadResult{}, fmt.Errorf("uploading %s: %w", dir, ErrCanceled)
	}
	// A connection kept open since before a maintenance would otherwise
	// reuse contents that maintenance deleted.
	if err := r.refresh(ctx); err != nil {
		return UploadResult{}, err
	}
	si := sourceInfo(source)
	entry, err := localfs.Directory(dir)
	if err != nil {
		return UploadResult{}, fmt.Errorf("reading %s: %w", dir, err)
	}
	previous, err := r.latest(ctx, source)
	if err != nil {
		return UploadResult{}, err
	}
	var result UploadResult
	counter := &uploadProgress{report: progress}
	opts := repo.WriteSessionOptions{Purpose: "data upload", OnUpload: func(n int64) { counter.uploaded.Add(n) }}
	// The session is flushed whole, whatever happens to ctx after the
	// upload: a snapshot is saved entirely or not at all (an upload
	// cancelled before its end saves none; one cancelled after, the
	// caller forgets).
	uploadCtx, stopWatch := r.watchStorage(ctx, &counter.uploaded)
	defer stopWatch()
	err = repo.WriteSession(context.WithoutCancel(ctx), r.rep, opts, func(sessionCtx context.Context, w repo.RepositoryWriter) error {
		ctx := uploadCtx
		u := upload.NewUploader(w)
		u.FailFast = true
		u.Progress = counter
		// The uploader stops at its next file when cancelled; the
		// context alone it checks less often.
		stop := context.AfterFunc(ctx, u.Cancel)
		defer stop()
		man, err := u.Upload(ctx, entry, policy.BuildTree(nil, policy.DefaultPolicy), si, previous...)
		if ctx.Err() != nil {
			return fmt.Errorf("uploading %s: %w", dir, stopped(ctx))
		}
		if err != nil {
			return fmt.Errorf("uploading %s: %w", dir, err)
		}
		if man.IncompleteReason != "" {
			return fmt.Errorf("uploading %s: incomplete: %s", dir, man.IncompleteReason)
		}
		if failed := man.RootEntry.DirSummary; failed != nil && len(failed.FailedEntries) > 0 {
			return fmt.Errorf("uploading %s: %d entries failed, the first %s: %s", dir, len(failed.FailedEntries),
				failed.FailedEntries[0].EntryPath, failed.FailedEntries[0].Error)
		}
		man.Tags = map[string]string{RequesterTag: Requester, UploaderTag: Uploader}
		for k, v := range tags {
			man.Tags[k] = v
		}
		man.Description = description
		man.Pins = []string{pin}
		id, err := snapshot.SaveSnapshot(sessionCtx, w, man)
		if err != nil {
			return fmt.Errorf("saving the snapshot of %s: %w", dir, err)
		}
		result = UploadResult{SnapshotID: string(id), TotalBytes: man.Stats.TotalFileSize}
		return nil
	})
	// The session's last writes are flushed as it ends.
	result.UploadedBytes, result.HashedBytes = counter.uploaded.Load(), counter.hashed.Load()
	var storageErr *StorageError
	if err != nil && !errors.As(err, &storageErr) {
		// A checkpoint the uploader saved on the way is not a snapshot
		// of the volume: no restore, and no later upload, may use it (none
		// takes an incomplete one; a storage that failed keeps it).
		dropCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dropTimeout)
		defer cancel()
		if derr := r.dropIncomplete(dropCtx, source); derr != nil {
			err = errors.Join(err, derr)
		}
	}
	return result, err
}

// dropTimeout bounds the deletion of a failed upload's checkpoints.
const dropTimeout = time.Minute

// dropIncomplete deletes the incomplete snapshots (checkpoints) of source.
func (r *Repository) dropIncomplete(ctx context.Context, source string) error {
	all, err := r.Snapshots(ctx, source)
	if err != nil {
		return err
	}
	var ids []manifest.ID
	for _, m := range all {
		if m.IncompleteReason != "" {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return repo.WriteSession(ctx, r.rep, repo.WriteSessionOptions{Purpose: "drop checkpoints"}, func(ctx context.Context, w repo.RepositoryWriter) error {
		for _, id := range ids {
			if err := w.DeleteManifest(ctx, id); err != nil && !errors.Is(err, manifest.ErrNotFound) {
				return fmt.Errorf("deleting checkpoint %s of %s: %w", id, source, err)
			}
		}
		return nil
	})
}

// latest is the newest complete snapshot of source the data mover made
// (its tags), or none.
func (r *Repository) latest(ctx context.Context, source string) ([]*snapshot.Manifest, error) {
	newest, err := r.newest(ctx, source, func(*snapshot.Manifest) bool { return true })
	if err != nil || newest == nil {
		return nil, err
	}
	return []*snapshot.Manifest{newest}, nil
}

// newest is the newest complete snapshot of source the data mover made
// (its tags) that keep holds for, or nil.
func (r *Repository) newest(ctx context.Context, source string, keep func(*snapshot.Manifest) bool) (*snapshot.Manifest, error) {
	all, err := r.Snapshots(ctx, source)
	if err != nil {
		return nil, err
	}
	var newest *snapshot.Manifest
	for _, m := range all {
		if m.IncompleteReason != "" || m.Tags[RequesterTag] != Requester || m.Tags[UploaderTag] != Uploader || !keep(m) {
			continue
		}
		if newest == nil || m.StartTime.After(newest.StartTime) {
			newest = m
		}
	}
	return newest, nil
}

// LatestTagged returns the newest complete snapshot of source the data
// mover made that has tag, and its value ("": none).
func (r *Repository) LatestTagged(ctx context.Context, source, tag string) (id, value string, err error) {
	newest, err := r.newest(ctx, source, func(m *snapshot.Manifest) bool { return m.Tags[tag] != "" })
	if err != nil || newest == nil {
		return "", "", err
	}
	return string(newest.ID), newest.Tags[tag], nil
}

// sourceInfo is the kopia source of a SourcePath, as Velero's clients name
// it.
func sourceInfo(source string) snapshot.SourceInfo {
	return snapshot.SourceInfo{Host: clientHost, UserName: clientUser, Path: source}
}

// refresh reads the repository's indexes as the storage has them now:
// other connections (another engine's, another node's, the kopia CLI)
// write snapshots, forget them and run maintenance while this one stays
// open.
func (r *Repository) refresh(ctx context.Context) error {
	if err := r.rep.Refresh(ctx); err != nil {
		return fmt.Errorf("reading the repository's indexes: %w", err)
	}
	return nil
}

// Snapshots lists every snapshot of source (SourcePath), in no order.
func (r *Repository) Snapshots(ctx context.Context, source string) ([]*snapshot.Manifest, error) {
	if err := r.refresh(ctx); err != nil {
		return nil, err
	}
	all, err := snapshot.ListSnapshots(ctx, r.rep, sourceInfo(source))
	if err != nil {
		return nil, fmt.Errorf("listing the snapshots of %s: %w", source, err)
	}
	return all, nil
}

// RestoreResult is what a restore wrote.
type RestoreResult struct {
	// Bytes are the bytes of the files written.
	Bytes int64
	// SetIDFiles counts the files whose set-user-ID or set-group-ID bits
	// the snapshot held and the restore did not set (restoredModeBits).
	SetIDFiles int64
}

// Restore writes snapshot id's files into target (an empty directory, or
// the root of an empty volume), reporting the bytes written so far of
// the snapshot's total. Nothing is written outside target, whatever the
// snapshot holds (rootedOutput): an entry no volume can hold ends it with
// ErrUnsafeEntry. It stops when ctx ends.
func (r *Repository) Restore(ctx context.Context, id, target string, progress Progress) (RestoreResult, error) {
	man, err := r.load(ctx, id)
	if err != nil {
		return RestoreResult{}, err
	}
	if man.RootEntry == nil || man.RootEntry.Type != snapshot.EntryTypeDirectory {
		return RestoreResult{}, fmt.Errorf("restoring snapshot %s: %w: its root is not a directory", id, ErrUnsafeEntry)
	}
	root, err := snapshotfs.SnapshotRoot(r.rep, man)
	if err != nil {
		return RestoreResult{}, fmt.Errorf("reading snapshot %s: %w", id, err)
	}
	out, err := openRootedOutput(target)
	if err != nil {
		return RestoreResult{}, err
	}
	defer out.closeRoot()
	cancel := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { close(cancel) })
	defer stop()
	total := man.Stats.TotalFileSize
	st, err := restore.Entry(ctx, r.rep, out, root, restore.Options{Parallel: restoreParallel(), RestoreDirEntryAtDepth: math.MaxInt32, Cancel: cancel,
		ProgressCallback: func(_ context.Context, s restore.Stats) {
			if progress != nil {
				progress(s.RestoredTotalFileSize+s.SkippedTotalFileSize, total)
			}
		}})
	result := RestoreResult{Bytes: st.RestoredTotalFileSize, SetIDFiles: out.privilegedFiles.Load()}
	if err == nil && ctx.Err() != nil {
		err = ErrCanceled
	}
	if err != nil {
		return result, fmt.Errorf("restoring snapshot %s into %s: %w", id, target, err)
	}
	return result, nil
}

// ErrNoSnapshot is the error of a snapshot the repository does not hold.
var ErrNoSnapshot = errors.New("no such snapshot")

// load reads snapshot id's manifest, as the storage has it now.
func (r *Repository) load(ctx context.Context, id string) (*snapshot.Manifest, error) {
	if err := r.refresh(ctx); err != nil {
		return nil, err
	}
	man, err := snapshot.LoadSnapshot(ctx, r.rep, manifest.ID(id))
	if errors.Is(err, snapshot.ErrSnapshotNotFound) {
		return nil, fmt.Errorf("snapshot %s: %w", id, ErrNoSnapshot)
	}
	if err != nil {
		return nil, fmt.Errorf("reading snapshot %s: %w", id, err)
	}
	return man, nil
}

// SourceOf returns the source (SourcePath) of snapshot id.
func (r *Repository) SourceOf(ctx context.Context, id string) (string, error) {
	man, err := r.load(ctx, id)
	if err != nil {
		return "", err
	}
	return man.Source.Path, nil
}

// TagsOf returns the tags of snapshot id.
func (r *Repository) TagsOf(ctx context.Context, id string) (map[string]string, error) {
	man, err := r.load(ctx, id)
	if err != nil {
		return nil, err
	}
	return man.Tags, nil
}

// Forget deletes snapshot id's manifest: its data goes at the next
// maintenance that finds it unreferenced. A snapshot already gone is no
// error.
func (r *Repository) Forget(ctx context.Context, id string) error {
	err := repo.WriteSession(ctx, r.rep, repo.WriteSessionOptions{Purpose: "forget snapshot"}, func(ctx context.Context, w repo.RepositoryWriter) error {
		return w.DeleteManifest(ctx, manifest.ID(id))
	})
	if err != nil && !errors.Is(err, manifest.ErrNotFound) {
		return fmt.Errorf("forgetting snapshot %s: %w", id, err)
	}
	return nil
}

// uploadProgress counts an upload's bytes for Progress and UploadResult.
type uploadProgress struct {
	upload.NullUploadProgress
	report         Progress
	hashed, cached atomic.Int64
	total          atomic.Int64
	// uploaded counts the bytes the write session wrote to the storage.
	uploaded atomic.Int64
}

func (p *uploadProgress) Enabled() bool { return true }

func (p *uploadProgress) HashedBytes(n int64) {
	p.hashed.Add(n)
	p.tell()
}

func (p *uploadProgress) CachedFile(_ string, size int64) {
	p.cached.Add(size)
	p.tell()
}

func (p *uploadProgress) EstimatedDataSize(_ int64, size int64) { p.total.Store(size) }

func (p *uploadProgress) tell() {
	if p.report != nil {
		p.report(p.hashed.Load()+p.cached.Load(), p.total.Load())
	}
}
