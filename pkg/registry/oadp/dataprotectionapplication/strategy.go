// Package dataprotectionapplication is the registry of oadp.openshift.io
// DataProtectionApplications: the admin's policy for tenants
// (spec.nonAdmin) checked as the OADP operator checks it (strategy.go), the
// REST storage, and the policy in effect as the tenant kinds' admission
// reads it (policy.go).
package dataprotectionapplication

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	oadpvalidation "github.com/backstop-io/backstop/pkg/apis/oadp/validation"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewStrategy returns the DataProtectionApplication strategy.
func NewStrategy(typer runtime.ObjectTyper) resource.Strategy {
	s := resource.NewStrategy(typer, oadpv1alpha1.SchemeGroupVersion.String())
	s.ValidateObject = func(obj runtime.Object) field.ErrorList {
		return oadpvalidation.ValidateNonAdminPolicy(obj.(*oadp.DataProtectionApplication).Spec.NonAdmin, field.NewPath("spec", "nonAdmin"))
	}
	return s
}

// NewStatusStrategy returns the strategy of the status subresource,
// written by the non-admin engine alone.
func NewStatusStrategy(s resource.Strategy) resource.StatusStrategy {
	st := resource.NewStatusStrategy(s)
	st.EnginesOnly = "DataProtectionApplication"
	return st
}

// Table renders DataProtectionApplications like the OADP CRD's printer
// columns.
var Table = resource.NewTableConvertor(
	resource.Column{Name: "Reconciled", Type: "string", Description: "Whether the non-admin policy is in effect", Cell: func(o runtime.Object) any {
		for _, c := range o.(*oadp.DataProtectionApplication).Status.Conditions {
			if c.Type == oadpv1alpha1.ConditionReconciled {
				return string(c.Status)
			}
		}
		return ""
	}},
	resource.AgeColumn,
)
