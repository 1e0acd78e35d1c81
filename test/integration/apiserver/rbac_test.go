package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/backstop-io/backstop/test/integration/framework"
)

// canI asks kubectl auth can-i VERB TARGET as the user of kubeconfig;
// TARGET is what kubectl takes (resource, resource/name or a
// nonResourceURL); "resource#sub" asks about a subresource.
func canI(t *testing.T, s *framework.Server, kubeconfig, verb, target, namespace string) bool {
	t.Helper()
	args := []string{"auth", "can-i", verb}
	res, sub, _ := strings.Cut(target, "#")
	args = append(args, res)
	if sub != "" {
		args = append(args, "--subresource", sub)
	}
	if namespace != "" {
		args = append(args, "-n", namespace)
	}
	out, err := s.KubectlAs(kubeconfig, nil, args...)
	switch answer := strings.TrimSpace(out); {
	case answer == "yes":
		return true
	case answer == "no" || strings.HasPrefix(answer, "no - "):
		return false
	}
	t.Fatalf("kubectl %s: %q, %v", strings.Join(args, " "), out, err)
	return false
}

// kubectlOK runs kubectl as kubeconfig and fails the test on an error.
func kubectlOK(t *testing.T, s *framework.Server, kubeconfig string, stdin []byte, args ...string) string {
	t.Helper()
	out, err := s.KubectlAs(kubeconfig, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// forbidden tells a 403 of kubectl from other failures.
func forbidden(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "Forbidden") || strings.Contains(err.Error(), "forbidden"))
}

