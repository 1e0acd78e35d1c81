package nonadmin

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
)

// The steps every tenant mirror shares: a tenant's object in its namespace,
// the admin-side object made for it in the admin namespace, linked by the
// NACUUID label and the origin annotations. Each engine keeps only its own
// rules (what it makes, what it mirrors back, its delete flows).

// link is how an admin-side object names the tenant object it was made
// for: the NACUUID in a label, the tenant object's namespace and name in
// annotations. Only the NACUUID, checked against the tenant object's
// status, decides ownership; the annotations route events.
type link struct{ nacuuidLabel, namespaceAnnotation, nameAnnotation string }

var (
	backupLink   = link{oadpv1alpha1.NabOriginNACUUIDLabel, oadpv1alpha1.NabOriginNamespaceAnnotation, oadpv1alpha1.NabOriginNameAnnotation}
	restoreLink  = link{oadpv1alpha1.NarOriginNACUUIDLabel, oadpv1alpha1.NarOriginNamespaceAnnotation, oadpv1alpha1.NarOriginNameAnnotation}
	scheduleLink = link{oadpv1alpha1.NasOriginNACUUIDLabel, oadpv1alpha1.NasOriginNamespaceAnnotation, oadpv1alpha1.NasOriginNameAnnotation}
	locationLink = link{oadpv1alpha1.NabslOriginNACUUIDLabel, oadpv1alpha1.NabslOriginNamespaceAnnotation, oadpv1alpha1.NabslOriginNameAnnotation}
	downloadLink = link{oadpv1alpha1.NadrOriginNACUUIDLabel, oadpv1alpha1.NadrOriginNamespaceAnnotation, oadpv1alpha1.NadrOriginNameAnnotation}
)

// objectMeta is the metadata of the admin-side object named name, in
// namespace, made for tenant under nacuuid: OADP's labels and the link.
func (l link) objectMeta(namespace, name, nacuuid string, tenant metav1.Object) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Namespace: namespace}
	l.stamp(&m, nacuuid, tenant.GetNamespace(), tenant.GetName())
	return m
}

