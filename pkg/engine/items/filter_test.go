package items

import (
	"fmt"
	"path"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

var (
	pods        = Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Kind: "Pod", Singular: "pod", ShortNames: []string{"po"}, Namespaced: true}
	namespaces  = Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, Kind: "Namespace", Singular: "namespace", ShortNames: []string{"ns"}}
	nodes       = Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, Kind: "Node", Singular: "node"}
	deployments = Resource{GVR: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Kind: "Deployment", Singular: "deployment", ShortNames: []string{"deploy"}, Namespaced: true}
	crbs        = Resource{GVR: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}, Kind: "ClusterRoleBinding"}
	all         = []Resource{pods, namespaces, nodes, deployments, crbs}
)

func TestFilterResources(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		name string
		spec velerov1.BackupSpec
		want []Resource
	}{
		{"everything", velerov1.BackupSpec{}, all},
		{"some namespaces: cluster-scoped only namespaces", velerov1.BackupSpec{IncludedNamespaces: []string{"a"}}, []Resource{pods, namespaces, deployments}},
		{"some namespaces, cluster resources on", velerov1.BackupSpec{IncludedNamespaces: []string{"a"}, IncludeClusterResources: &yes}, all},
		{"all namespaces, cluster resources off", velerov1.BackupSpec{IncludeClusterResources: &no}, []Resource{pods, namespaces, deployments}},
		{"include by short name and kind", velerov1.BackupSpec{IncludedResources: []string{"po", "Deployment.apps"}}, []Resource{pods, deployments}},
		{"exclude by group-qualified name", velerov1.BackupSpec{ExcludedResources: []string{"deployments.apps", "nodes"}}, []Resource{pods, namespaces, crbs}},
		{"include glob", velerov1.BackupSpec{IncludedResources: []string{"*.rbac.authorization.k8s.io"}}, []Resource{crbs}},
		{"wrong group does not match", velerov1.BackupSpec{IncludedResources: []string{"deployments.extensions"}}, nil},
		{"scoped: namespaced only", velerov1.BackupSpec{IncludedNamespaceScopedResources: []string{"pods"}}, []Resource{pods, namespaces}},
		{"scoped: cluster includes", velerov1.BackupSpec{IncludedClusterScopedResources: []string{"nodes"}, IncludedNamespaceScopedResources: []string{"*"}}, []Resource{pods, namespaces, nodes, deployments}},
		{"scoped: cluster excluded", velerov1.BackupSpec{ExcludedClusterScopedResources: []string{"*"}}, []Resource{pods, deployments}},
		{"scoped: a namespaced name in the cluster list is ignored", velerov1.BackupSpec{IncludedClusterScopedResources: []string{"pods"}, ExcludedNamespaceScopedResources: []string{"deployments"}}, []Resource{pods, namespaces}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := NewFilter(&c.spec, all)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range all {
				if f.IncludesResource(r) {
					got = append(got, r.GroupResource())
				}
			}
			var want []string
			for _, r := range c.want {
				want = append(want, r.GroupResource())
			}
			if len(got) != len(want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("got %v, want %v", got, want)
				}
			}
		})
	}
}

func TestFilterNamespacesAndItems(t *testing.T) {
	f, err := NewFilter(&velerov1.BackupSpec{
		IncludedNamespaces: []string{"shop", "sh?p2", "web"},
		ExcludedNamespaces: []string{"web"},
		OrLabelSelectors:   []*metav1.LabelSelector{{MatchLabels: map[string]string{"app": "a"}}, {MatchLabels: map[string]string{"app": "b"}}},
	}, all)
	if err != nil {
		t.Fatal(err)
	}
	for ns, want := range map[string]bool{"shop": true, "shop2": true, "web": false, "other": false} {
		if got := f.IncludesNamespace(ns); got != want {
			t.Errorf("namespace %s: %v, want %v", ns, got, want)
		}
	}
	if _, literal := f.LiteralNamespaces(); literal {
		t.Error("a glob among the includes still listed namespace by namespace")
	}
	for _, c := range []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{"app": "a"}, true},
		{map[string]string{"app": "b"}, true},
		{map[string]string{"app": "c"}, false},
		{nil, false},
		{map[string]string{"app": "a", ExcludeLabel: "true"}, false},
	} {
		if got := f.IncludesItem(c.labels); got != c.want {
			t.Errorf("item labelled %v: %v, want %v", c.labels, got, c.want)
		}
	}
	if f.ServerSelector() != "" {
		t.Error("two OR-ed selectors were sent to the server as one")
	}

	lit, err := NewFilter(&velerov1.BackupSpec{IncludedNamespaces: []string{"b", "a", "c"}, ExcludedNamespaces: []string{"c"},
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}}, all)
	if err != nil {
		t.Fatal(err)
	}
	if names, ok := lit.LiteralNamespaces(); !ok || len(names) != 2 || names[0] != "a" || names[1] != "b" {
		t.Errorf("literal namespaces %v %v, want [a b]", names, ok)
	}
	if lit.ServerSelector() != "x=y" {
		t.Errorf("server selector %q", lit.ServerSelector())
	}
	if lit.IncludesItem(map[string]string{"x": "y", ExcludeLabel: "true"}) {
		t.Error("an item labelled velero.io/exclude-from-backup=true was taken")
	}
	if _, err := NewFilter(&velerov1.BackupSpec{LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}}, all); err == nil {
		t.Error("a bad label selector was accepted")
	}
}