func rbacClient(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const vmbTracker = `apiVersion: backup.kubevirt.io/v1alpha1
kind: VirtualMachineBackupTracker
metadata:
  name: %s
  namespace: %s
spec:
  source:
    apiGroup: kubevirt.io
    kind: VirtualMachine
    name: vm1
`

// TestRBACKubectl gives users rights with kubectl and checks that every
// request is decided by them: namespaces, verbs, subresources,
// resourceNames, nonResourceURLs, whoami, and a can-i matrix that equals
// what the bound rules say.
func TestRBACKubectl(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	admin := s.KubeconfigPath
	alice := s.IssueKubeconfig("alice", "dev")
	bob := s.IssueKubeconfig("bob")

	t.Run("whoami", func(t *testing.T) {
		out := kubectlOK(t, s, alice, nil, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}")
		if out != `alice ["dev","system:authenticated"]` {
			t.Errorf("kubectl auth whoami: %q", out)
		}
	})

	t.Run("nothing-before-a-binding", func(t *testing.T) {
		if _, err := s.KubectlAs(alice, nil, "get", "virtualmachinebackuptrackers", "-n", "team-a"); !forbidden(err) {
			t.Errorf("alice listing trackers before any binding: %v, want Forbidden", err)
		}
		// Discovery is every authenticated user's (system:discovery).
		if out, err := s.KubectlAs(alice, nil, "api-resources", "--api-group", "backup.kubevirt.io", "-o", "name"); err != nil || !strings.Contains(out, "virtualmachinebackups") {
			t.Errorf("alice's discovery: %q, %v", out, err)
		}
	})

	t.Run("edit-in-own-namespace", func(t *testing.T) {
		kubectlOK(t, s, admin, nil, "create", "rolebinding", "alice-edit", "--clusterrole", "edit", "--user", "alice", "-n", "team-a")
		if out, err := s.KubectlAs(admin, nil, "get", "rolebinding", "alice-edit", "-n", "team-a", "-o", "wide", "--no-headers"); err != nil ||
			!strings.Contains(out, "ClusterRole/edit") || !strings.Contains(out, "alice") {
			t.Errorf("kubectl get rolebinding -o wide: %q, %v", out, err)
		}
		// The binding takes effect through the server's informers: poll.
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			_, err := s.KubectlAs(alice, []byte(fmt.Sprintf(vmbTracker, "t1", "team-a")), "create", "-f", "-")
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("alice creating a tracker in team-a after the binding: %v", err)
		}
		kubectlOK(t, s, alice, nil, "get", "virtualmachinebackuptrackers", "t1", "-n", "team-a")
		if _, err := s.KubectlAs(alice, []byte(fmt.Sprintf(vmbTracker, "t1", "team-b")), "create", "-f", "-"); !forbidden(err) {
			t.Errorf("alice creating a tracker in team-b: %v, want Forbidden", err)
		}
		if _, err := s.KubectlAs(alice, nil, "get", "virtualmachinebackuptrackers", "-A"); !forbidden(err) {
			t.Errorf("alice listing trackers in all namespaces: %v, want Forbidden", err)
		}
		// velero.io is the admin's: not in edit.
		if _, err := s.KubectlAs(alice, nil, "get", "backups.velero.io", "-n", "team-a"); !forbidden(err) {
			t.Errorf("alice listing velero backups: %v, want Forbidden", err)
		}
		kubectlOK(t, s, alice, nil, "delete", "virtualmachinebackuptrackers", "t1", "-n", "team-a")
	})

	t.Run("can-i-matrix", func(t *testing.T) {
		kubectlOK(t, s, admin, nil, "create", "role", "operator", "-n", "team-a",
			"--verb", "get,list,watch", "--resource", "virtualmachinebackups.backup.kubevirt.io")
		role := `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: canceller, namespace: team-a}
rules:
- apiGroups: [backup.kubevirt.io]
  resources: [virtualmachinebackups/cancel]
  verbs: [create]
- apiGroups: [backup.kubevirt.io]
  resources: [virtualmachinebackuptrackers]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: nab-writer}
rules:
- apiGroups: [oadp.openshift.io]
  resources: [nonadminbackups]
  verbs: [create, delete]
`
		kubectlOK(t, s, admin, []byte(role), "apply", "-f", "-")
		kubectlOK(t, s, admin, nil, "create", "rolebinding", "bob-operator", "--role", "operator", "--user", "bob", "-n", "team-a")
		kubectlOK(t, s, admin, nil, "create", "rolebinding", "bob-canceller", "--role", "canceller", "--user", "bob", "-n", "team-a")
		// A ClusterRole bound in one namespace grants there only.
		kubectlOK(t, s, admin, nil, "create", "rolebinding", "bob-nab", "--clusterrole", "nab-writer", "--user", "bob", "-n", "team-b")
		// What the rules above say, and nothing else.
		allowed := map[string]bool{
			"team-a get virtualmachinebackups":           true,
			"team-a list virtualmachinebackups":          true,
			"team-a create virtualmachinebackups#cancel": true,
			"team-a get virtualmachinebackuptrackers":    true,
			"team-b create nonadminbackups":              true,
			"team-b delete nonadminbackups":              true,
		}
		waitAllowed(t, s, bob, "delete", "nonadminbackups", "team-b")
		verbs := []string{"get", "list", "create", "update", "delete"}
		resources := []string{"virtualmachinebackups", "virtualmachinebackups#cancel", "virtualmachinebackups#status",
			"virtualmachinebackuptrackers", "nonadminbackups", "backups.velero.io", "rolebindings"}
		cells := 0
		for _, ns := range []string{"team-a", "team-b", "team-c"} {
			for _, verb := range verbs {
				for _, res := range resources {
					want := allowed[ns+" "+verb+" "+res]
					if got := canI(t, s, bob, verb, res, ns); got != want {
						t.Errorf("bob: can-i %s %s -n %s = %v, the rules say %v", verb, res, ns, got, want)
					}
					cells++
				}
			}
		}
		t.Logf("can-i matrix: %d cells", cells)
		// can-i --list (SelfSubjectRulesReview) shows the same rules.
		out := kubectlOK(t, s, bob, nil, "auth", "can-i", "--list", "-n", "team-a")
		for _, want := range []string{"virtualmachinebackups.backup.kubevirt.io/cancel", "virtualmachinebackuptrackers.backup.kubevirt.io", "[get list watch]"} {
			if !strings.Contains(out, want) {
				t.Errorf("bob's can-i --list in team-a lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "nonadminbackups") {
			t.Errorf("bob's can-i --list in team-a shows team-b's rules:\n%s", out)
		}
		// The cancel subresource is the rule's, not the main resource's.
		if _, err := s.KubectlAs(bob, nil, "create", "--raw", "/apis/backup.kubevirt.io/v1alpha1/namespaces/team-a/virtualmachinebackups/missing/cancel", "-f", "/dev/null"); forbidden(err) {
			t.Errorf("bob cancelling in team-a: %v, want past authorization", err)
		}
	})

	t.Run("resource-names", func(t *testing.T) {
		kubectlOK(t, s, admin, nil, "create", "role", "one-tracker", "-n", "team-c",
			"--verb", "get,delete", "--resource", "virtualmachinebackuptrackers.backup.kubevirt.io", "--resource-name", "mine")
		kubectlOK(t, s, admin, nil, "create", "rolebinding", "alice-one", "--role", "one-tracker", "--user", "alice", "-n", "team-c")
		for _, name := range []string{"mine", "theirs"} {
			kubectlOK(t, s, admin, []byte(fmt.Sprintf(vmbTracker, name, "team-c")), "create", "-f", "-")
		}
		waitAllowed(t, s, alice, "get", "virtualmachinebackuptrackers/mine", "team-c")
		if _, err := s.KubectlAs(alice, nil, "get", "virtualmachinebackuptrackers", "mine", "-n", "team-c"); err != nil {
			t.Errorf("alice getting the tracker her role names: %v", err)
		}
		if _, err := s.KubectlAs(alice, nil, "get", "virtualmachinebackuptrackers", "theirs", "-n", "team-c"); !forbidden(err) {
			t.Errorf("alice getting another tracker: %v, want Forbidden", err)
		}
		if _, err := s.KubectlAs(alice, nil, "get", "virtualmachinebackuptrackers", "-n", "team-c"); !forbidden(err) {
			t.Errorf("alice listing (resourceNames do not grant list): %v, want Forbidden", err)
		}
	})

	t.Run("non-resource-urls", func(t *testing.T) {
		carol := s.IssueKubeconfig("carol", "monitoring")
		dave := s.IssueKubeconfig("dave", "system:monitoring")
		if _, err := s.KubectlAs(carol, nil, "get", "--raw", "/metrics"); !forbidden(err) {
			t.Errorf("carol reading /metrics before a binding: %v, want Forbidden", err)
		}
		// kube's bootstrap binds system:monitoring to its group.
		if out, err := s.KubectlAs(dave, nil, "get", "--raw", "/metrics"); err != nil || !strings.Contains(out, "apiserver_request_total") {
			t.Errorf("a system:monitoring member reading /metrics: %v", err)
		}
		kubectlOK(t, s, admin, nil, "create", "clusterrole", "metrics-reader", "--verb", "get", "--non-resource-url", "/metrics")
		kubectlOK(t, s, admin, nil, "create", "clusterrolebinding", "monitoring-metrics", "--clusterrole", "metrics-reader", "--group", "monitoring")
		waitAllowed(t, s, carol, "get", "/metrics", "")
		if out, err := s.KubectlAs(carol, nil, "get", "--raw", "/metrics"); err != nil || !strings.Contains(out, "apiserver_request_total") {
			t.Errorf("carol reading /metrics after the binding: %v", err)
		}
		if _, err := s.KubectlAs(carol, nil, "get", "--raw", "/metrics/slis"); !forbidden(err) {
			t.Errorf("carol reading /metrics/slis (not in her rule): %v, want Forbidden", err)
		}
	})

	t.Run("access-reviews", func(t *testing.T) {
		// SubjectAccessReview is for admins: bob cannot ask about others.
		sar := `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"bob","resourceAttributes":{"namespace":"team-a","verb":"list","group":"backup.kubevirt.io","resource":"virtualmachinebackups"}}}`
		out := kubectlOK(t, s, admin, []byte(sar), "create", "-f", "-", "-o", "jsonpath={.status.allowed}")
		if out != "true" {
			t.Errorf("SubjectAccessReview for bob by the admin: allowed=%q, want true", out)
		}
		if _, err := s.KubectlAs(bob, []byte(sar), "create", "-f", "-"); !forbidden(err) {
			t.Errorf("SubjectAccessReview by bob: %v, want Forbidden", err)
		}
		// The admin may do anything, as can-i says.
		if !canI(t, s, admin, "*", "*", "") {
			t.Errorf("the admin (system:masters) cannot do everything")
		}
	})
}

// waitAllowed polls can-i until the server's informers have the binding
// that allows it.
func waitAllowed(t *testing.T, s *framework.Server, kubeconfig, verb, resource, namespace string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return canI(t, s, kubeconfig, verb, resource, namespace), nil
	})
	if err != nil {
		t.Fatalf("can-i %s %s -n %q never became yes", verb, resource, namespace)
	}
}

