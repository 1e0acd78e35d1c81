// Package enginetest is what the engines' unit tests share: a fake
// clientset holding objects, informers over it with those objects in their
// indexers (the engines' listers read them without a running informer),
// and the writes the engines made (read the objects back through the
// clientset). Engines' decisions are tested with it in
// seconds, without a server; the integration tests keep the real one.
package enginetest

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	kvv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned/fake"
	"github.com/backstop-io/backstop/pkg/generated/informers/externalversions"
)

// World is a fake API and the informers engines read it through.
type World struct {
	Client *fake.Clientset
	// Factory's informers hold the objects of every namespace.
	Factory externalversions.SharedInformerFactory
}

// New returns a world holding objs, in the fake clientset and in the
// indexers of their informers.
func New(t testing.TB, objs ...runtime.Object) *World {
	t.Helper()
	w := &World{Client: fake.NewSimpleClientset(objs...)}
	w.Factory = externalversions.NewSharedInformerFactory(w.Client, 0)
	for _, o := range objs {
		w.Put(t, o)
	}
	return w
}

// Put adds or replaces obj in its informer's indexer (not in the
// clientset).
func (w *World) Put(t testing.TB, obj runtime.Object) {
	t.Helper()
	if err := w.indexer(t, obj).Update(obj); err != nil {
		t.Fatal(err)
	}
}

func (w *World) indexer(t testing.TB, obj runtime.Object) cache.Indexer {
	t.Helper()
	v, o, k := w.Factory.Velero().V1(), w.Factory.Oadp().V1alpha1(), w.Factory.Backup().V1alpha1()
	switch obj.(type) {
	case *velerov1.Backup:
		return v.Backups().Informer().GetIndexer()
	case *velerov1.Restore:
		return v.Restores().Informer().GetIndexer()
	case *velerov1.Schedule:
		return v.Schedules().Informer().GetIndexer()
	case *velerov1.BackupStorageLocation:
		return v.BackupStorageLocations().Informer().GetIndexer()
	case *velerov1.DeleteBackupRequest:
		return v.DeleteBackupRequests().Informer().GetIndexer()
	case *velerov1.DownloadRequest:
		return v.DownloadRequests().Informer().GetIndexer()
	case *velerov1.BackupRepository:
		return v.BackupRepositories().Informer().GetIndexer()
	case *oadpv1alpha1.NonAdminBackup:
		return o.NonAdminBackups().Informer().GetIndexer()
	case *oadpv1alpha1.NonAdminRestore:
		return o.NonAdminRestores().Informer().GetIndexer()
	case *oadpv1alpha1.NonAdminBackupStorageLocation:
		return o.NonAdminBackupStorageLocations().Informer().GetIndexer()
	case *oadpv1alpha1.NonAdminBackupStorageLocationRequest:
		return o.NonAdminBackupStorageLocationRequests().Informer().GetIndexer()
	case *oadpv1alpha1.NonAdminSchedule:
		return o.NonAdminSchedules().Informer().GetIndexer()
	case *oadpv1alpha1.NonAdminDownloadRequest:
		return o.NonAdminDownloadRequests().Informer().GetIndexer()
	case *oadpv1alpha1.DataProtectionApplication:
		return o.DataProtectionApplications().Informer().GetIndexer()
	case *kvv1alpha1.VirtualMachineBackup:
		return k.VirtualMachineBackups().Informer().GetIndexer()
	case *kvv1alpha1.VirtualMachineBackupTracker:
		return k.VirtualMachineBackupTrackers().Informer().GetIndexer()
	}
	t.Fatalf("enginetest: no informer for %T", obj)
	return nil
}

// Writes are the writes the engines made (creates, updates, status
// updates, deletes, patches), in order; reads are left out.
func (w *World) Writes() []clienttesting.Action {
	var out []clienttesting.Action
	for _, a := range w.Client.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
		default:
			out = append(out, a)
		}
	}
	return out
}
