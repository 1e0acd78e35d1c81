package resource

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/backstop-io/backstop/pkg/apis/lifecycle"
)

// Strategy is the base create/update/delete strategy of a Backstop resource.
// Resource packages embed it and override what differs (PrepareForCreate for
// defaults, Validate and ValidateUpdate for their rules), calling the
// embedded method first.
//
// Objects are expected to have a Spec field and, optionally, a Status field
// (a struct or a pointer to one); both are found by reflection so that one
// implementation serves every type.
type Strategy struct {
	runtime.ObjectTyper
	names.NameGenerator

	// APIVersions lists the external versions ("velero.io/v1") whose
	// "status" field server-side apply must leave to the status subresource.
	APIVersions []string
	// ClusterScoped marks a cluster-scoped resource.
	ClusterScoped bool
	// NoStatus marks a resource without a status: updates may change
	// anything but metadata rules still apply.
	NoStatus bool
	// ValidateObject, if set, holds the resource's own rules (internal
	// object), checked on create and on update after the metadata rules.
	ValidateObject func(obj runtime.Object) field.ErrorList
	// Finalizers are added to every new object: the engine that owns the
	// object's cleanup removes each once its part is done.
	Finalizers []string
}

var (
	_ rest.RESTCreateStrategy       = Strategy{}
	_ rest.RESTUpdateStrategy       = Strategy{}
	_ rest.RESTDeleteStrategy       = Strategy{}
	_ rest.ResetFieldsStrategy      = Strategy{}
	_ rest.RESTCreateUpdateStrategy = StatusStrategy{}
)

// NewStrategy returns the base strategy for types registered in typer.
func NewStrategy(typer runtime.ObjectTyper, apiVersions ...string) Strategy {
	return Strategy{ObjectTyper: typer, NameGenerator: names.SimpleNameGenerator, APIVersions: apiVersions}
}

// NamespaceScoped reports whether objects live in namespaces.
func (s Strategy) NamespaceScoped() bool { return !s.ClusterScoped }

// PrepareForCreate clears the status (clients set it through the status
// subresource only), starts the generation at 1 and adds the finalizers.
func (s Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	if !s.NoStatus {
		ResetStatus(obj)
	}
	if m, err := meta.Accessor(obj); err == nil {
		m.SetGeneration(1)
		for _, f := range s.Finalizers {
			if !slices.Contains(m.GetFinalizers(), f) {
				m.SetFinalizers(append(m.GetFinalizers(), f))
			}
		}
	}
}

// PrepareForUpdate keeps the stored status and bumps the generation when
// the spec changed.
func (s Strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	if !s.NoStatus {
		CopyStatus(obj, old)
	}
	newMeta, err1 := meta.Accessor(obj)
	oldMeta, err2 := meta.Accessor(old)
	if err1 != nil || err2 != nil {
		return
	}
	if !SpecEqual(obj, old) {
		newMeta.SetGeneration(oldMeta.GetGeneration() + 1)
	} else {
		newMeta.SetGeneration(oldMeta.GetGeneration())
	}
}

// Validate checks the object metadata and, if set, the resource's own rules.
func (s Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	m, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	errs := apimachineryvalidation.ValidateObjectMetaAccessor(m, s.NamespaceScoped(),
		apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	if s.ValidateObject != nil {
		errs = append(errs, s.ValidateObject(obj)...)
	}
	return errs
}

// ValidateUpdate checks the metadata update rules and, if set, the
// resource's own rules on the new object.
func (s Strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	newMeta, err1 := meta.Accessor(obj)
	oldMeta, err2 := meta.Accessor(old)
	if err1 != nil || err2 != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), fmt.Errorf("object has no metadata"))}
	}
	errs := apimachineryvalidation.ValidateObjectMetaAccessorUpdate(newMeta, oldMeta, field.NewPath("metadata"))
	if s.ValidateObject != nil {
		errs = append(errs, s.ValidateObject(obj)...)
	}
	return errs
}

// WarningsOnCreate returns no warnings.
func (Strategy) WarningsOnCreate(context.Context, runtime.Object) []string { return nil }