// TestRBACAggregation: a ClusterRole labelled aggregate-to-edit shows up in
// edit (and in admin, which aggregates edit), and its removal takes it out.
func TestRBACAggregation(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	admin := s.KubeconfigPath
	client := rbacClient(t, admin)
	ctx := context.Background()

	// The shipped roles are there at the first start.
	edit, err := client.RbacV1().ClusterRoles().Get(ctx, "edit", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasRule(edit.Rules, "backup.kubevirt.io", "virtualmachinebackups", "create") || !hasRule(edit.Rules, "oadp.openshift.io", "nonadminbackups", "create") {
		t.Errorf("edit lacks the shipped tenant and VM backup rules: %+v", edit.Rules)
	}
	if hasRule(edit.Rules, "velero.io", "backups", "get") {
		t.Errorf("edit grants velero.io: %+v", edit.Rules)
	}
	for _, r := range edit.Rules {
		for _, res := range r.Resources {
			if strings.HasSuffix(res, "/status") && (containsAny(r.Verbs, "update", "patch", "*")) {
				t.Errorf("edit grants a status write: %+v", r)
			}
		}
	}

	dave := s.IssueKubeconfig("dave")
	kubectlOK(t, s, admin, nil, "create", "rolebinding", "dave-edit", "--clusterrole", "edit", "--user", "dave", "-n", "team-a")
	extra := `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: restore-reader
  labels: {rbac.authorization.k8s.io/aggregate-to-edit: "true"}
rules:
- apiGroups: [velero.io]
  resources: [restores]
  verbs: [get, list]
`
	kubectlOK(t, s, admin, []byte(extra), "apply", "-f", "-")
	for _, role := range []string{"edit", "admin"} {
		waitRule(t, client, role, true)
	}
	waitAllowed(t, s, dave, "list", "restores.velero.io", "team-a")

	kubectlOK(t, s, admin, nil, "delete", "clusterrole", "restore-reader")
	for _, role := range []string{"edit", "admin"} {
		waitRule(t, client, role, false)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return !canI(t, s, dave, "list", "restores.velero.io", "team-a"), nil
	})
	if err != nil {
		t.Errorf("dave can still list restores after the aggregated role was deleted")
	}
}

