// Package kopiarepotest writes kopia snapshots as whoever can write a
// bucket (and knows a repository's password) can: any entry name, type,
// mode and size, none of which an upload of a volume makes. Tests of the
// data mover's restores use it to show what such a snapshot reaches.
package kopiarepotest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	kopiafs "github.com/kopia/kopia/fs"
	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/repo/blob"
	"github.com/kopia/kopia/repo/object"
	"github.com/kopia/kopia/snapshot"
)

// Entry is an entry of a forged snapshot.
type Entry struct {
	Name string
	Type snapshot.EntryType
	Mode os.FileMode
	// Data is a file's bytes, a symlink's target.
	Data string
	// Size is a file's size as its entry says (-1: len(Data)).
	Size    int64
	Entries []Entry
}

// File is a regular file entry.
func File(name, data string) Entry {
	return Entry{Name: name, Type: snapshot.EntryTypeFile, Mode: 0o644, Data: data, Size: -1}
}

// Dir is a directory entry.
func Dir(name string, entries ...Entry) Entry {
	return Entry{Name: name, Type: snapshot.EntryTypeDirectory, Mode: 0o755, Entries: entries}
}

// Symlink is a symlink entry.
func Symlink(name, target string) Entry {
	return Entry{Name: name, Type: snapshot.EntryTypeSymlink, Mode: 0o777, Data: target}
}

// Forge writes root as a complete snapshot of source with tags into rep
// and returns its ID.
func Forge(ctx context.Context, rep repo.Repository, source snapshot.SourceInfo, tags map[string]string, root Entry) (string, error) {
	var id string
	err := repo.WriteSession(ctx, rep, repo.WriteSessionOptions{Purpose: "forge"}, func(ctx context.Context, w repo.RepositoryWriter) error {
		entry, err := write(ctx, w, root)
		if err != nil {
			return err
		}
		now := kopiafs.UTCTimestampFromTime(time.Now())
		mid, err := snapshot.SaveSnapshot(ctx, w, &snapshot.Manifest{Source: source, Description: "forged", StartTime: now, EndTime: now,
			RootEntry: entry, Tags: tags})
		id = string(mid)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("forging a snapshot: %w", err)
	}
	return id, nil
}

// write writes e's data (a directory's entries) as objects and returns
// its entry.
func write(ctx context.Context, w repo.RepositoryWriter, e Entry) (*snapshot.DirEntry, error) {
	de := &snapshot.DirEntry{Name: e.Name, Type: e.Type, Permissions: snapshot.Permissions(e.Mode),
		ModTime: kopiafs.UTCTimestampFromTime(time.Unix(1_700_000_000, 0))}
	var data []byte
	switch e.Type {
	case snapshot.EntryTypeDirectory:
		dm := snapshot.DirManifest{StreamType: "kopia:directory", Entries: []*snapshot.DirEntry{}, Summary: &kopiafs.DirectorySummary{}}
		for _, c := range e.Entries {
			ce, err := write(ctx, w, c)
			if err != nil {
				return nil, err
			}
			dm.Entries = append(dm.Entries, ce)
		}
		var err error
		if data, err = json.Marshal(dm); err != nil {
			return nil, err
		}
		de.DirSummary = &kopiafs.DirectorySummary{}
	default:
		data = []byte(e.Data)
		de.FileSize = e.Size
		if e.Size < 0 {
			de.FileSize = int64(len(e.Data))
		}
	}
	ow := w.NewObjectWriter(ctx, object.WriterOptions{Description: "forged"})
	defer ow.Close()
	if _, err := ow.Write(data); err != nil {
		return nil, err
	}
	id, err := ow.Result()
	if err != nil {
		return nil, err
	}
	de.ObjectID = id
	return de, nil
}

// Open connects to the repository in st with password, as a client of
// its own (its configuration in a temporary directory, removed by close).
func Open(ctx context.Context, st blob.Storage, password string) (rep repo.Repository, closeRep func(), err error) {
	dir, err := os.MkdirTemp("", "kopiarepotest-")
	if err != nil {
		return nil, nil, err
	}
	config := filepath.Join(dir, "repository.config")
	if err := repo.Connect(ctx, config, st, password, &repo.ConnectOptions{ClientOptions: repo.ClientOptions{Hostname: "default", Username: "default"}}); err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("connecting to the repository: %w", err)
	}
	r, err := repo.Open(ctx, config, password, &repo.Options{OnFatalError: func(error) {}})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("opening the repository: %w", err)
	}
	return r, func() { _ = r.Close(context.WithoutCancel(ctx)); _ = os.RemoveAll(dir) }, nil
}
