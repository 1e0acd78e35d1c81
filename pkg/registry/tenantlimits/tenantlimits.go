// Package tenantlimits is admission's side of the administrator's tenant
// limits (the DataProtectionApplication's spec.nonAdmin.tenantLimits): the
// policy in effect, read by the strategies of the kinds a tenant creates,
// and the per-namespace totals they check on create.
package tenantlimits

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	oadpvalidation "github.com/backstop-io/backstop/pkg/apis/oadp/validation"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// PolicyFunc reads the admin's policy for tenants in effect (nil: none).
type PolicyFunc func(ctx context.Context) (*oadpvalidation.Policy, error)

// Policy is the policy in effect (nil: none).
func (p PolicyFunc) Policy(ctx context.Context) (*oadpvalidation.Policy, field.ErrorList) {
	if p == nil {
		return nil, nil
	}
	policy, err := p(ctx)
	if err != nil {
		return nil, field.ErrorList{field.InternalError(field.NewPath("spec"), fmt.Errorf("reading the non-admin policy: %w", err))}
	}
	return policy, nil
}

// Total is one per-namespace total of a kind that admission checks on
// create: the store's objects of the namespace (Counter, whose Lister
// NewREST sets once the store exists) against the policy's limit (Max).
type Total struct {
	Kind string
	Max  func(oadpvalidation.Limits) int
	resource.Counter
}

// NewTotal returns the total of kind, limited by max of the policy's
// limits.
func NewTotal(kind string, max func(oadpvalidation.Limits) int) *Total {
	return &Total{Kind: kind, Max: max}
}

// Check refuses a user's object past the policy's limit for its namespace
// (0: none); the server's own (a schedule's run, a synced backup) are
// always made.
func (t *Total) Check(ctx context.Context, namespace string, policy *oadpvalidation.Policy) field.ErrorList {
	max := t.Max(policy.Limits())
	if resource.FromEngine(ctx) || max <= 0 {
		return nil
	}
	n, err := t.Count(ctx, namespace)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata", "namespace"), err)}
	}
	dpa := ""
	if policy != nil {
		dpa = policy.DPA
	}
	return oadpvalidation.CheckCount(t.Kind, n, max, field.NewPath("metadata", "namespace"), dpa)
}
