package authz

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/backstop-io/backstop/artifacts"
)

const (
	aggregateToAdmin = "rbac.authorization.k8s.io/aggregate-to-admin"
	aggregateToEdit  = "rbac.authorization.k8s.io/aggregate-to-edit"
	aggregateToView  = "rbac.authorization.k8s.io/aggregate-to-view"
)

var served = sets.New("velero.io", "oadp.openshift.io", "backup.kubevirt.io",
	"rbac.authorization.k8s.io", "authorization.k8s.io", "authentication.k8s.io")

// TestShippedClusterRoles: the roles in artifacts/deploy carry the
// aggregation labels where they belong, never grant a status write, and
// keep velero.io out of the namespace roles.
func TestShippedClusterRoles(t *testing.T) {
	roles, err := DecodeClusterRoles(artifacts.ClusterRoles)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]rbacv1.ClusterRole{}
	for _, r := range roles {
		byName[r.Name] = r
		if r.Annotations["rbac.authorization.kubernetes.io/autoupdate"] != "true" {
			t.Errorf("%s is not reconciled at start (autoupdate annotation)", r.Name)
		}
		aggregated := r.Labels[aggregateToAdmin] == "true" || r.Labels[aggregateToEdit] == "true" || r.Labels[aggregateToView] == "true"
		for _, rule := range r.Rules {
			for _, res := range rule.Resources {
				if strings.HasSuffix(res, "/status") && hasAny(rule.Verbs, "create", "update", "patch", "delete", "*") {
					t.Errorf("%s grants %v on %s: status is the engines'", r.Name, rule.Verbs, res)
				}
			}
			if aggregated && hasAny(rule.APIGroups, "velero.io", "*") {
				t.Errorf("%s aggregates into the namespace roles with %v", r.Name, rule.APIGroups)
			}
			if r.Labels[aggregateToView] == "true" && !sets.New("get", "list", "watch").IsSuperset(sets.New(rule.Verbs...)) {
				t.Errorf("%s aggregates into view with verbs %v, not only reads", r.Name, rule.Verbs)
			}
		}
	}
	for _, c := range []struct {
		name, label, group, resource string
	}{
		{"backstop:tenant:edit", aggregateToEdit, "oadp.openshift.io", "nonadminbackups"},
		{"backstop:tenant:view", aggregateToView, "oadp.openshift.io", "nonadminrestores"},
		{"backstop:kubevirt-backup:edit", aggregateToEdit, "backup.kubevirt.io", "virtualmachinebackups/cancel"},
		{"backstop:kubevirt-backup:view", aggregateToView, "backup.kubevirt.io", "virtualmachinebackuptrackers"},
		{"backstop:velero-admin", "", "velero.io", "*"},
		{"backstop:console:view", aggregateToView, "console.backstop.io", "consoles/static"},
	} {
		r, ok := byName[c.name]
		if !ok {
			t.Errorf("%s is not shipped", c.name)
			continue
		}
		if c.label == "" && len(r.Labels) != 0 || c.label != "" && r.Labels[c.label] != "true" {
			t.Errorf("%s labels %v, want only %q", c.name, r.Labels, c.label)
		}
		if !grants(r.Rules, c.group, c.resource) {
			t.Errorf("%s does not grant %s in %s", c.name, c.resource, c.group)
		}
	}
}

// TestDefaultPolicy: kube's roles a standalone server needs, bound as kube
// binds them, with the aggregated kube rules narrowed to the served groups.
func TestDefaultPolicy(t *testing.T) {
	p, err := DefaultPolicy(artifacts.ClusterRoles, served)
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]rbacv1.ClusterRole{}
	for _, r := range p.ClusterRoles {
		roles[r.Name] = r
	}
	for _, name := range append(kubeClusterRoles, "backstop:tenant:edit", "backstop:velero-admin") {
		if _, ok := roles[name]; !ok {
			t.Errorf("the policy has no ClusterRole %s", name)
		}
	}
	for _, name := range []string{"admin", "edit", "view"} {
		if roles[name].AggregationRule == nil {
			t.Errorf("%s is not aggregated", name)
		}
	}
	if !grants(roles["system:aggregate-to-admin"].Rules, "rbac.authorization.k8s.io", "rolebindings") {
		t.Errorf("admin would not let a namespace owner bind roles: %+v", roles["system:aggregate-to-admin"].Rules)
	}
	for _, name := range []string{"system:aggregate-to-admin", "system:aggregate-to-edit", "system:aggregate-to-view"} {
		for _, rule := range roles[name].Rules {
			if !served.HasAll(rule.APIGroups...) {
				t.Errorf("%s keeps a rule for a group the server does not serve: %+v", name, rule)
			}
		}
	}
	subjects := map[string]string{}
	for _, b := range p.ClusterRoleBindings {
		for _, s := range b.Subjects {
			subjects[b.Name] += s.Name + ","
		}
	}
	for binding, want := range map[string]string{
		"cluster-admin":             "system:masters,",
		"system:discovery":          "system:authenticated,",
		"system:basic-user":         "system:authenticated,",
		"system:public-info-viewer": "system:authenticated,system:unauthenticated,",
		"system:monitoring":         "system:monitoring,",
	} {
		if subjects[binding] != want {
			t.Errorf("binding %s subjects %q, want %q", binding, subjects[binding], want)
		}
	}
}

func TestDecodeClusterRolesRefusesOtherKinds(t *testing.T) {
	for _, manifest := range []string{
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: x}\n",
		"apiVersion: rbac.authorization.k8s.io/v1beta1\nkind: ClusterRole\nmetadata: {name: x}\n",
		"kind: ClusterRole\nrules: {not: a list}\n",
	} {
		if _, err := DecodeClusterRoles([]byte(manifest)); err == nil {
			t.Errorf("decoded %q without an error", manifest)
		}
	}
}

func grants(rules []rbacv1.PolicyRule, group, resource string) bool {
	for _, r := range rules {
		if hasAny(r.APIGroups, group) && hasAny(r.Resources, resource) {
			return true
		}
	}
	return false
}

func hasAny(list []string, want ...string) bool {
	return sets.New(list...).HasAny(want...)
}
