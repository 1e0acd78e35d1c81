// Package rbac serves rbac.authorization.k8s.io/v1 on a standalone server:
// Role, RoleBinding, ClusterRole and ClusterRoleBinding with
// kube-apiserver's own strategies (defaulting, validation) and escalation
// checks (k8s.io/kubernetes pkg/registry/rbac/*/policybased), stored like
// every other resource, and kube's printer columns.
package rbac

import (
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/apis/rbac"

	// kube's RBAC strategies type and validate objects through kube's
	// global scheme (legacyscheme): the group must be installed there.
	_ "k8s.io/kubernetes/pkg/apis/rbac/install"
	"k8s.io/kubernetes/pkg/registry/rbac/clusterrole"
	clusterrolepolicybased "k8s.io/kubernetes/pkg/registry/rbac/clusterrole/policybased"
	clusterrolestore "k8s.io/kubernetes/pkg/registry/rbac/clusterrole/storage"
	"k8s.io/kubernetes/pkg/registry/rbac/clusterrolebinding"
	clusterrolebindingpolicybased "k8s.io/kubernetes/pkg/registry/rbac/clusterrolebinding/policybased"
	"k8s.io/kubernetes/pkg/registry/rbac/role"
	rolepolicybased "k8s.io/kubernetes/pkg/registry/rbac/role/policybased"
	rolestore "k8s.io/kubernetes/pkg/registry/rbac/role/storage"
	"k8s.io/kubernetes/pkg/registry/rbac/rolebinding"
	rolebindingpolicybased "k8s.io/kubernetes/pkg/registry/rbac/rolebinding/policybased"
	rbacregistryvalidation "k8s.io/kubernetes/pkg/registry/rbac/validation"

	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewStorage returns the REST storage of the four kinds by resource name.
// authz decides whether a user who lacks a permission may still grant it
// (the escalate and bind verbs); the rules a user holds are read from the
// storage itself, as kube-apiserver does.
func NewStorage(getter generic.RESTOptionsGetter, authz authorizer.UnconditionalAuthorizer) (map[string]rest.Storage, error) {
	roles, err := rolestore.NewREST(getter)
	if err != nil {
		return nil, fmt.Errorf("roles storage: %w", err)
	}
	clusterRoles, err := clusterrolestore.NewREST(getter)
	if err != nil {
		return nil, fmt.Errorf("clusterroles storage: %w", err)
	}
	roleBindings, err := newBindingStore(getter, rolebinding.Strategy, "rolebinding",
		func() runtime.Object { return &rbac.RoleBinding{} }, func() runtime.Object { return &rbac.RoleBindingList{} })
	if err != nil {
		return nil, fmt.Errorf("rolebindings storage: %w", err)
	}
	clusterRoleBindings, err := newBindingStore(getter, clusterrolebinding.Strategy, "clusterrolebinding",
		func() runtime.Object { return &rbac.ClusterRoleBinding{} }, func() runtime.Object { return &rbac.ClusterRoleBindingList{} })
	if err != nil {
		return nil, fmt.Errorf("clusterrolebindings storage: %w", err)
	}
	resolver := rbacregistryvalidation.NewDefaultRuleResolver(
		role.AuthorizerAdapter{Registry: role.NewRegistry(roles)},
		rolebinding.AuthorizerAdapter{Registry: rolebinding.NewRegistry(roleBindings)},
		clusterrole.AuthorizerAdapter{Registry: clusterrole.NewRegistry(clusterRoles)},
		clusterrolebinding.AuthorizerAdapter{Registry: clusterrolebinding.NewRegistry(clusterRoleBindings)},
	)
	return map[string]rest.Storage{
		"roles":               rolepolicybased.NewStorage(roles, authz, resolver),
		"rolebindings":        rolebindingpolicybased.NewStorage(roleBindings, authz, resolver),
		"clusterroles":        clusterrolepolicybased.NewStorage(clusterRoles, authz, resolver),
		"clusterrolebindings": clusterrolebindingpolicybased.NewStorage(clusterRoleBindings, authz, resolver),
	}, nil
}

// bindingStrategy is kube's strategy of RoleBindings or ClusterRoleBindings.
type bindingStrategy interface {
	rest.RESTCreateStrategy
	rest.RESTUpdateStrategy
	rest.RESTDeleteStrategy
}

// newBindingStore is kube's storage of a binding kind with its printer
// columns (kube's own storage packages pull in the printers of every
// built-in kind).
func newBindingStore(getter generic.RESTOptionsGetter, strategy bindingStrategy, singular string, newFunc, newListFunc func() runtime.Object) (*genericregistry.Store, error) {
	store := &genericregistry.Store{
		NewFunc:                   newFunc,
		NewListFunc:               newListFunc,
		DefaultQualifiedResource:  rbac.Resource(singular + "s"),
		SingularQualifiedResource: rbac.Resource(singular),
		CreateStrategy:            strategy,
		UpdateStrategy:            strategy,
		DeleteStrategy:            strategy,
		TableConvertor:            bindingTable,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: getter}); err != nil {
		return nil, err
	}
	return store, nil
}

// bindingTable has the columns kube-apiserver prints for RoleBindings and
// ClusterRoleBindings: NAME, ROLE, AGE, and with -o wide USERS, GROUPS,
// SERVICEACCOUNTS.
var bindingTable = resource.NewTableConvertor(
	resource.Column{Name: "Role", Type: "string", Description: rbacv1.RoleBinding{}.SwaggerDoc()["roleRef"],
		Cell: func(obj runtime.Object) any {
			ref := bindingOf(obj).roleRef
			return ref.Kind + "/" + ref.Name
		}},
	resource.Column{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"],
		Cell: resource.AgeColumn.Cell},
	resource.Column{Name: "Users", Type: "string", Priority: 1, Description: "Users in the binding",
		Cell: func(obj runtime.Object) any {
			users, _, _, _ := rbac.SubjectsStrings(bindingOf(obj).subjects)
			return strings.Join(users, ", ")
		}},
	resource.Column{Name: "Groups", Type: "string", Priority: 1, Description: "Groups in the binding",
		Cell: func(obj runtime.Object) any {
			_, groups, _, _ := rbac.SubjectsStrings(bindingOf(obj).subjects)
			return strings.Join(groups, ", ")
		}},
	resource.Column{Name: "ServiceAccounts", Type: "string", Priority: 1, Description: "ServiceAccounts in the binding",
		Cell: func(obj runtime.Object) any {
			_, _, sas, _ := rbac.SubjectsStrings(bindingOf(obj).subjects)
			return strings.Join(sas, ", ")
		}},
)

type binding struct {
	roleRef  rbac.RoleRef
	subjects []rbac.Subject
}

func bindingOf(obj runtime.Object) binding {
	switch b := obj.(type) {
	case *rbac.RoleBinding:
		return binding{b.RoleRef, b.Subjects}
	case *rbac.ClusterRoleBinding:
		return binding{b.RoleRef, b.Subjects}
	}
	return binding{}
}
