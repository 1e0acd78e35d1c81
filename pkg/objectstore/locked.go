package objectstore

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
)

// ErrLocked wraps the store's refusal to delete or rewrite an object
// version under S3 object lock before its retention date.
var ErrLocked = errors.New("locked (S3 object lock)")

// Locked is the store of a location on an S3 bucket made with object lock
// (config objectLockMode): a versioned bucket, where nothing that holds a
// bucket's credentials can remove a locked version before its date, but
// anyone can add versions on top (an overwrite) and delete markers (a
// delete without a version). So that neither changes what Backstop reads,
// the value of a key is its oldest version that is not a delete marker:
//
//   - Put adds a version, then deletes the key's other versions (written
//     before, not locked): the new one is the oldest. Over a locked
//     version it writes nothing and returns ErrLocked: what is locked is
//     never rewritten.
//   - Get reads the oldest version; what was put over it or a delete
//     marker on top is not seen.
//   - Delete deletes every version of the key (delete markers included);
//     a locked one refuses, and Delete returns ErrLocked with its date.
//   - List and Walk name every key that has a version, deleted on top or
//     not.
//   - Retain locks a key's value (its oldest version) until a date, in the
//     location's mode: the backup engine locks every object of a backup
//     when it completes (RetainPrefix).
//
// A key's versions cost one listing request per Get, Put and Delete.
type Locked struct {
	*S3
	// Mode is the object lock mode of what Retain locks:
	// GOVERNANCE or COMPLIANCE.
	Mode string
}

var _ Store = &Locked{}

// objectVersion is one version of a key.
type objectVersion struct {
	id           string
	deleteMarker bool
}

// versions lists the versions of key, oldest first (S3 lists a key's
// versions newest first).
func (s *Locked) versions(ctx context.Context, key string) ([]objectVersion, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out []objectVersion
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: key, Recursive: true, WithVersions: true}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("s3: listing the versions of %s: %w", key, obj.Err)
		}
		if obj.Key > key {
			break // keys are listed in order: the rest only start with key
		}
		if obj.Key == key {
			out = append(out, objectVersion{id: obj.VersionID, deleteMarker: obj.IsDeleteMarker})
		}
	}
	slices.Reverse(out)
	return out, nil
}

// value is the version of key Backstop reads: its oldest that is not a
// delete marker.
func (s *Locked) value(ctx context.Context, key string) (objectVersion, error) {
	vs, err := s.versions(ctx, key)
	if err != nil {
		return objectVersion{}, err
	}
	for _, v := range vs {
		if !v.deleteMarker {
			return v, nil
		}
	}
	return objectVersion{}, fmt.Errorf("%s: %w", key, ErrNotFound)
}

// Get opens the key's value: its oldest version.
func (s *Locked) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	v, err := s.value(ctx, key)
	if err != nil {
		return nil, err
	}
	return s.getVersion(ctx, key, v.id)
}

// Put writes a new value of key: a new version, then the key's other
// versions deleted. Over a locked version, it leaves nothing and returns
// ErrLocked.
func (s *Locked) Put(ctx context.Context, key string, r io.Reader) error {
	id, err := s.put(ctx, key, r)
	if err != nil {
		return err
	}
	if id == "" {
		return fmt.Errorf("s3: putting %s: the bucket gave the object no version: is it versioned (made with object lock)?", key)
	}
	vs, err := s.versions(ctx, key)
	if err != nil {
		return err
	}
	for _, v := range vs {
		if v.id == id {
			continue
		}
		if err := s.deleteVersion(ctx, key, v.id); err != nil {
			if errors.Is(err, ErrLocked) {
				// The value stays what is locked: the new version goes.
				if err := s.deleteVersion(ctx, key, id); err != nil {
					return fmt.Errorf("s3: %s is locked, and removing what was put over it failed: %w", key, err)
				}
				return fmt.Errorf("s3: not rewriting %s: %w", key, s.lockedError(ctx, key, v.id))
			}
			return err
		}
	}
	return nil
}

// Delete deletes every version of key; ErrLocked when one is locked.
func (s *Locked) Delete(ctx context.Context, key string) error {
	vs, err := s.versions(ctx, key)
	if err != nil {
		return err
	}
	for _, v := range vs {
		if err := s.deleteVersion(ctx, key, v.id); err != nil {
			if errors.Is(err, ErrLocked) {
				return fmt.Errorf("s3: deleting %s: %w", key, s.lockedError(ctx, key, v.id))
			}
			return err
		}
	}
	return nil
}

// deleteVersion deletes one version of key (never bypassing governance);
// ErrLocked when the store refuses it. S3 answers a locked version and a
// missing permission alike (AccessDenied), and not every server gives an
// older version's lock in its headers: lockedError says which it knows.
func (s *Locked) deleteVersion(ctx context.Context, key, id string) error {
	err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{VersionID: id})
	switch {
	case err == nil || isNoSuchKey(err) || minio.ToErrorResponse(err).Code == "NoSuchVersion":
		return nil
	case minio.ToErrorResponse(err).Code == "AccessDenied":
		return fmt.Errorf("%w: %v", ErrLocked, err)
	default:
		return fmt.Errorf("s3: deleting %s version %s: %w", key, id, err)
	}
}

// lockedError says until when a version of key is locked, and in which
// mode, when the store says.
func (s *Locked) lockedError(ctx context.Context, key, id string) error {
	mode, until := s.retention(ctx, key, id)
	if mode == "" {
		return fmt.Errorf("%w: the store refuses to remove version %s (locked, or the location's user lacks s3:DeleteObjectVersion)", ErrLocked, id)
	}
	return fmt.Errorf("%w until %s (%s)", ErrLocked, until.UTC().Format(time.RFC3339), mode)
}

