// Package scheme owns the scheme of every API group a Backstop server
// serves: Backstop's own groups (internal and versioned) and the kube groups
// a standalone server serves, as kube-apiserver registers them. It is a
// leaf: the server, the registry's tests and the fuzz targets build it
// without the rest of the server.
package scheme

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/kubernetes/pkg/apis/authentication"
	authenticationv1 "k8s.io/kubernetes/pkg/apis/authentication/v1"
	"k8s.io/kubernetes/pkg/apis/authorization"
	authorizationv1 "k8s.io/kubernetes/pkg/apis/authorization/v1"
	"k8s.io/kubernetes/pkg/apis/coordination"
	coordinationv1 "k8s.io/kubernetes/pkg/apis/coordination/v1"
	"k8s.io/kubernetes/pkg/apis/rbac"
	rbacv1 "k8s.io/kubernetes/pkg/apis/rbac/v1"

	consoleinstall "github.com/backstop-io/backstop/pkg/apis/console/install"
	kubevirtbackupinstall "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/install"
	oadpinstall "github.com/backstop-io/backstop/pkg/apis/oadp/install"
	veleroinstall "github.com/backstop-io/backstop/pkg/apis/velero/install"
)

// New returns a scheme with every API group Backstop serves, internal
// and versioned, plus the meta types every API server needs. The groups a
// standalone server serves for authorization (rbac.authorization.k8s.io,
// authorization.k8s.io, authentication.k8s.io) and for the engines' Lease
// (coordination.k8s.io) are kube-apiserver's own types, conversions,
// defaults and validation.
func New() *runtime.Scheme {
	scheme := runtime.NewScheme()
	veleroinstall.Install(scheme)
	oadpinstall.Install(scheme)
	kubevirtbackupinstall.Install(scheme)
	consoleinstall.Install(scheme)
	// Only the v1 versions: the ones a standalone server serves.
	for _, add := range []func(*runtime.Scheme) error{
		rbac.AddToScheme, rbacv1.AddToScheme,
		authorization.AddToScheme, authorizationv1.AddToScheme,
		authentication.AddToScheme, authenticationv1.AddToScheme,
		coordination.AddToScheme, coordinationv1.AddToScheme,
	} {
		utilruntime.Must(add(scheme))
	}
	for _, gv := range []schema.GroupVersion{rbacv1.SchemeGroupVersion, authorizationv1.SchemeGroupVersion, authenticationv1.SchemeGroupVersion, coordinationv1.SchemeGroupVersion} {
		utilruntime.Must(scheme.SetVersionPriority(gv))
	}

	// The unversioned meta types (Status, discovery documents) and the
	// options types (ListOptions, DeleteOptions, ...) under v1.
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	scheme.AddUnversionedTypes(unversioned,
		&metav1.Status{},
		&metav1.APIVersions{},
		&metav1.APIGroupList{},
		&metav1.APIGroup{},
		&metav1.APIResourceList{},
	)
	return scheme
}