func waitRule(t *testing.T, client kubernetes.Interface, role string, present bool) {
	t.Helper()
	var last []rbacv1.PolicyRule
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := client.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = r.Rules
		return hasRule(r.Rules, "velero.io", "restores", "list") == present, nil
	})
	if err != nil {
		t.Fatalf("clusterrole %s: the aggregated rule present=%v never held: %v; rules %+v", role, present, err, last)
	}
}

func hasRule(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if containsAny(r.APIGroups, group) && containsAny(r.Resources, resource) && containsAny(r.Verbs, verb) {
			return true
		}
	}
	return false
}

func containsAny(list []string, want ...string) bool {
	for _, l := range list {
		for _, w := range want {
			if l == w {
				return true
			}
		}
	}
	return false
}

// TestRBACEscalation: a user allowed to write RoleBindings and Roles in
// their namespace grants no more than they hold, as kube-apiserver
// enforces it; bind and escalate lift that where an admin allows.
func TestRBACEscalation(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	admin := s.KubeconfigPath
	erin := s.IssueKubeconfig("erin")
	setup := `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: team-lead, namespace: team-a}
rules:
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [create, get, list, update, patch, delete]
- apiGroups: [backup.kubevirt.io]
  resources: [virtualmachinebackups]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: erin-lead, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: team-lead}
subjects: [{kind: User, name: erin, apiGroup: rbac.authorization.k8s.io}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: wider, namespace: team-a}
rules:
- apiGroups: [backup.kubevirt.io]
  resources: [virtualmachinebackups]
  verbs: [get, list, delete]
`
	kubectlOK(t, s, admin, []byte(setup), "apply", "-f", "-")
	waitAllowed(t, s, erin, "create", "rolebindings", "team-a")

	const notHeld = "is attempting to grant RBAC permissions not currently held"
	for _, c := range []struct{ name, kind, role string }{
		{"cluster-admin", "--clusterrole", "cluster-admin"},
		{"admin", "--clusterrole", "admin"},
		{"edit", "--clusterrole", "edit"},
		{"wider-role", "--role", "wider"},
	} {
		_, err := s.KubectlAs(erin, nil, "create", "rolebinding", "erin-"+c.name, c.kind, c.role, "--user", "frank", "-n", "team-a")
		if !forbidden(err) || !strings.Contains(err.Error(), notHeld) {
			t.Errorf("erin binding %s: %v, want 403 %q", c.role, err, notHeld)
		}
	}
	// What she holds she may grant: her own role, and a narrower one.
	kubectlOK(t, s, erin, nil, "create", "rolebinding", "frank-lead", "--role", "team-lead", "--user", "frank", "-n", "team-a")
	kubectlOK(t, s, erin, nil, "create", "role", "reader", "--verb", "get", "--resource", "virtualmachinebackups.backup.kubevirt.io", "-n", "team-a")
	kubectlOK(t, s, erin, nil, "create", "rolebinding", "frank-reader", "--role", "reader", "--user", "frank", "-n", "team-a")
	// A Role wider than hers is refused, an update that widens one too.
	if _, err := s.KubectlAs(erin, nil, "create", "role", "deleter", "--verb", "delete", "--resource", "virtualmachinebackups.backup.kubevirt.io", "-n", "team-a"); !forbidden(err) || !strings.Contains(err.Error(), notHeld) {
		t.Errorf("erin creating a role wider than hers: %v, want 403 %q", err, notHeld)
	}
	widen := `{"rules":[{"apiGroups":["backup.kubevirt.io"],"resources":["virtualmachinebackups"],"verbs":["get","delete"]}]}`
	if _, err := s.KubectlAs(erin, nil, "patch", "role", "reader", "-n", "team-a", "--type", "merge", "-p", widen); !forbidden(err) || !strings.Contains(err.Error(), notHeld) {
		t.Errorf("erin widening a role: %v, want 403 %q", err, notHeld)
	}
	// Nor in another namespace, nor at cluster scope.
	if _, err := s.KubectlAs(erin, nil, "create", "rolebinding", "x", "--role", "team-lead", "--user", "frank", "-n", "team-b"); !forbidden(err) {
		t.Errorf("erin binding in team-b: %v, want Forbidden", err)
	}
	if _, err := s.KubectlAs(erin, nil, "create", "clusterrolebinding", "x", "--clusterrole", "view", "--user", "frank"); !forbidden(err) {
		t.Errorf("erin creating a ClusterRoleBinding: %v, want Forbidden", err)
	}

	// bind on a named role lets her grant it without holding it; escalate
	// lets her write roles beyond hers.
	grant := `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: granter, namespace: team-a}
rules:
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles]
  verbs: [bind]
  resourceNames: [wider]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles]
  verbs: [escalate]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: erin-granter, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: granter}
subjects: [{kind: User, name: erin, apiGroup: rbac.authorization.k8s.io}]
`
	kubectlOK(t, s, admin, []byte(grant), "apply", "-f", "-")
	waitAllowed(t, s, erin, "escalate", "roles", "team-a")
	kubectlOK(t, s, erin, nil, "create", "rolebinding", "frank-wider", "--role", "wider", "--user", "frank", "-n", "team-a")
	if _, err := s.KubectlAs(erin, nil, "create", "rolebinding", "frank-edit", "--clusterrole", "edit", "--user", "frank", "-n", "team-a"); !forbidden(err) {
		t.Errorf("erin binding edit with bind only on role wider: %v, want Forbidden", err)
	}
	kubectlOK(t, s, erin, nil, "create", "role", "deleter", "--verb", "delete", "--resource", "virtualmachinebackups.backup.kubevirt.io", "-n", "team-a")
}

