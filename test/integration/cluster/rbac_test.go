package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/backstop-io/backstop/test/integration/framework"
)

// The server's rights, as the chart grants them, reviewed: every verb on
// every resource its ServiceAccount (backstop-apiserver) can reach, and
// what it reaches through the identities it may impersonate (the restore
// identity, backstop-restorer), one line each. A change of the chart that
// grants more fails TestChartRBAC until the line is reviewed and added
// here; one that grants less, until it is taken out.
const reviewedRBAC = "testdata/rbac-reviewed.txt"

// rbacGrant is one verb on one resource, for one subject, in one scope.
type rbacGrant struct {
	subject, scope, verb, target string
}

func (g rbacGrant) String() string {
	return fmt.Sprintf("%s %s %s %s", g.subject, g.scope, g.verb, g.target)
}

// chartGrants renders the chart with values and lists what the server's
// accounts are granted.
func chartGrants(t *testing.T, values ...string) []string {
	t.Helper()
	args := []string{"template", "backstop", framework.ChartDir(t), "--namespace", "backstop-system"}
	for _, v := range values {
		args = append(args, "--set", v)
	}
	cmd := exec.Command(framework.Binary(t, "helm"), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	roles := map[string][]any{} // kind/namespace/name → rules
	var bindings []*unstructured.Unstructured
	for _, o := range manifestObjects(t, string(out)) {
		switch o.GetKind() {
		case "ClusterRole", "Role":
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			roles[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = rules
		case "ClusterRoleBinding", "RoleBinding":
			bindings = append(bindings, o)
		}
	}
	accounts := map[string]string{"backstop-apiserver": "server", "backstop-restorer": "restorer"}
	seen := map[string]bool{}
	for _, b := range bindings {
		subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
		kind, _, _ := unstructured.NestedString(b.Object, "roleRef", "kind")
		name, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
		roleNS := ""
		if kind == "Role" {
			roleNS = b.GetNamespace()
		}
		rules, known := roles[kind+"/"+roleNS+"/"+name]
		scope := "cluster"
		if b.GetKind() == "RoleBinding" {
			scope = "namespace:" + b.GetNamespace()
		}
		for _, s := range subjects {
			sm, _ := s.(map[string]any)
			who, ok := accounts[fmt.Sprint(sm["name"])]
			if fmt.Sprint(sm["kind"]) != "ServiceAccount" || fmt.Sprint(sm["namespace"]) != "backstop-system" || !ok {
				continue
			}
			if !known {
				// A role of the cluster's own (system:auth-delegator, ...).
				seen[rbacGrant{who, scope, "role", kind + "/" + name}.String()] = true
				continue
			}
			for _, r := range rules {
				for _, g := range ruleGrants(r) {
					g.subject, g.scope = who, scope
					seen[g.String()] = true
				}
			}
		}
	}
	var lines []string
	for l := range seen {
		lines = append(lines, l)
	}
	sort.Strings(lines)
	return lines
}

// ruleGrants lists a rule's verbs on its resources (apiGroup/resource,
// /name when it names them; nonResourceURLs as url:<path>).
func ruleGrants(rule any) []rbacGrant {
	r, _ := rule.(map[string]any)
	list := func(key string) []string {
		var out []string
		items, _ := r[key].([]any)
		for _, i := range items {
			out = append(out, fmt.Sprint(i))
		}
		return out
	}
	var targets []string
	for _, u := range list("nonResourceURLs") {
		targets = append(targets, "url:"+u)
	}
	for _, g := range list("apiGroups") {
		for _, res := range list("resources") {
			t := g + "/" + res
			if g == "" {
				t = "core/" + res
			}
			if names := list("resourceNames"); len(names) > 0 {
				for _, n := range names {
					targets = append(targets, t+"/"+n)
				}
				continue
			}
			targets = append(targets, t)
		}
	}
	var out []rbacGrant
	for _, v := range list("verbs") {
		for _, t := range targets {
			out = append(out, rbacGrant{verb: v, target: t})
		}
	}
	return out
}

// TestChartRBAC: what the chart grants the server's accounts, by default,
// is exactly the reviewed list; the server itself holds no wildcard verb,
// no write on every resource, no bind or escalate, and no impersonation
// but the constrained kinds and its restore identity; the values that ask
// for more (restore.rbac, nonAdmin.legacyImpersonation) grant that and
// nothing else.
func TestChartRBAC(t *testing.T) {
	got := chartGrants(t)
	data, err := os.ReadFile(reviewedRBAC)
	if err != nil {
		t.Fatal(err)
	}
	var reviewed []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			reviewed = append(reviewed, l)
		}
	}
	t.Run("every grant reviewed", func(t *testing.T) {
		for _, l := range got {
			if !slices.Contains(reviewed, l) {
				t.Errorf("granted, not reviewed: %s", l)
			}
		}
		for _, l := range reviewed {
			if !slices.Contains(got, l) {
				t.Errorf("reviewed, no longer granted (take it out of %s): %s", reviewedRBAC, l)
			}
		}
		if t.Failed() {
			t.Logf("what the chart grants now:\n%s", strings.Join(got, "\n"))
		}
	})
	t.Run("the server's own account", func(t *testing.T) {
		for _, l := range got {
			f := strings.Fields(l)
			who, verb, target := f[0], f[2], f[3]
			if who != "server" {
				continue
			}
			switch {
			case verb == "*":
				t.Errorf("a wildcard verb: %s", l)
			case verb == "bind" || verb == "escalate":
				t.Errorf("bind or escalate: %s", l)
			case verb == "impersonate" && target != "core/serviceaccounts/backstop-restorer":
				t.Errorf("impersonation of anyone but the restore identity: %s", l)
			case (verb == "create" || verb == "update" || verb == "patch" || verb == "delete") && strings.HasSuffix(target, "/*"):
				t.Errorf("a write on every resource of a group: %s", l)
			}
		}
	})
	t.Run("what the values ask for, and nothing else", func(t *testing.T) {
		for _, tc := range []struct {
			values []string
			want   []string
		}{
			{[]string{"restore.rbac=true"}, []string{
				"restorer cluster bind rbac.authorization.k8s.io/clusterroles", "restorer cluster bind rbac.authorization.k8s.io/roles",
				"restorer cluster escalate rbac.authorization.k8s.io/clusterroles", "restorer cluster escalate rbac.authorization.k8s.io/roles"}},
			{[]string{"nonAdmin.legacyImpersonation=true"}, []string{
				"server cluster impersonate authentication.k8s.io/*", "server cluster impersonate core/groups",
				"server cluster impersonate core/serviceaccounts", "server cluster impersonate core/users"}},
			{[]string{"nonAdmin.restoreNamespaces={team-a}"}, []string{
				"server namespace:team-a impersonate-on:serviceaccount:create */*", "server namespace:team-a impersonate-on:serviceaccount:patch */*",
				"server namespace:team-a impersonate-on:serviceaccount:update */*", "server namespace:team-a impersonate-on:user-info:create */*",
				"server namespace:team-a impersonate-on:user-info:patch */*", "server namespace:team-a impersonate-on:user-info:update */*"}},
		} {
			var added []string
			for _, l := range chartGrants(t, tc.values...) {
				if !slices.Contains(got, l) {
					added = append(added, l)
				}
			}
			if !slices.Equal(added, tc.want) {
				t.Errorf("--set %v adds\n%s\nwant\n%s", tc.values, strings.Join(added, "\n"), strings.Join(tc.want, "\n"))
			}
		}
	})
}
