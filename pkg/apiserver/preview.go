package apiserver

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapiserver "k8s.io/apiserver/pkg/server"
	restclient "k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	restoreengine "github.com/backstop-io/backstop/pkg/engine/restore"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	restoreregistry "github.com/backstop-io/backstop/pkg/registry/velero/restore"
)

// RestorePreviewHookName is the post-start hook that lets restores be
// previewed (kubectl create --dry-run=server).
const RestorePreviewHookName = "backstop-restore-preview"

// restorePreviewHook gives the restores' storage its previewer once the
// server runs: the restore engine's preview (on every replica, whether it
// runs the engines or not), with this server's loopback client, reading
// the backups and locations of the restore's namespace once per preview.
func (c CompletedConfig) restorePreviewHook(storage *restoreregistry.PreviewREST) genericapiserver.PostStartHookFunc {
	return func(hookCtx genericapiserver.PostStartHookContext) error {
		preview, err := c.restorePreview(hookCtx.LoopbackClientConfig)
		if err != nil {
			return err
		}
		storage.SetPreview(preview)
		return nil
	}
}

func (c CompletedConfig) restorePreview(loopback *restclient.Config) (restoreregistry.PreviewFunc, error) {
	client, err := versioned.NewForConfig(c.engineClientConfig(loopback))
	if err != nil {
		return nil, fmt.Errorf("restore preview client: %w", err)
	}
	target, err := c.restoreTarget(loopback)
	if err != nil {
		return nil, err
	}
	scratch, err := c.scratchDir("preview")
	if err != nil {
		return nil, err
	}
	cfg := restoreengine.Config{Client: client, Target: target, TargetAs: c.targetAs(loopback), Opener: c.extra.Opener,
		Clock: clock.RealClock{}, ScratchDir: scratch, ScratchBudget: c.scratchBudget, ItemWorkers: c.extra.RestoreItemWorkers, Limits: c.extra.RestoreLimits}
	scheme := c.extra.Scheme
	return func(ctx context.Context, r *velero.Restore) (*velero.RestorePreview, error) {
		var restore velerov1.Restore
		if err := scheme.Convert(r, &restore, nil); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		backups, locations, err := restoreengine.ListersOnce(ctx, cfg, r.Namespace)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		p, err := restoreengine.NewPreviewer(cfg, backups, locations).Preview(ctx, &restore)
		if err != nil {
			return nil, previewError(ctx, r, err)
		}
		var out velero.RestorePreview
		if err := scheme.Convert(p, &out, nil); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		return &out, nil
	}, nil
}

// previewError is the answer to a preview that failed: what keeps the
// restore from running is a 422, as its FailedValidation would say it; a
// preview past the request's time says how to run it instead.
func previewError(ctx context.Context, r *velero.Restore, err error) error {
	switch {
	case errors.Is(err, restoreengine.ErrInvalid):
		return apierrors.NewInvalid(velero.Kind("Restore"), r.Name, field.ErrorList{field.Invalid(field.NewPath("spec"), r.Spec.BackupName, err.Error())})
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return apierrors.NewTimeoutError(fmt.Sprintf("the preview of restore %s did not finish within the request's time (%v): "+
			"create the Restore with spec.preview: true to run the preview as a restore", r.Name, err), 0)
	default:
		return apierrors.NewInternalError(fmt.Errorf("previewing the restore: %w", err))
	}
}