// TestRBACRestart: roles, bindings and the decisions they make survive
// kill -9.
func TestRBACRestart(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	admin := s.KubeconfigPath
	gina := s.IssueKubeconfig("gina")
	kubectlOK(t, s, admin, nil, "create", "role", "lister", "--verb", "list", "--resource", "virtualmachinebackups.backup.kubevirt.io", "-n", "team-a")
	kubectlOK(t, s, admin, nil, "create", "rolebinding", "gina-lister", "--role", "lister", "--user", "gina", "-n", "team-a")
	waitAllowed(t, s, gina, "list", "virtualmachinebackups", "team-a")
	// A bootstrap role changed by the admin is reconciled back at start.
	kubectlOK(t, s, admin, nil, "patch", "clusterrole", "system:basic-user", "--type", "json", "-p", `[{"op":"remove","path":"/rules"}]`)

	s.Restart(true)

	if !canI(t, s, gina, "list", "virtualmachinebackups", "team-a") {
		t.Errorf("gina's binding gave nothing after kill -9")
	}
	if canI(t, s, gina, "list", "virtualmachinebackups", "team-b") {
		t.Errorf("gina may list in team-b after kill -9")
	}
	if _, err := s.KubectlAs(gina, nil, "get", "virtualmachinebackups", "-n", "team-a"); err != nil {
		t.Errorf("gina listing after kill -9: %v", err)
	}
	out := kubectlOK(t, s, admin, nil, "get", "clusterrole", "system:basic-user", "-o", "jsonpath={.rules[*].resources}")
	if !strings.Contains(out, "selfsubjectaccessreviews") {
		t.Errorf("system:basic-user was not reconciled at start: rules %q", out)
	}
	// whoami is basic-user's: it works again.
	kubectlOK(t, s, gina, nil, "auth", "whoami")
}

