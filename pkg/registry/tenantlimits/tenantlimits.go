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

// CheckCount refuses a user's object of kind past the policy's limit for
// its namespace (max; 0: none); the server's own (a schedule's run, a
// synced backup) are always made.
func CheckCount(ctx context.Context, count *resource.Counter, kind, namespace string, policy *oadpvalidation.Policy, max int) field.ErrorList {
	if resource.FromEngine(ctx) || max <= 0 {
		return nil
	}
	n, err := count.Count(ctx, namespace)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata", "namespace"), err)}
	}
	dpa := ""
	if policy != nil {
		dpa = policy.DPA
	}
	return oadpvalidation.CheckCount(kind, n, max, field.NewPath("metadata", "namespace"), dpa)
}
