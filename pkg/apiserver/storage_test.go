package apiserver

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	"github.com/backstop-io/backstop/pkg/apis/scheme"
	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
)

// TestStorageVersion: each resource is stored in its group's most
// preferred version that has its kind.
func TestStorageVersion(t *testing.T) {
	g := &restOptionsGetter{scheme: scheme.New()}
	for _, tc := range []struct {
		resource schema.GroupResource
		example  runtime.Object
		want     schema.GroupVersion
	}{
		{velero.Resource("backups"), &velero.Backup{}, velerov1.SchemeGroupVersion},
		{velero.Resource("datauploads"), &velero.DataUpload{}, velerov2alpha1.SchemeGroupVersion},
		{velero.Resource("datadownloads"), &velero.DataDownload{}, velerov2alpha1.SchemeGroupVersion},
		{oadp.Resource("nonadminbackups"), &oadp.NonAdminBackup{}, oadpv1alpha1.SchemeGroupVersion},
		{velero.Resource("backups"), nil, velerov1.SchemeGroupVersion},
	} {
		t.Run(tc.resource.String(), func(t *testing.T) {
			got, err := g.storageVersion(tc.resource, tc.example)
			if err != nil || got != tc.want {
				t.Errorf("storage version %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	if _, err := g.storageVersion(schema.GroupResource{Group: "example.com", Resource: "things"}, nil); err == nil {
		t.Error("a group the scheme does not have got a storage version")
	}
}
