package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	restoreengine "github.com/backstop-io/backstop/pkg/engine/restore"
)

// TestPreviewError: a preview's failure answers as the client should read
// it: invalid (422), past the request's time (504, saying spec.preview),
// or the server's own (500).
func TestPreviewError(t *testing.T) {
	r := &velero.Restore{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Spec: velero.RestoreSpec{BackupName: "b"}}
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		is   func(error) bool
		says string
	}{
		{"invalid", context.Background(), fmt.Errorf("%w: backup \"b\": not found", restoreengine.ErrInvalid), apierrors.IsInvalid, `backup "b": not found`},
		{"the request's time is up", expired, fmt.Errorf("reading the tarball: %w", context.Canceled), apierrors.IsTimeout, "spec.preview: true"},
		{"a deadline below", context.Background(), fmt.Errorf("listing: %w", context.DeadlineExceeded), apierrors.IsTimeout, "spec.preview: true"},
		{"the server's", context.Background(), errors.New("disk full"), apierrors.IsInternalError, "disk full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := previewError(tc.ctx, r, tc.err)
			if !tc.is(err) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%v", err)
			}
		})
	}
}