// TestFilterRelated: which cluster-scoped resources a backup takes only as
// items related to its namespaced ones.
func TestFilterRelated(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		name string
		spec velerov1.BackupSpec
		want []Resource
	}{
		{"some namespaces: related cluster items", velerov1.BackupSpec{IncludedNamespaces: []string{"a"}}, []Resource{nodes, crbs}},
		{"cluster resources off: none", velerov1.BackupSpec{IncludedNamespaces: []string{"a"}, IncludeClusterResources: &no}, nil},
		{"cluster resources on: all taken by themselves", velerov1.BackupSpec{IncludedNamespaces: []string{"a"}, IncludeClusterResources: &yes}, nil},
		{"everything: all taken by themselves", velerov1.BackupSpec{}, nil},
		{"excluded resource: not related either", velerov1.BackupSpec{IncludedNamespaces: []string{"a"}, ExcludedResources: []string{"clusterrolebindings.rbac.authorization.k8s.io"}}, []Resource{nodes}},
		{"included resources without it", velerov1.BackupSpec{IncludedNamespaces: []string{"a"}, IncludedResources: []string{"pods"}}, nil},
		{"scoped: cluster-scoped excluded", velerov1.BackupSpec{IncludedNamespaces: []string{"a"}, ExcludedClusterScopedResources: []string{"*"}}, nil},
		{"scoped: one cluster-scoped excluded", velerov1.BackupSpec{IncludedNamespaces: []string{"a"}, ExcludedClusterScopedResources: []string{"nodes"}, IncludedNamespaceScopedResources: []string{"pods"}}, []Resource{crbs}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := NewFilter(&c.spec, all)
			if err != nil {
				t.Fatal(err)
			}
			var got, want []string
			for _, r := range all {
				if f.IncludesRelated(r) {
					got = append(got, r.GroupResource())
				}
			}
			for _, r := range c.want {
				want = append(want, r.GroupResource())
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

// TestGlobSet: plain names and globs in one set match as path.Match
// over each pattern would.
func TestGlobSet(t *testing.T) {
	g := newGlobSet([]string{"app", "db-*", "x?z", `lit\*`, "[ab]c", "*.rbac.authorization.k8s.io"})
	for s, want := range map[string]bool{
		"app": true, "apps": false, "db-1": true, "db": false, "xyz": true, "xz": false, "lit*": true, "litx": false,
		"ac": true, "cc": false, "clusterroles.rbac.authorization.k8s.io": true, "": false,
	} {
		if got := g.match(s); got != want {
			t.Errorf("match(%q) = %v, want %v", s, got, want)
		}
		byPattern := false
		for _, p := range g.patterns {
			if ok, _ := path.Match(p, s); ok {
				byPattern = true
			}
		}
		if byPattern != want {
			t.Errorf("path.Match over the patterns says %v for %q: the table is wrong", byPattern, s)
		}
	}
	for s, want := range map[string]bool{"app": true, "db-*": true, "db-1": false, "*": false} {
		if got := g.has(s); got != want {
			t.Errorf("has(%q) = %v, want %v", s, got, want)
		}
	}
	if all := newGlobSet([]string{"*"}); !all.has("*") || !all.match("anything") {
		t.Error(`"*" is not in its set or does not match`)
	}
}

// BenchmarkIncludesNamespace: an item's namespace against a thousand
// named namespaces (the million-object benchmark's backup) costs a
// lookup, not a thousand matches.
func BenchmarkIncludesNamespace(b *testing.B) {
	var names []string
	for i := range 1000 {
		names = append(names, fmt.Sprintf("scale-%04d", i))
	}
	f, err := NewFilter(&velerov1.BackupSpec{IncludedNamespaces: names}, all)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		if !f.IncludesNamespace(names[i%len(names)]) {
			b.Fatal("a named namespace is not included")
		}
	}
}
