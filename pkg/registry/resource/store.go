package resource

import (
	"context"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/validation/field"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// Definition describes one resource for NewStore.
type Definition struct {
	// Resource and Singular name the resource ("backups", "backup").
	Resource, Singular schema.GroupResource
	NewFunc            func() runtime.Object
	NewListFunc        func() runtime.Object
	// Strategy is the resource's strategy (embedding Strategy).
	Strategy interface {
		rest.RESTCreateStrategy
		rest.RESTUpdateStrategy
		rest.RESTDeleteStrategy
		rest.ResetFieldsStrategy
	}
	// StatusStrategy, if set, adds the status subresource.
	StatusStrategy interface {
		rest.RESTUpdateStrategy
		rest.ResetFieldsStrategy
	}
	Table      rest.TableConvertor
	ShortNames []string
	Categories []string
	// AdminNamespace, if set, is the only namespace objects may be created
	// in (the namespace whose Velero objects the engines process); creating
	// one elsewhere is refused with 422 rather than silently ignored.
	AdminNamespace string
	// BeginUpdate, if set, may refuse an update of the main resource.
	BeginUpdate genericregistry.BeginUpdateFunc
	// Decorate, if set, changes every object the main and status storage
	// return (not watch events; see the resource for those).
	Decorate func(obj runtime.Object)
	// Filled reports a served (versioned) object whose fields Decorate
	// filled in, so that it differs from what is stored: required with
	// Decorate. Lists are written from the objects' stored bytes, except
	// those objects (FilledOnRead).
	Filled func(obj runtime.Object) bool
	// AttrFunc adds field selectors beyond metadata.name/namespace.
	AttrFunc func(obj runtime.Object) (labelSet map[string]string, fieldSet map[string]string, err error)
}

// FilledOnRead is implemented by a RESTOptionsGetter whose server writes
// lists from the objects' stored bytes: it learns which objects of a
// resource have fields filled in as they are read (Definition.Filled),
// which it must encode instead.
type FilledOnRead interface {
	FilledOnRead(resource schema.GroupResource, filled func(obj runtime.Object) bool)
}

// REST is the main resource's REST storage.
type REST struct {
	*genericregistry.Store
	shortNames, categories []string
}

var (
	_ rest.ShortNamesProvider  = &REST{}
	_ rest.CategoriesProvider  = &REST{}
	_ rest.StandardStorage     = &REST{}
	_ rest.Patcher             = &StatusREST{}
	_ rest.ResetFieldsStrategy = Strategy{}
)

// ShortNames is what `kubectl get <shortname>` accepts.
func (r *REST) ShortNames() []string { return r.shortNames }

// Categories groups resources for `kubectl get <category>`.
func (r *REST) Categories() []string { return r.categories }

// StatusREST is the status subresource: get and update of the status only.
type StatusREST struct {
	store    *genericregistry.Store
	decorate func(runtime.Object)
}

// New returns an empty object.
func (r *StatusREST) New() runtime.Object { return r.store.New() }

// Destroy does nothing: the main store owns the storage.
func (r *StatusREST) Destroy() {}

// Get returns the object.
func (r *StatusREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.store.Get(ctx, name, options)
	if err == nil && r.decorate != nil {
		r.decorate(obj)
	}
	return obj, err
}

// Update changes the status of the object.
func (r *StatusREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	// Subresources never create.
	obj, created, err := r.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
	if err == nil && r.decorate != nil {
		r.decorate(obj)
	}
	return obj, created, err
}

// GetResetFields returns the fields the status subresource leaves alone.
func (r *StatusREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}

// ConvertToTable renders the object like the main resource.
func (r *StatusREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, object, tableOptions)
}

// NewStore builds the genericregistry.Store of a resource (and its status
// subresource when the definition has a StatusStrategy).
func NewStore(optsGetter generic.RESTOptionsGetter, d Definition) (*REST, *StatusREST, error) {
	store := &genericregistry.Store{
		NewFunc:                   d.NewFunc,
		NewListFunc:               d.NewListFunc,
		DefaultQualifiedResource:  d.Resource,
		SingularQualifiedResource: d.Singular,
		CreateStrategy:            d.Strategy,
		UpdateStrategy:            d.Strategy,
		DeleteStrategy:            d.Strategy,
		ResetFieldsStrategy:       d.Strategy,
		TableConvertor:            d.Table,
	}
	if d.AdminNamespace != "" {
		store.BeginCreate = adminNamespaceOnly(d.Resource, d.AdminNamespace)
	}
	options := &generic.StoreOptions{RESTOptions: optsGetter}
	if d.AttrFunc != nil {
		options.AttrFunc = func(obj runtime.Object) (labels.Set, fields.Set, error) {
			l, f, err := d.AttrFunc(obj)
			return labels.Set(l), fields.Set(f), err
		}
	}
	if d.Decorate != nil {
		if d.Filled == nil {
			return nil, nil, fmt.Errorf("building the store of %s: it fills fields in on read (Decorate) and does not say which objects (Filled)", d.Resource)
		}
		if f, ok := optsGetter.(FilledOnRead); ok {
			f.FilledOnRead(d.Resource, d.Filled)
		}
	}
	if err := store.CompleteWithOptions(options); err != nil {
		return nil, nil, fmt.Errorf("building the store of %s: %w", d.Resource, err)
	}
	main := &REST{Store: store, shortNames: d.ShortNames, categories: d.Categories}
	if d.StatusStrategy == nil {
		store.BeginUpdate = d.BeginUpdate
		return main, nil, nil
	}
	statusStore := *store
	statusStore.CreateStrategy = nil
	statusStore.DeleteStrategy = nil
	statusStore.UpdateStrategy = d.StatusStrategy
	statusStore.ResetFieldsStrategy = d.StatusStrategy
	store.BeginUpdate = d.BeginUpdate
	return main, &StatusREST{store: &statusStore, decorate: d.Decorate}, nil
}

// adminNamespaceOnly refuses creating objects outside the admin namespace.
func adminNamespaceOnly(resource schema.GroupResource, namespace string) genericregistry.BeginCreateFunc {
	return func(_ context.Context, obj runtime.Object, _ *metav1.CreateOptions) (genericregistry.FinishFunc, error) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, err
		}
		if m.GetNamespace() != namespace {
			return nil, apierrors.NewInvalid(schema.GroupKind{Group: resource.Group, Kind: kindOf(obj)}, m.GetName(), field.ErrorList{
				field.Invalid(field.NewPath("metadata", "namespace"), m.GetNamespace(),
					fmt.Sprintf("%s are processed in the admin namespace %q only: create it there", resource, namespace)),
			})
		}
		return func(context.Context, bool) {}, nil
	}
}

func kindOf(obj runtime.Object) string {
	t := reflect.TypeOf(obj)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}
