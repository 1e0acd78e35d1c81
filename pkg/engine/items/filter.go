// Package items holds what backups and restores share: the cluster's
// resources as discovery reports them (Source), Velero's rules for which
// namespaces, resources and items a backup or restore takes (Filter), and
// a run's own log and results (Log).
package items

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

// ExcludeLabel on an item keeps it out of every backup (Velero's
// velero.io/exclude-from-backup=true).
const ExcludeLabel = "velero.io/exclude-from-backup"

// Resource is an API resource of the source cluster, in its preferred version.
type Resource struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Singular   string
	ShortNames []string
	Namespaced bool
}

// GroupResource is the name Velero files the resource under:
// "<resource>.<group>", or "<resource>" in the core group.
func (r Resource) GroupResource() string { return r.GVR.GroupResource().String() }

// names are what a user may call the resource in a filter.
func (r Resource) names() []string {
	n := append([]string{r.GVR.Resource, r.Singular, strings.ToLower(r.Kind)}, r.ShortNames...)
	out := n[:0]
	for _, s := range n {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// globSet is a set of patterns (path.Match syntax: *, ?, [...], \).
// Plain names are looked up in a set and only the others matched one by
// one: a backup of a thousand named namespaces checks an item's namespace
// once, not against each name.
type globSet struct {
	patterns []string // as written
	literal  map[string]bool
	globs    []string
}

func newGlobSet(patterns []string) globSet {
	g := globSet{patterns: patterns, literal: make(map[string]bool, len(patterns))}
	for _, p := range patterns {
		if strings.ContainsAny(p, `*?[\`) {
			g.globs = append(g.globs, p)
		} else {
			g.literal[p] = true
		}
	}
	return g
}

// has reports whether s is one of the patterns as written.
func (g globSet) has(s string) bool { return g.literal[s] || slices.Contains(g.globs, s) }

func (g globSet) match(s string) bool {
	if g.literal[s] {
		return true
	}
	for _, p := range g.globs {
		if ok, err := path.Match(p, s); err == nil && ok {
			return true
		}
	}
	return false
}

// includesExcludes is Velero's IncludesExcludes: excludes win; no
// includes (or "*") includes everything.
type includesExcludes struct{ includes, excludes globSet }

func newIncludesExcludes(includes, excludes []string) includesExcludes {
	return includesExcludes{newGlobSet(includes), newGlobSet(excludes)}
}

func (ie includesExcludes) shouldInclude(s string) bool {
	if ie.excludes.match(s) {
		return false
	}
	return len(ie.includes.patterns) == 0 || ie.includes.has("*") || ie.includes.match(s)
}

func (ie includesExcludes) everything() bool {
	in := ie.includes.patterns
	return len(ie.excludes.patterns) == 0 && (len(in) == 0 || (len(in) == 1 && in[0] == "*"))
}

// Filter decides which namespaces, resources and items a backup takes,
// with Velero's rules (pkg/util/collections in Velero).
type Filter struct {
	namespaces includesExcludes
	// Old-style filters (includedResources, ...).
	resources      includesExcludes
	includeCluster *bool
	// New-style filters (included{Cluster,Namespace}ScopedResources, ...).
	scoped                    bool
	namespacedRes, clusterRes includesExcludes
	selectors                 []labels.Selector
}

// NewFilter compiles a backup's filters; resource names are resolved
// against the source's resources (plural, singular, kind or short name,
// with or without the group).
func NewFilter(spec *velerov1.BackupSpec, resources []Resource) (*Filter, error) {
	f := &Filter{
		namespaces:     newIncludesExcludes(spec.IncludedNamespaces, spec.ExcludedNamespaces),
		includeCluster: spec.IncludeClusterResources,
	}
	resolveAll := func(in []string, scope func(Resource) bool) []string {
		var out []string
		for _, p := range in {
			if r := resolve(p, resources, scope); r != "" {
				out = append(out, r)
			}
		}
		return out
	}
	any := func(Resource) bool { return true }
	f.resources = newIncludesExcludes(resolveAll(spec.IncludedResources, any), resolveAll(spec.ExcludedResources, any))
	f.scoped = len(spec.IncludedClusterScopedResources)+len(spec.ExcludedClusterScopedResources)+
		len(spec.IncludedNamespaceScopedResources)+len(spec.ExcludedNamespaceScopedResources) > 0
	namespaced := func(r Resource) bool { return r.Namespaced }
	cluster := func(r Resource) bool { return !r.Namespaced }
	f.namespacedRes = newIncludesExcludes(resolveAll(spec.IncludedNamespaceScopedResources, namespaced), resolveAll(spec.ExcludedNamespaceScopedResources, namespaced))
	f.clusterRes = newIncludesExcludes(resolveAll(spec.IncludedClusterScopedResources, cluster), resolveAll(spec.ExcludedClusterScopedResources, cluster))

	var selectors []*metav1.LabelSelector
	if spec.LabelSelector != nil {
		selectors = append(selectors, spec.LabelSelector)
	}
	selectors = append(selectors, spec.OrLabelSelectors...)
	for i, ls := range selectors {
		s, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			return nil, fmt.Errorf("label selector %d: %w", i, err)
		}
		f.selectors = append(f.selectors, s)
	}
	return f, nil
}

// resolve maps a filter entry to the GroupResource it names ("" when it
// names a resource of the other scope); globs and unknown names are kept
// as written, as Velero does.
func resolve(pattern string, resources []Resource, scope func(Resource) bool) string {
	if pattern == "*" || strings.ContainsAny(pattern, "*?[") {
		return pattern
	}
	p := strings.ToLower(pattern)
	for _, r := range resources {
		for _, n := range r.names() {
			if p == n || (r.GVR.Group != "" && p == n+"."+r.GVR.Group) {
				if !scope(r) {
					return ""
				}
				return r.GroupResource()
			}
		}
	}
	return pattern
}

// IncludesNamespace reports whether items of namespace ns are taken.
func (f *Filter) IncludesNamespace(ns string) bool { return f.namespaces.shouldInclude(ns) }

// AllNamespaces reports whether the backup takes every namespace.
func (f *Filter) AllNamespaces() bool { return f.namespaces.everything() }

// LiteralNamespaces returns the included namespaces, sorted, when they are
// plain names (no glob): then only they need listing.
func (f *Filter) LiteralNamespaces() ([]string, bool) {
	if len(f.namespaces.includes.patterns) == 0 {
		return nil, false
	}
	var out []string
	for _, n := range f.namespaces.includes.patterns {
		if strings.ContainsAny(n, "*?[") {
			return nil, false
		}
		if f.namespaces.shouldInclude(n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, true
}

// isNamespaces: the namespaces resource itself is filtered by namespace.
func IsNamespaces(r Resource) bool { return r.GVR.Group == "" && r.GVR.Resource == "namespaces" }

// IncludesResource reports whether a resource is backed up.
func (f *Filter) IncludesResource(r Resource) bool {
	gr := r.GroupResource()
	if f.scoped {
		if r.Namespaced {
			return f.namespacedRes.shouldInclude(gr)
		}
		if f.clusterRes.excludes.has("*") || f.clusterRes.excludes.match(gr) {
			return false
		}
		if len(f.clusterRes.includes.patterns) == 0 && len(f.clusterRes.excludes.patterns) == 0 && f.namespaces.everything() && f.namespacedRes.everything() {
			return true
		}
		return f.clusterRes.includes.has("*") || f.clusterRes.includes.match(gr) || IsNamespaces(r)
	}
	if !r.Namespaced && f.includeCluster != nil && !*f.includeCluster && !IsNamespaces(r) {
		return false
	}
	if !r.Namespaced && f.includeCluster == nil && !IsNamespaces(r) && !f.namespaces.everything() {
		return false
	}
	return f.resources.shouldInclude(gr)
}

// IncludesRelated reports whether a cluster-scoped resource that the
// filter does not take by itself (IncludesResource) is taken for the items
// related to backed-up namespaced ones, as Velero's additional items: a
// claim's volume, a custom resource's definition, the cluster role
// bindings of a service account. It is unless includeClusterResources is
// false or the resource filters leave it out.
func (f *Filter) IncludesRelated(r Resource) bool {
	gr := r.GroupResource()
	if r.Namespaced || f.IncludesResource(r) {
		return false
	}
	if f.scoped {
		return !f.clusterRes.excludes.has("*") && !f.clusterRes.excludes.match(gr)
	}
	if f.includeCluster != nil && !*f.includeCluster {
		return false
	}
	return f.resources.shouldInclude(gr)
}

// IncludesItem reports whether an item (of an included resource and
// namespace) is taken: its labels match a selector (any of them, when
// several) and it is not labelled velero.io/exclude-from-backup=true.
func (f *Filter) IncludesItem(itemLabels map[string]string) bool {
	if itemLabels[ExcludeLabel] == "true" {
		return false
	}
	if len(f.selectors) == 0 {
		return true
	}
	set := labels.Set(itemLabels)
	for _, s := range f.selectors {
		if s.Matches(set) {
			return true
		}
	}
	return false
}

// ServerSelector is the label selector the source can apply itself (only
// when there is exactly one), "" otherwise.
func (f *Filter) ServerSelector() string {
	if len(f.selectors) == 1 {
		return f.selectors[0].String()
	}
	return ""
}

// ScopeOf is the results scope of a resource's items: "" for namespaced
// ones (filed under their namespace), ScopeCluster otherwise.
func ScopeOf(r Resource) string {
	if r.Namespaced {
		return ""
	}
	return ScopeCluster
}
