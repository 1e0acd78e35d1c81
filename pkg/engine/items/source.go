package items

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// Source is a cluster backups read from and restores write to.
type Source struct {
	Discovery discovery.DiscoveryInterface
	Dynamic   dynamic.Interface
	// Raw reads lists as the server's JSON (ListRaw); built from the same
	// config as Dynamic by NewRawClient. Nil: lists go through Dynamic.
	Raw rest.Interface
	// PageSize is the limit of each list request (Velero's --client-page-size).
	PageSize int64
}

// Resources returns the source's listable resources in their preferred
// versions, sorted by group and resource. Groups whose discovery fails
// are reported to warn and skipped.
func (s Source) Resources(warn func(group, msg string)) ([]Resource, error) {
	lists, err := s.Discovery.ServerPreferredResources()
	var failed *discovery.ErrGroupDiscoveryFailed
	if errors.As(err, &failed) {
		for gv, e := range failed.Groups {
			warn(gv.String(), e.Error())
		}
	} else if err != nil {
		return nil, fmt.Errorf("discovering the source's resources: %w", err)
	}
	var out []Resource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !hasVerbs(r.Verbs, "list", "get") {
				continue
			}
			out = append(out, Resource{GVR: gv.WithResource(r.Name), Kind: r.Kind, Singular: r.SingularName,
				ShortNames: r.ShortNames, Namespaced: r.Namespaced})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		// Namespaces first (a restore creates them before their contents),
		// then by group and resource.
		if IsNamespaces(a) != IsNamespaces(b) {
			return IsNamespaces(a)
		}
		if a.GVR.Group != b.GVR.Group {
			return a.GVR.Group < b.GVR.Group
		}
		return a.GVR.Resource < b.GVR.Resource
	})
	return out, nil
}

func hasVerbs(verbs metav1.Verbs, want ...string) bool {
	for _, w := range want {
		found := false
		for _, v := range verbs {
			if v == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Has reports whether the source has an object (namespace "" for a
// cluster-scoped one): false when it answers NotFound.
func (s Source) Has(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (bool, error) {
	var ri dynamic.ResourceInterface = s.Dynamic.Resource(gvr)
	if namespace != "" {
		ri = s.Dynamic.Resource(gvr).Namespace(namespace)
	}
	_, err := ri.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}