// TestRBACBadInput: clear 4xx answers, never a panic; a binding to a
// missing role is accepted (as in kube) and grants nothing.
func TestRBACBadInput(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	admin := s.KubeconfigPath
	client := rbacClient(t, admin)
	ctx := context.Background()

	_, err := client.RbacV1().Roles("team-a").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "no-verbs"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"backup.kubevirt.io"}, Resources: []string{"virtualmachinebackups"}}},
	}, metav1.CreateOptions{})
	if !invalidAt(err, "rules[0].verbs", "") {
		t.Errorf("a role with no verbs: %v, want 422 at rules[0].verbs", err)
	}
	_, err = client.RbacV1().RoleBindings("team-a").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "no-kind"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Pod", Name: "x"},
	}, metav1.CreateOptions{})
	if !invalidAt(err, "roleRef.kind", "") {
		t.Errorf("a binding to a Pod: %v, want 422 at roleRef.kind", err)
	}

	// Unknown fields under strict validation.
	strict := `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"typo"},"rules":[{"apiGroups":[""],"resources":["x"],"verbz":["get"]}]}`
	r := do(t, s, s.Config, http.MethodPost, "/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/roles?fieldValidation=Strict", "application/json", []byte(strict))
	if r.code != http.StatusBadRequest || !strings.Contains(r.body, `unknown field \"rules[0].verbz\"`) {
		t.Errorf("a role with an unknown field under strict validation: %d %s", r.code, truncate(r.body))
	}

	// A binding to a missing role: accepted, grants nothing.
	henry := s.IssueKubeconfig("henry")
	kubectlOK(t, s, admin, nil, "create", "rolebinding", "henry-ghost", "--role", "ghost", "--user", "henry", "-n", "team-a")
	kubectlOK(t, s, admin, nil, "create", "rolebinding", "henry-view", "--clusterrole", "view", "--user", "henry", "-n", "team-b")
	waitAllowed(t, s, henry, "list", "virtualmachinebackups", "team-b")
	for _, verb := range []string{"get", "list", "create"} {
		if canI(t, s, henry, verb, "virtualmachinebackups", "team-a") {
			t.Errorf("a binding to a missing role grants %s", verb)
		}
	}

	// Huge rule sets: 10,000 rules are stored and decide; a body past the
	// request size limit is refused with 413.
	big := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "huge"}}
	for i := range 10000 {
		big.Rules = append(big.Rules, rbacv1.PolicyRule{APIGroups: []string{"backup.kubevirt.io"}, Resources: []string{fmt.Sprintf("r%05d", i)}, Verbs: []string{"get"}})
	}
	big.Rules = append(big.Rules, rbacv1.PolicyRule{APIGroups: []string{"backup.kubevirt.io"}, Resources: []string{"virtualmachinebackuptrackers"}, Verbs: []string{"list"}})
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, big, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a ClusterRole with 10,001 rules: %v", err)
	}
	kubectlOK(t, s, admin, nil, "create", "rolebinding", "henry-huge", "--clusterrole", "huge", "--user", "henry", "-n", "team-c")
	waitAllowed(t, s, henry, "list", "virtualmachinebackuptrackers", "team-c")
	if canI(t, s, henry, "list", "virtualmachinebackups", "team-c") {
		t.Errorf("the huge role grants a resource it does not name")
	}
	huger := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "too-big"}}
	// More than 3 MiB in JSON or protobuf.
	for i := range 100000 {
		huger.Rules = append(huger.Rules, rbacv1.PolicyRule{APIGroups: []string{"backup.kubevirt.io"}, Resources: []string{fmt.Sprintf("resource-%08d", i)}, Verbs: []string{"get", "list", "watch"}})
	}
	_, err = client.RbacV1().ClusterRoles().Create(ctx, huger, metav1.CreateOptions{})
	if !apierrors.IsRequestEntityTooLargeError(err) {
		t.Errorf("a ClusterRole past the request size limit: %v, want 413", err)
	}
	// The server is still there.
	kubectlOK(t, s, admin, nil, "get", "clusterroles", "cluster-admin")
}
