package resource

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// Counter counts a namespace's objects in a store made after the strategy
// that asks (NewREST sets Lister once the store exists): admission's
// per-namespace limits.
type Counter struct {
	Lister rest.Lister
}

// Count is how many objects namespace holds; 0 before the store is set.
func (c *Counter) Count(ctx context.Context, namespace string) (int, error) {
	if c == nil || c.Lister == nil {
		return 0, nil
	}
	list, err := c.Lister.List(genericrequest.WithNamespace(ctx, namespace), &metainternalversion.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("counting the objects of namespace %s: %w", namespace, err)
	}
	return meta.LenList(list), nil
}