// RetainedUntil is the lock of key's value (its oldest version): its mode
// ("" when it has none) and date.
func (s *Locked) RetainedUntil(ctx context.Context, key string) (string, time.Time, error) {
	v, err := s.value(ctx, key)
	if err != nil {
		return "", time.Time{}, err
	}
	mode, until := s.retention(ctx, key, v.id)
	return mode, until, nil
}

// retention is the lock of a version of key: its mode ("" when it has
// none, or the store does not say) and date, as the version's headers
// give them, else as GetObjectRetention does. (Servers differ: versitygw
// gives an older version's lock in no header, and names the root element
// of GetObjectRetention's answer otherwise than minio-go reads.)
func (s *Locked) retention(ctx context.Context, key, id string) (string, time.Time) {
	info, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{VersionID: id})
	if err != nil {
		return "", time.Time{}
	}
	if until, err := time.Parse(time.RFC3339, info.Metadata.Get("X-Amz-Object-Lock-Retain-Until-Date")); err == nil {
		return info.Metadata.Get("X-Amz-Object-Lock-Mode"), until
	}
	u, err := s.client.Presign(ctx, http.MethodGet, s.bucket, key, time.Minute, url.Values{"retention": {""}, "versionId": {id}})
	if err != nil {
		return "", time.Time{}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", time.Time{}
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return "", time.Time{}
	}
	defer resp.Body.Close()
	var retention struct {
		Mode            string    `xml:"Mode"`
		RetainUntilDate time.Time `xml:"RetainUntilDate"`
	}
	if resp.StatusCode != http.StatusOK || xml.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&retention) != nil {
		return "", time.Time{}
	}
	return retention.Mode, retention.RetainUntilDate
}

// List returns the keys under prefix that have a version, sorted.
func (s *Locked) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	if err := s.Walk(ctx, prefix, func(key string) error { keys = append(keys, key); return nil }); err != nil {
		return nil, err
	}
	sort.Strings(keys)
	return keys, nil
}

// Walk calls fn once with each key under prefix that has a version other
// than a delete marker: a key deleted on top (by a delete without a
// version) still holds its locked value.
func (s *Locked) Walk(ctx context.Context, prefix string, fn func(key string) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	last := ""
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true, WithVersions: true}) {
		if obj.Err != nil {
			return fmt.Errorf("s3: listing %s: %w", prefix, obj.Err)
		}
		if obj.IsDeleteMarker || obj.Key == last {
			continue
		}
		last = obj.Key
		if err := fn(obj.Key); err != nil {
			return err
		}
	}
	return nil
}

// Probe checks the bucket as S3's Probe does, and that it was made with
// object lock.
func (s *Locked) Probe(ctx context.Context) error {
	if err := s.S3.Probe(ctx); err != nil {
		return err
	}
	enabled, mode, validity, _, err := s.client.GetObjectLockConfig(ctx, s.bucket)
	if err != nil || enabled != "Enabled" {
		detail := ""
		if err != nil {
			detail = ": " + err.Error()
		}
		return fmt.Errorf("s3: bucket %s has no object lock (config objectLockMode %s needs a bucket made with object lock)%s", s.bucket, s.Mode, detail)
	}
	if mode != nil && *mode != "" && validity != nil && *validity > 0 {
		// Every version would be locked as it is written: a backup's
		// rewrites while it runs would fail, and its lock could not end
		// with its expiration.
		return fmt.Errorf("s3: bucket %s has a default retention (%s, %d): Backstop locks each backup until its expiration itself; remove the bucket's default retention", s.bucket, *mode, *validity)
	}
	// Listing versions needs s3:ListBucketVersions, which a plain
	// location does not.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{WithVersions: true, MaxKeys: 1}) {
		if obj.Err != nil {
			return fmt.Errorf("s3: listing the versions in bucket %s (s3:ListBucketVersions): %w", s.bucket, obj.Err)
		}
		break
	}
	return nil
}

// Retain locks the value of key (its oldest version) until a date in the
// location's mode.
func (s *Locked) Retain(ctx context.Context, key string, until time.Time) error {
	v, err := s.value(ctx, key)
	if err != nil {
		return err
	}
	mode := minio.RetentionMode(s.Mode)
	until = until.UTC()
	if err := s.client.PutObjectRetention(ctx, s.bucket, key, minio.PutObjectRetentionOptions{
		Mode: &mode, RetainUntilDate: &until, VersionID: v.id}); err != nil {
		return fmt.Errorf("s3: locking %s until %s: %w", key, until.Format(time.RFC3339), err)
	}
	return nil
}

// LockedStore is the Locked store under s (under Encrypted, Hashing), or
// nil when s is not the store of a location with object lock.
func LockedStore(s Store) *Locked {
	for s != nil {
		if l, ok := s.(*Locked); ok {
			return l
		}
		u, ok := s.(interface{ Unwrap() Store })
		if !ok {
			return nil
		}
		s = u.Unwrap()
	}
	return nil
}

// RetainPrefix locks every object under prefix until a date, when store
// is the store of a location with object lock (LockedStore), the key last
// (if given) after all the others: once it is locked, all are. It returns
// the mode, "" for a store without.
func RetainPrefix(ctx context.Context, store Store, prefix string, until time.Time, last string) (string, error) {
	l := LockedStore(store)
	if l == nil {
		return "", nil
	}
	err := l.Walk(ctx, prefix, func(key string) error {
		if strings.HasSuffix(key, "/") || key == last {
			return nil
		}
		return l.Retain(ctx, key, until)
	})
	if err == nil && last != "" {
		err = l.Retain(ctx, last, until)
	}
	return l.Mode, err
}
