package nonadmin

import (
	"context"
	"errors"

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

// createFor creates the admin-side object made for a tenant object. One of
// its name that exists already (made before a restart: its name is the
// NACUUID recorded first) is taken only when existing finds it made for
// that tenant object (owned); another's is never taken, whatever its name.
func createFor[A comparable](ctx context.Context, create func(context.Context) (A, error), existing func(context.Context) (A, error)) (A, error) {
	var none A
	made, err := create(ctx)
	if apierrors.IsAlreadyExists(err) {
		if made, err = existing(ctx); err == nil && made == none {
			err = errMadeForAnother
		}
	}
	if err != nil {
		return none, err
	}
	return made, nil
}

// errMadeForAnother: an admin-side object of the name exists, made for
// another tenant object.
var errMadeForAnother = errors.New("one of its name exists, made for another")