// WarningsOnUpdate returns no warnings.
func (Strategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

// AllowCreateOnUpdate is false: PUT of a missing object is refused.
func (Strategy) AllowCreateOnUpdate(context.Context) bool { return false }

// AllowUnconditionalUpdate is true: an update without resourceVersion is
// accepted, as for most built-in resources.
func (Strategy) AllowUnconditionalUpdate(context.Context) bool { return true }

// Canonicalize does nothing.
func (Strategy) Canonicalize(runtime.Object) {}

// GetResetFields tells server-side apply that the main resource does not
// own the status.
func (s Strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	if s.NoStatus {
		return nil
	}
	return resetFields(s.APIVersions, "status")
}

// StatusStrategy is the strategy of the status subresource: only the
// status may change; the spec and generation are kept.
type StatusStrategy struct {
	Strategy
	// EnginesOnly names the kind of a resource whose status only the
	// server's engines write (engines.go): a change by anyone else is
	// refused. Empty: anyone authorized may write the status.
	EnginesOnly string
	// ValidateStatus, if set, checks the new status (internal object),
	// whoever writes it: the resource's transition rules.
	ValidateStatus func(ctx context.Context, obj, old runtime.Object) field.ErrorList
	// NotStored, if set, clears the status fields the registry fills in
	// when an object is read (a queue position): a copy read with them
	// and written back stores what it would without them, so the queue
	// moving rewrites nothing.
	NotStored func(obj runtime.Object)
}

// NewStatusStrategy returns the status strategy beside s.
func NewStatusStrategy(s Strategy) StatusStrategy { return StatusStrategy{Strategy: s} }

// PrepareForUpdate keeps the stored spec and metadata generation, and
// clears the fields that are never stored.
func (s StatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	CopySpec(obj, old)
	if s.NotStored != nil {
		s.NotStored(obj)
	}
	newMeta, err1 := meta.Accessor(obj)
	oldMeta, err2 := meta.Accessor(old)
	if err1 == nil && err2 == nil {
		newMeta.SetGeneration(oldMeta.GetGeneration())
	}
}

// ValidateUpdate checks metadata rules, who writes, and, if set, the
// status rules.
func (s StatusStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	errs := s.Strategy.ValidateUpdate(ctx, obj, old)
	if s.EnginesOnly != "" && !FromEngine(ctx) && !StatusEqual(obj, old) {
		return append(errs, field.Forbidden(field.NewPath("status"),
			fmt.Sprintf("the status of a %s is written by the server's engines only", s.EnginesOnly)))
	}
	if s.ValidateStatus != nil {
		errs = append(errs, s.ValidateStatus(ctx, obj, old)...)
	}
	return errs
}

// GetResetFields tells server-side apply that the status subresource does
// not own the spec.
func (s StatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return resetFields(s.APIVersions, "spec")
}

func resetFields(apiVersions []string, path string) map[fieldpath.APIVersion]*fieldpath.Set {
	out := make(map[fieldpath.APIVersion]*fieldpath.Set, len(apiVersions))
	for _, v := range apiVersions {
		out[fieldpath.APIVersion(v)] = fieldpath.NewSet(fieldpath.MakePathOrDie(path))
	}
	return out
}

// field returns the addressable named field of the struct obj points to,
// or an invalid Value.
func structField(obj runtime.Object, name string) reflect.Value {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return reflect.Value{}
	}
	v = v.Elem()
	if v.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return v.FieldByName(name)
}

// ResetStatus sets obj's Status field to its zero value.
func ResetStatus(obj runtime.Object) {
	if f := structField(obj, "Status"); f.IsValid() && f.CanSet() {
		f.Set(reflect.Zero(f.Type()))
	}
}

// CopyStatus sets obj's Status to a copy of old's.
func CopyStatus(obj, old runtime.Object) { copyField(obj, old, "Status") }

// CopySpec sets obj's Spec to a copy of old's.
func CopySpec(obj, old runtime.Object) { copyField(obj, old, "Spec") }

func copyField(obj, old runtime.Object, name string) {
	dst, src := structField(obj, name), structField(old, name)
	if !dst.IsValid() || !src.IsValid() || !dst.CanSet() || dst.Type() != src.Type() {
		return
	}
	// old comes from storage and is not shared with the caller after an
	// update, but copy anyway so the two objects never alias.
	cp := reflect.New(src.Type()).Elem()
	cp.Set(src)
	if dc, ok := deepCopyOf(src); ok {
		cp = dc
	}
	dst.Set(cp)
}

// deepCopyOf calls the generated DeepCopy of v when it has one.
func deepCopyOf(v reflect.Value) (reflect.Value, bool) {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return v, true
		}
		m := v.MethodByName("DeepCopy")
		if !m.IsValid() {
			return reflect.Value{}, false
		}
		return m.Call(nil)[0], true
	}
	if !v.CanAddr() {
		return reflect.Value{}, false
	}
	m := v.Addr().MethodByName("DeepCopy")
	if !m.IsValid() {
		return reflect.Value{}, false
	}
	return m.Call(nil)[0].Elem(), true
}

// SpecEqual reports whether the Spec fields of a and b are semantically equal.
func SpecEqual(a, b runtime.Object) bool {
	fa, fb := structField(a, "Spec"), structField(b, "Spec")
	if !fa.IsValid() || !fb.IsValid() {
		return true
	}
	return apiequality.Semantic.DeepEqual(fa.Interface(), fb.Interface())
}

// StatusEqual reports whether the Status fields of a and b are
// semantically equal.
func StatusEqual(a, b runtime.Object) bool {
	fa, fb := structField(a, "Status"), structField(b, "Status")
	if !fa.IsValid() || !fb.IsValid() {
		return true
	}
	return apiequality.Semantic.DeepEqual(fa.Interface(), fb.Interface())
}

// DeepEqual reports whether a and b are semantically equal (quantities and
// times compared by value).
func DeepEqual(a, b any) bool { return apiequality.Semantic.DeepEqual(a, b) }

// NewLifecycleStatusStrategy returns the status strategy of a resource with
// a life: only the server's engines write its status, and its phase
// (phase reads it off an internal object) changes only as table allows,
// reported at fld.
func NewLifecycleStatusStrategy[P lifecycle.Phase](s Strategy, table lifecycle.Table[P], phase func(runtime.Object) P, fld *field.Path) StatusStrategy {
	st := NewStatusStrategy(s)
	st.EnginesOnly = table.Kind
	st.ValidateStatus = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		return table.ValidateChange(phase(old), phase(obj), fld)
	}
	return st
}
