package apiserver

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	kubevirtbackupinstall "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/install"
	oadpinstall "github.com/backstop-io/backstop/pkg/apis/oadp/install"
	veleroinstall "github.com/backstop-io/backstop/pkg/apis/velero/install"
)

// NewScheme returns a scheme with every API group Backstop serves, internal
// and versioned, plus the meta types every API server needs.
func NewScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	veleroinstall.Install(scheme)
	oadpinstall.Install(scheme)
	kubevirtbackupinstall.Install(scheme)

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

// NewCodecs returns the codec factory of scheme.
func NewCodecs(scheme *runtime.Scheme) serializer.CodecFactory {
	return serializer.NewCodecFactory(scheme)
}