// stamp labels o as OADP's and links it to the tenant object
// namespace/name under nacuuid.
func (l link) stamp(o metav1.Object, nacuuid, namespace, name string) {
	labels, annotations := o.GetLabels(), o.GetAnnotations()
	if labels == nil {
		labels = map[string]string{}
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	labels[oadpv1alpha1.OadpLabel] = oadpv1alpha1.OadpLabelValue
	labels[oadpv1alpha1.ManagedByLabel] = oadpv1alpha1.ManagedByLabelValue
	labels[l.nacuuidLabel] = nacuuid
	annotations[l.namespaceAnnotation], annotations[l.nameAnnotation] = namespace, name
	o.SetLabels(labels)
	o.SetAnnotations(annotations)
}

// origin is the link o carries; ok is false when any part is missing.
func (l link) origin(o metav1.Object) (nacuuid, namespace, name string, ok bool) {
	nacuuid = o.GetLabels()[l.nacuuidLabel]
	namespace, name = o.GetAnnotations()[l.namespaceAnnotation], o.GetAnnotations()[l.nameAnnotation]
	return nacuuid, namespace, name, nacuuid != "" && namespace != "" && name != ""
}

// madeFor: o carries nacuuid (the one a tenant object's status records) and
// was made for a tenant object of namespace.
func (l link) madeFor(o metav1.Object, nacuuid, namespace string) bool {
	return oadpv1alpha1.MadeFor(o.GetLabels(), o.GetAnnotations(), l.nacuuidLabel, l.namespaceAnnotation, nacuuid, namespace)
}

// route maps an event of an admin-side object to the tenant object its
// annotations name (routing only: the sync decides ownership).
func (l link) route(obj any) []cache.ObjectName {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	ns, name := m.GetAnnotations()[l.namespaceAnnotation], m.GetAnnotations()[l.nameAnnotation]
	if ns == "" || name == "" {
		return nil
	}
	return []cache.ObjectName{{Namespace: ns, Name: name}}
}

// object is a typed API object pointer (*NonAdminBackup, *velerov1.Backup).
type object interface {
	comparable
	metav1.Object
}

// mirror is one tenant kind T and the admin-side kind A made for it.
type mirror[T, A object] struct {
	link           link
	adminNamespace string
	// tenantKind and adminKind name the kinds in logs and errors.
	tenantKind, adminKind string
	// The tenant objects: from the lister, and from the API.
	tenant    func(namespace, name string) (T, error)
	tenantAPI func(ctx context.Context, namespace, name string) (T, error)
	// The admin-side objects of the admin namespace: from the lister, from
	// the API, made and deleted.
	admin       func(name string) (A, error)
	adminAPI    func(ctx context.Context, name string) (A, error)
	createAdmin func(ctx context.Context, a A) (A, error)
	deleteAdmin func(ctx context.Context, name string, opts metav1.DeleteOptions) error
	// recorded is what a tenant object's status records of its admin-side
	// object: its name and NACUUID ("" when none is recorded yet).
	recorded func(t T) (name, nacuuid string)
	// keep, when set, says an admin-side object is never an orphan.
	keep func(a A) bool
	// orphanMessage is logged when an orphan is deleted.
	orphanMessage string
}

// lister, getter and adminClient are what newMirror takes of a kind's
// generated lister and typed client.
type lister[T any] interface {
	Get(name string) (T, error)
}

type getter[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
}

type adminClient[A any] interface {
	getter[A]
	Create(ctx context.Context, obj A, opts metav1.CreateOptions) (A, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// newMirror is the mirror of tenant kind T (its generated lister and typed
// client by namespace) and admin-side kind A (those of the admin
// namespace), written as engine.
func newMirror[T, A object, TL lister[T], TC getter[T]](l link, adminNamespace, engine, tenantKind, adminKind string,
	tenants func(namespace string) TL, tenantAPI func(namespace string) TC, admins lister[A], adminAPI adminClient[A],
	recorded func(T) (name, nacuuid string)) *mirror[T, A] {
	return &mirror[T, A]{link: l, adminNamespace: adminNamespace, tenantKind: tenantKind, adminKind: adminKind,
		tenant: func(ns, name string) (T, error) { return tenants(ns).Get(name) },
		tenantAPI: func(ctx context.Context, ns, name string) (T, error) {
			return tenantAPI(ns).Get(ctx, name, metav1.GetOptions{})
		},
		admin:    admins.Get,
		adminAPI: func(ctx context.Context, name string) (A, error) { return adminAPI.Get(ctx, name, metav1.GetOptions{}) },
		createAdmin: func(ctx context.Context, a A) (A, error) {
			return adminAPI.Create(ctx, a, metav1.CreateOptions{FieldManager: engine})
		},
		deleteAdmin:   adminAPI.Delete,
		recorded:      recorded,
		orphanMessage: "Deleting a " + adminKind + " whose " + tenantKind + " is gone",
	}
}

// owns: a is the admin-side object t's status records, made for t.
func (m *mirror[T, A]) owns(t T, a A) bool { return owns(m.link, m.recorded, t, a) }

// recordedName is the name of the admin-side object t's status records.
func (m *mirror[T, A]) recordedName(t T) string {
	name, _ := m.recorded(t)
	return name
}

// owns: a is the admin-side object whose name and NACUUID t's status
// records, linked to t by l.
func owns[T, A metav1.Object](l link, recorded func(T) (name, nacuuid string), t T, a A) bool {
	name, id := recorded(t)
	return name != "" && a.GetName() == name && l.madeFor(a, id, t.GetNamespace())
}

// of returns t's admin-side object, none when its status records none or
// the one of that name was not made for it: read from the lister, and from
// the API before "none" is believed (the lister may not have seen one just
// made).
func (m *mirror[T, A]) of(ctx context.Context, t T) (A, error) {
	var none A
	name, _ := m.recorded(t)
	if name == "" {
		return none, nil
	}
	a, err := m.admin(name)
	if apierrors.IsNotFound(err) {
		a, err = m.adminAPI(ctx, name)
	}
	if apierrors.IsNotFound(err) {
		return none, nil
	}
	if err != nil {
		return none, fmt.Errorf("reading %s %s: %w", m.adminKind, name, err)
	}
	if !m.owns(t, a) {
		return none, nil
	}
	return a, nil
}

// create makes t's admin-side object a. One of its name that exists
// already (made before a restart: its name is the NACUUID recorded first)
// is taken only when it was made for t; another's is never taken, whatever
// its name (errMadeForAnother).
func (m *mirror[T, A]) create(ctx context.Context, t T, a A) (A, error) {
	var none A
	made, err := m.createAdmin(ctx, a)
	if apierrors.IsAlreadyExists(err) {
		if made, err = m.of(ctx, t); err == nil && made == none {
			err = errMadeForAnother
		}
	}
	if err != nil {
		return none, fmt.Errorf("creating %s %s for %s %s/%s: %w", m.adminKind, a.GetName(), m.tenantKind, t.GetNamespace(), t.GetName(), err)
	}
	return made, nil
}

// errMadeForAnother: an admin-side object of the name exists, made for
// another tenant object.
var errMadeForAnother = errors.New("one of its name exists, made for another")

// syncOrphan deletes the admin-side object key names when the tenant
// object it was made for is gone or records another: asked of the lister,
// then, before "gone" is believed, of the API.
func (m *mirror[T, A]) syncOrphan(ctx context.Context, key cache.ObjectName) error {
	if key.Namespace != m.adminNamespace {
		return nil // made here only in the admin namespace
	}
	a, err := m.admin(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	_, ns, name, ok := m.link.origin(a)
	if !ok || a.GetNamespace() != m.adminNamespace || a.GetDeletionTimestamp() != nil || (m.keep != nil && m.keep(a)) {
		return nil
	}
	owned, err := tenantOwns(ctx, m.tenant, m.tenantAPI, func(t T) bool { return m.owns(t, a) }, ns, name)
	if owned || err != nil {
		return err
	}
	klog.FromContext(ctx).Info(m.orphanMessage, "name", a.GetName(), "tenantNamespace", ns, "tenantName", name)
	return reconcile.DeleteIfUnchanged(ctx, m.deleteAdmin, a.GetName(), a.GetUID())
}

// tenantOwns reports whether the tenant object namespace/name still owns
// the admin-side object an orphan loop looks at: asked of the lister, then,
// before "no" is believed, of the API (the lister may lag a write just
// made). An admin-side object is deleted as an orphan only on a "no" from
// both.
func tenantOwns[T any](ctx context.Context, fromLister func(namespace, name string) (T, error),
	fromAPI func(ctx context.Context, namespace, name string) (T, error), owns func(T) bool, namespace, name string) (bool, error) {
	if t, err := fromLister(namespace, name); err == nil && owns(t) {
		return true, nil
	}
	t, err := fromAPI(ctx, namespace, name)
	switch {
	case err == nil:
		return owns(t), nil
	case apierrors.IsNotFound(err):
		return false, nil
	default:
		return false, err
	}
}
