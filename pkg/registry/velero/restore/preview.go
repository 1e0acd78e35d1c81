package restore

import (
	"context"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/util/dryrun"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// PreviewFunc says what a restore would do, writing nothing (the restore
// engine's preview, pkg/engine/restore). An error the restore's own
// validation would give is an apierrors Invalid.
type PreviewFunc func(ctx context.Context, r *velero.Restore) (*velero.RestorePreview, error)

// PreviewREST is the restores' storage whose create with dryRun (kubectl
// create --dry-run=server) answers with the restore's preview in
// status.preview: the restore validated and defaulted as any create, not
// stored, and previewed against the target cluster, which takes every
// write as a server-side dry run.
type PreviewREST struct {
	*resource.DecoratedREST
	preview atomic.Pointer[PreviewFunc]
}

// SetPreview sets the previewer (the server sets it once it has started:
// it reads the API through its loopback client).
func (r *PreviewREST) SetPreview(f PreviewFunc) { r.preview.Store(&f) }

// Create creates the restore; with dryRun it answers with its preview.
func (r *PreviewREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	out, err := r.DecoratedREST.Create(ctx, obj, createValidation, options)
	if err != nil || !dryrun.IsDryRun(options.DryRun) {
		return out, err
	}
	preview := r.preview.Load()
	if preview == nil {
		return nil, apierrors.NewServiceUnavailable("restore previews start with the server: try again")
	}
	restore := out.(*velero.Restore)
	p, err := (*preview)(ctx, restore)
	if err != nil {
		return nil, err
	}
	restore.Status.Preview = p
	return restore, nil
}
