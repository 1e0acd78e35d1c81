// Package creator records who creates a tenant's object
// (oadpv1alpha1.CreatedByAnnotation, a restoreas.User) at admission, over
// whatever the request said, and keeps the record on every update: a
// NonAdminRestore restores with its creator's rights, and a backup a
// NonAdminBackup or NonAdminSchedule makes carries its creator, so that an
// admin's restore of it can run with that user's rights too.
package creator

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	"github.com/backstop-io/backstop/pkg/apis/restoreas"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// Record sets the annotation to the user of ctx: name, UID, groups but
// system:masters, extras. The server's own requests record no one.
func Record(ctx context.Context, obj runtime.Object) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	annotations := m.GetAnnotations()
	delete(annotations, oadpv1alpha1.CreatedByAnnotation)
	defer func() { m.SetAnnotations(annotations) }()
	u, ok := genericrequest.UserFrom(ctx)
	if !ok || resource.FromEngine(ctx) {
		return
	}
	as, ok := restoreas.For(u.GetName(), u.GetUID(), u.GetGroups(), u.GetExtra())
	if !ok {
		return
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[oadpv1alpha1.CreatedByAnnotation] = as.String()
}

// Keep puts the stored record back on an update.
func Keep(obj, old runtime.Object) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	o, err := meta.Accessor(old)
	if err != nil {
		return
	}
	annotations := m.GetAnnotations()
	was, ok := o.GetAnnotations()[oadpv1alpha1.CreatedByAnnotation]
	switch {
	case ok:
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[oadpv1alpha1.CreatedByAnnotation] = was
	default:
		delete(annotations, oadpv1alpha1.CreatedByAnnotation)
	}
	m.SetAnnotations(annotations)
}
