package authz

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/component-helpers/auth/rbac/reconciliation"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"
)

// kubeClusterRoles are the ClusterRoles of kube-apiserver's bootstrap
// policy a standalone server writes, as kube-apiserver defines them: the
// all-powerful role, what every user may read (discovery, health, their own
// access), monitoring, and the namespace roles admin/edit/view with the
// roles aggregated into them. kube's roles for its own components (nodes,
// controllers, schedulers) are left out: no such component talks to a
// standalone server.
var kubeClusterRoles = []string{
	"cluster-admin",
	"system:discovery", "system:basic-user", "system:public-info-viewer", "system:monitoring",
	"admin", "edit", "view",
	"system:aggregate-to-admin", "system:aggregate-to-edit", "system:aggregate-to-view",
}

// kubeClusterRoleBindings bind them as kube-apiserver does: cluster-admin
// to system:masters, discovery and basic-user to every authenticated user,
// public-info-viewer to everyone, monitoring to system:monitoring.
var kubeClusterRoleBindings = []string{
	"cluster-admin", "system:discovery", "system:basic-user", "system:public-info-viewer", "system:monitoring",
}

// Policy is the bootstrap RBAC policy: created when missing, and reconciled
// at every start with kube's rules (missing rules and subjects are added
// back unless the object is annotated
// rbac.authorization.kubernetes.io/autoupdate=false).
type Policy struct {
	ClusterRoles        []rbacv1.ClusterRole
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
}

// DefaultPolicy is kube's bootstrap subset above plus Backstop's own
// ClusterRoles (artifacts/deploy/15-clusterroles.yaml, given as
// ownClusterRoles). The rules kube aggregates into admin, edit and view
// are kept for the API groups the server serves (servedGroups: its roles
// and bindings, local access reviews) and left out for the others (pods,
// deployments, ...), which a standalone server does not have.
func DefaultPolicy(ownClusterRoles []byte, servedGroups sets.Set[string]) (Policy, error) {
	var p Policy
	roles := map[string]rbacv1.ClusterRole{}
	for _, r := range bootstrappolicy.ClusterRoles() {
		roles[r.Name] = r
	}
	for _, name := range kubeClusterRoles {
		r, ok := roles[name]
		if !ok {
			return Policy{}, fmt.Errorf("kube's bootstrap policy has no ClusterRole %s", name)
		}
		if strings.HasPrefix(name, "system:aggregate-to-") {
			r.Rules = rulesForGroups(r.Rules, servedGroups)
		}
		p.ClusterRoles = append(p.ClusterRoles, r)
	}
	bindings := map[string]rbacv1.ClusterRoleBinding{}
	for _, b := range bootstrappolicy.ClusterRoleBindings() {
		bindings[b.Name] = b
	}
	for _, name := range kubeClusterRoleBindings {
		b, ok := bindings[name]
		if !ok {
			return Policy{}, fmt.Errorf("kube's bootstrap policy has no ClusterRoleBinding %s", name)
		}
		p.ClusterRoleBindings = append(p.ClusterRoleBindings, b)
	}
	own, err := DecodeClusterRoles(ownClusterRoles)
	if err != nil {
		return Policy{}, err
	}
	p.ClusterRoles = append(p.ClusterRoles, own...)
	return p, nil
}

// rulesForGroups keeps the resource rules all of whose API groups are in
// groups.
func rulesForGroups(rules []rbacv1.PolicyRule, groups sets.Set[string]) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, r := range rules {
		if len(r.APIGroups) > 0 && groups.HasAll(r.APIGroups...) {
			out = append(out, r)
		}
	}
	return out
}

// DecodeClusterRoles reads the ClusterRoles of a multi-document YAML file.
func DecodeClusterRoles(manifest []byte) ([]rbacv1.ClusterRole, error) {
	var out []rbacv1.ClusterRole
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		var r rbacv1.ClusterRole
		if err := d.Decode(&r); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("decoding ClusterRoles: %w", err)
		}
		if r.Kind != "ClusterRole" || r.APIVersion != rbacv1.SchemeGroupVersion.String() {
			return nil, fmt.Errorf("decoding ClusterRoles: %s %q is not a %s ClusterRole", r.Kind, r.Name, rbacv1.SchemeGroupVersion)
		}
		out = append(out, r)
	}
}

// Ensure creates or reconciles every object of the policy through client,
// with kube-apiserver's reconciliation (k8s.io/component-helpers). It tries
// every object and returns the errors of those it could not reconcile.
func (p Policy) Ensure(ctx context.Context, client kubernetes.Interface) error {
	var errs []error
	for i := range p.ClusterRoles {
		role := p.ClusterRoles[i].DeepCopy()
		opts := reconciliation.ReconcileRoleOptions{
			Role:    reconciliation.ClusterRoleRuleOwner{ClusterRole: role},
			Client:  reconciliation.ClusterRoleModifier{Client: client.RbacV1().ClusterRoles()},
			Confirm: true,
		}
		if err := reconcileOne("ClusterRole", role.Name, func() (reconciled, error) {
			r, err := opts.Run()
			if err != nil {
				return reconciled{}, err
			}
			return reconciled{r.Operation, r.Protected, r.MissingRules}, nil
		}); err != nil {
			errs = append(errs, err)
		}
	}
	for i := range p.ClusterRoleBindings {
		binding := p.ClusterRoleBindings[i].DeepCopy()
		opts := reconciliation.ReconcileRoleBindingOptions{
			RoleBinding: reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: binding},
			Client:      reconciliation.ClusterRoleBindingClientAdapter{Client: client.RbacV1().ClusterRoleBindings()},
			Confirm:     true,
		}
		if err := reconcileOne("ClusterRoleBinding", binding.Name, func() (reconciled, error) {
			r, err := opts.Run()
			if err != nil {
				return reconciled{}, err
			}
			return reconciled{r.Operation, r.Protected, r.MissingSubjects}, nil
		}); err != nil {
			errs = append(errs, err)
		}
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// reconciled is what the reconciliation of one object did.
type reconciled struct {
	op        reconciliation.ReconcileOperation
	protected bool
	// missing are the rules or subjects it added (or would have).
	missing any
}

// reconcileOne runs one object's reconciliation, retrying conflicts and an
// unavailable storage as kube-apiserver does, and logs what it did.
func reconcileOne(kind, name string, run func() (reconciled, error)) error {
	retryable := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsServiceUnavailable(err) }
	err := retry.OnError(retry.DefaultBackoff, retryable, func() error {
		r, err := run()
		if err != nil {
			return err
		}
		switch {
		case r.protected && r.op != reconciliation.ReconcileNone:
			klog.InfoS("Left an object annotated autoupdate=false alone", "kind", kind, "name", name, "missing", r.missing)
		case r.op == reconciliation.ReconcileUpdate, r.op == reconciliation.ReconcileRecreate:
			klog.InfoS("Reconciled", "kind", kind, "name", name, "missing", r.missing)
		case r.op == reconciliation.ReconcileCreate:
			klog.V(2).InfoS("Created", "kind", kind, "name", name)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s %s: %w", kind, name, err)
	}
	return nil
}
