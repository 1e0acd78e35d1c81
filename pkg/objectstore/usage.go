package objectstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/minio/minio-go/v7"
)

// Usage is how much a location's objects take.
type Usage struct {
	// Bytes is the sum of the objects' sizes (every version of a locked
	// location's: a retained version takes its space until it expires).
	Bytes int64
	// Objects counts them.
	Objects int64
}

// Measurer is a Store that can tell how much its objects under a prefix
// take.
type Measurer interface {
	Usage(ctx context.Context, prefix string) (Usage, error)
}

// MeasureUsage measures store's objects under prefix; an error when the
// store cannot measure.
func MeasureUsage(ctx context.Context, store Store, prefix string) (Usage, error) {
	m, ok := store.(Measurer)
	if !ok {
		return Usage{}, fmt.Errorf("the store (%T) cannot measure its usage", store)
	}
	return m.Usage(ctx, prefix)
}

// Usage sums the sizes of the files under prefix (not the temporary files
// of Puts under way).
func (f *Filesystem) Usage(ctx context.Context, prefix string) (Usage, error) {
	var u Usage
	err := f.walk(ctx, prefix, func(_ string, d fs.DirEntry) error {
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed meanwhile
		}
		if err != nil {
			return err
		}
		u.Bytes += info.Size()
		u.Objects++
		return nil
	})
	if err != nil {
		return Usage{}, fmt.Errorf("measuring %s: %w", prefix, err)
	}
	return u, nil
}

// Usage sums the sizes of the objects under prefix.
func (s *S3) Usage(ctx context.Context, prefix string) (Usage, error) {
	return s3Usage(ctx, s.client, s.bucket, prefix, false)
}

// Usage sums the sizes of every version under prefix, delete markers
// aside: the bucket keeps them until their retention ends.
func (s *Locked) Usage(ctx context.Context, prefix string) (Usage, error) {
	return s3Usage(ctx, s.client, s.bucket, prefix, true)
}

func s3Usage(ctx context.Context, client *minio.Client, bucket, prefix string, versions bool) (Usage, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var u Usage
	for obj := range client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true, WithVersions: versions}) {
		if obj.Err != nil {
			return Usage{}, fmt.Errorf("s3: measuring %s: %w", prefix, obj.Err)
		}
		if obj.IsDeleteMarker {
			continue
		}
		u.Bytes += obj.Size
		u.Objects++
	}
	return u, nil
}
