package kopiarepo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/repo/blob"
	"github.com/kopia/kopia/repo/format"
	"github.com/kopia/kopia/repo/maintenance"
)

// MarkerBlob is Velero's record, beside kopia's format blob, that a
// repository is set up for it (the repository's unique ID): without it,
// Velero sets the repository up again when it connects.
const MarkerBlob blob.ID = "udmrepo.Repository"

// marker is MarkerBlob's JSON.
type marker struct {
	UniqueID []byte `json:"uniqueID"`
}

// setUpForVelero does what Velero does once to a repository it creates:
// kopia's default maintenance parameters owned by the clients' identity
// (default@default: only the owner may run maintenance), then MarkerBlob.
// A repository that has the marker is left as it is.
func setUpForVelero(ctx context.Context, st blob.Storage, rep repo.Repository) error {
	_, err := st.GetMetadata(ctx, MarkerBlob)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, blob.ErrBlobNotFound):
		return fmt.Errorf("reading %s: %w", MarkerBlob, err)
	}
	params, err := maintenance.GetParams(ctx, rep)
	if err != nil {
		return fmt.Errorf("reading the maintenance parameters: %w", err)
	}
	if owner := rep.ClientOptions().UsernameAtHost(); params.Owner != owner {
		p := maintenance.DefaultParams()
		p.Owner = owner
		err := repo.WriteSession(ctx, rep, repo.WriteSessionOptions{Purpose: "set init parameters"}, func(ctx context.Context, w repo.RepositoryWriter) error {
			return maintenance.SetParams(ctx, w, &p)
		})
		if err != nil {
			return fmt.Errorf("setting the maintenance parameters: %w", err)
		}
	}
	var formatBlob blobBuffer
	if err := st.GetBlob(ctx, format.KopiaRepositoryBlobID, 0, -1, &formatBlob); err != nil {
		return fmt.Errorf("reading the repository's format: %w", err)
	}
	f, err := format.ParseKopiaRepositoryJSON(formatBlob.Bytes())
	if err != nil {
		return fmt.Errorf("reading the repository's format: %w", err)
	}
	data, err := json.Marshal(marker{UniqueID: f.UniqueID})
	if err != nil {
		return err
	}
	if err := st.PutBlob(ctx, MarkerBlob, blobBytes(data), blob.PutOptions{}); err != nil {
		return fmt.Errorf("writing %s: %w", MarkerBlob, err)
	}
	return nil
}

// blobBytes is a blob's content to put (blob.Bytes).
type blobBytes []byte

func (b blobBytes) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(b)
	return int64(n), err
}
func (b blobBytes) Length() int               { return len(b) }
func (b blobBytes) Reader() io.ReadSeekCloser { return readSeekNopCloser{bytes.NewReader(b)} }

type readSeekNopCloser struct{ *bytes.Reader }

func (readSeekNopCloser) Close() error { return nil }

// blobBuffer receives a blob's content (blob.OutputBuffer).
type blobBuffer struct{ bytes.Buffer }

func (b *blobBuffer) Length() int { return b.Len() }
