package nonadmin

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The steps every tenant mirror shares (a tenant's object in its namespace,
// the admin-side object made for it in the admin namespace, linked by the
// NACUUID label and the origin annotations).

// tenantOwns reports whether the tenant object namespace/name still owns
// the admin-side object an orphan loop looks at: asked of the lister, then,
// before "no" is believed, of the API (the lister may lag a write just
// made). An admin-side object is deleted as an orphan only on a "no" from
// both.
func tenantOwns[T any](ctx context.Context, fromLister func(namespace, name string) (T, error),
	fromAPI func(ctx context.Context, namespace, name string) (T, error), owns func(T) bool, namespace, name string) (bool, error) {
	if t, err := fromLister(namespace, name); err == nil && owns(t) {
		return true, nil
	}
	t, err := fromAPI(ctx, namespace, name)
	switch {
	case err == nil:
		return owns(t), nil
	case apierrors.IsNotFound(err):
		return false, nil
	default:
		return false, err
	}
}
