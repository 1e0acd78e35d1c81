// Package authz owns a standalone server's authorization by Kubernetes RBAC:
// kube-apiserver's own RBAC authorizer and rule resolver over the
// rbac.authorization.k8s.io objects the server stores (read through
// informers on the loopback client, as kube-apiserver does), the bootstrap
// policy written at the first start and reconciled at every start, and the
// engine that keeps aggregated ClusterRoles current (kube-controller-manager's
// clusterrole-aggregation controller).
//
// In aggregated mode none of this runs: kube-apiserver owns these groups and
// decides for the server (delegated authorization).
package authz

import (
	"context"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/clusterroleaggregation"
	rbacauthorizer "k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac"
)

// HookName is the post-start hook that syncs the RBAC informers, reconciles
// the bootstrap policy and starts the aggregation engine. The server is not
// ready (/readyz) before it has finished, as kube-apiserver's
// rbac/bootstrap-roles hook.
const HookName = "rbac/bootstrap-roles"

// aggregationWorkers is how many ClusterRoles the aggregation engine
// updates at once (kube-controller-manager's default is 5; one server has
// few aggregated roles).
const aggregationWorkers = 1

// RBAC decides requests by the RBAC objects the server stores.
type RBAC struct {
	// Authorizer is kube-apiserver's RBAC authorizer.
	Authorizer *rbacauthorizer.RBACAuthorizer
	client     kubernetes.Interface
	informers  informers.SharedInformerFactory
	synced     []cache.InformerSynced
	policy     Policy
	// aggregation is kube-controller-manager's clusterrole-aggregation
	// controller, run in the server.
	aggregation *clusterroleaggregation.ClusterRoleAggregationController
}

// New builds the RBAC authorizer on informers of the server's loopback
// client. Until the hook has synced them it allows nothing (the requests of
// system:masters, the loopback client's group, are allowed before RBAC is
// asked).
func New(loopback *restclient.Config, policy Policy) (*RBAC, error) {
	cfg := restclient.CopyConfig(loopback)
	cfg.UserAgent = "backstop-apiserver/rbac"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the RBAC client: %w", err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	v1 := factory.Rbac().V1()
	roles, roleBindings := v1.Roles(), v1.RoleBindings()
	clusterRoles, clusterRoleBindings := v1.ClusterRoles(), v1.ClusterRoleBindings()
	r := &RBAC{
		Authorizer: rbacauthorizer.New(
			&rbacauthorizer.RoleGetter{Lister: roles.Lister()},
			&rbacauthorizer.RoleBindingLister{Lister: roleBindings.Lister()},
			&rbacauthorizer.ClusterRoleGetter{Lister: clusterRoles.Lister()},
			&rbacauthorizer.ClusterRoleBindingLister{Lister: clusterRoleBindings.Lister()},
		),
		client:    client,
		informers: factory,
		synced: []cache.InformerSynced{
			roles.Informer().HasSynced, roleBindings.Informer().HasSynced,
			clusterRoles.Informer().HasSynced, clusterRoleBindings.Informer().HasSynced,
		},
		policy:      policy,
		aggregation: clusterroleaggregation.NewClusterRoleAggregation(clusterRoles, client.RbacV1()),
	}
	return r, nil
}

var _ authorizer.RuleResolver = &rbacauthorizer.RBACAuthorizer{}

// PostStartHook starts the informers, waits for them, reconciles the
// bootstrap policy, starts the aggregation engine (which runs until the
// server stops) and waits until it has aggregated the policy's roles.
func (r *RBAC) PostStartHook(hook genericapiserver.PostStartHookContext) error {
	ctx := hook.Context
	if err := r.Sync(ctx); err != nil {
		return err
	}
	// As kube-apiserver: retry for a while (storage may be slow to answer
	// at start), and fail the server if the policy cannot be written.
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = r.policy.Ensure(ctx, r.client)
		if last != nil {
			klog.ErrorS(last, "Reconciling the bootstrap RBAC policy; retrying")
		}
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("reconciling the bootstrap RBAC policy: %w (last: %v)", err, last)
	}
	go r.aggregation.Run(ctx, aggregationWorkers)
	// kube-apiserver is ready before kube-controller-manager has filled
	// admin, edit and view; here the server is not, so that a user bound
	// to edit at the first start is never refused what edit will grant.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = r.aggregated()
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("aggregating the bootstrap ClusterRoles: %w (last: %v)", err, last)
	}
	return nil
}

// aggregated says which ClusterRole of the policy with an aggregation rule
// does not yet hold the rules of the ClusterRoles it selects, as the
// informer sees them (nil when all do).
func (r *RBAC) aggregated() error {
	lister := r.informers.Rbac().V1().ClusterRoles().Lister()
	for _, role := range r.policy.ClusterRoles {
		if role.AggregationRule == nil {
			continue
		}
		stored, err := lister.Get(role.Name)
		if err != nil {
			return fmt.Errorf("ClusterRole %s: %w", role.Name, err)
		}
		if stored.AggregationRule == nil {
			continue
		}
		var want []rbacv1.PolicyRule
		for i := range stored.AggregationRule.ClusterRoleSelectors {
			selector, err := metav1.LabelSelectorAsSelector(&stored.AggregationRule.ClusterRoleSelectors[i])
			if err != nil {
				return fmt.Errorf("ClusterRole %s: %w", role.Name, err)
			}
			selected, err := lister.List(selector)
			if err != nil {
				return fmt.Errorf("ClusterRole %s: %w", role.Name, err)
			}
			for _, other := range selected {
				if other.Name != stored.Name {
					want = append(want, other.Rules...)
				}
			}
		}
		if ok, missing := rbacvalidation.Covers(stored.Rules, want); !ok {
			return fmt.Errorf("ClusterRole %s lacks %d aggregated rules", role.Name, len(missing))
		}
	}
	return nil
}

// Sync starts the informers the authorizer reads and waits until they hold
// every RBAC object; they run until ctx ends.
func (r *RBAC) Sync(ctx context.Context) error {
	r.informers.Start(ctx.Done())
	if !cache.WaitForNamedCacheSyncWithContext(ctx, r.synced...) {
		return fmt.Errorf("the RBAC informers did not sync")
	}
	return nil
}
