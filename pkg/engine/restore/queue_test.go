package restore

import (
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	"github.com/backstop-io/backstop/pkg/apis/restoreas"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// queueWorld is a restore engine over backups whose resource lists are in
// a filesystem storage location.
type queueWorld struct {
	t      *testing.T
	bucket string
	objs   []runtime.Object
}

func newQueueWorld(t *testing.T) *queueWorld {
	bucket := t.TempDir()
	loc := &velerov1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: adminNS},
		Spec: velerov1.BackupStorageLocationSpec{Provider: objectstore.ProviderFilesystem,
			StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: bucket}}},
		Status: velerov1.BackupStorageLocationStatus{Phase: velerov1.BackupStorageLocationPhaseAvailable}}
	return &queueWorld{t: t, bucket: bucket, objs: []runtime.Object{loc}}
}

// backup adds a completed backup of namespaces whose resource list is
// list (nil: it has none).
func (q *queueWorld) backup(name string, namespaces []string, list map[string][]string) {
	b := backupOf(name, velerov1.BackupPhaseCompleted, nil, time.Now())
	b.Spec.IncludedNamespaces = namespaces
	q.objs = append(q.objs, b)
	if list == nil {
		return
	}
	data, err := json.Marshal(list)
	if err != nil {
		q.t.Fatal(err)
	}
	store, err := objectstore.NewFilesystem(q.bucket)
	if err != nil {
		q.t.Fatal(err)
	}
	key, _ := objectstore.NewLayout("").Key(velerov1.DownloadTargetKindBackupResourceList, name)
	if err := objectstore.PutGzip(context.Background(), store, key, data); err != nil {
		q.t.Fatal(err)
	}
}

// restore adds a waiting restore, sequence seq.
func (q *queueWorld) restore(name string, seq int, spec velerov1.RestoreSpec) *velerov1.Restore {
	r := restoreOf(name, spec, strconv.Itoa(seq))
	q.objs = append(q.objs, r)
	return r
}

var (
	configMapsOnly = map[string][]string{"v1/ConfigMap": {"a/one", "a/two"}, "v1/Namespace": {"a"}}
	withCRD        = map[string][]string{"v1/ConfigMap": {"a/one"}, "apiextensions.k8s.io/v1/CustomResourceDefinition": {"things.example.com"}}
	withContents   = map[string][]string{"snapshot.storage.k8s.io/v1/VolumeSnapshot": {"a/snap"}, "snapshot.storage.k8s.io/v1/VolumeSnapshotContent": {"snapcontent-1"}}
)

// TestStartable: which waiting restores start, in queue order, by what
// they write: their target namespaces (namespaceMapping applied) and
// cluster-scoped items, with the limit of concurrent restores.
func TestStartable(t *testing.T) {
	no := false
	ns := func(n ...string) velerov1.RestoreSpec {
		return velerov1.RestoreSpec{BackupName: "b-" + n[0], IncludedNamespaces: n}
	}
	for _, tc := range []struct {
		name string
		// build adds backups and restores; running are restores already
		// running (InProgress, in the engine).
		build      func(q *queueWorld) (running []*velerov1.Restore)
		concurrent int
		want       []string
	}{
		{name: "disjoint namespaces start together", build: func(q *queueWorld) []*velerov1.Restore {
			q.backup("b-a", []string{"a"}, configMapsOnly)
			q.backup("b-b", []string{"b"}, configMapsOnly)
			q.restore("r1", 1, ns("a"))
			q.restore("r2", 2, ns("b"))
			return nil
		}, want: []string{"r1", "r2"}},
		{name: "the same namespace waits for the one ahead", build: func(q *queueWorld) []*velerov1.Restore {
			q.backup("b-a", []string{"a"}, configMapsOnly)
			q.restore("r1", 1, ns("a"))
			q.restore("r2", 2, ns("a"))
			return nil
		}, want: []string{"r1"}},
		{name: "queue order, not name order", build: func(q *queueWorld) []*velerov1.Restore {
			q.backup("b-a", []string{"a"}, configMapsOnly)
			q.restore("r1", 20, ns("a"))
			q.restore("r2", 10, ns("a"))
			return nil
		}, want: []string{"r2"}},
		{name: "a running restore holds its namespaces", build: func(q *queueWorld) []*velerov1.Restore {
			q.backup("b-a", []string{"a"}, configMapsOnly)
			q.backup("b-b", []string{"b"}, configMapsOnly)
			q.restore("r2", 2, ns("a"))
			q.restore("r3", 3, ns("b"))
			return []*velerov1.Restore{q.restore("r1", 1, ns("a"))}
		}, want: []string{"r3"}},
		{name: "namespaceMapping: the target namespace counts", build: func(q *queueWorld) []*velerov1.Restore {
			q.backup("b-a", []string{"a"}, configMapsOnly)
			q.backup("b-b", []string{"b"}, configMapsOnly)
			q.restore("r1", 1, velerov1.RestoreSpec{BackupName: "b-a", NamespaceMapping: map[string]string{"a": "b"}})
			q.restore("r2", 2, ns("b"))
			q.restore("r3", 3, velerov1.RestoreSpec{BackupName: "b-b", NamespaceMapping: map[string]string{"b": "c"}})
			return nil
		}, want: []string{"r1", "r3"}},
		{name: "the backup's namespaces when the restore names none", build: func(q *queueWorld) []*velerov1.Restore {
			q.backup("b-a", []string{"a"}, configMapsOnly)
			q.backup("b-ab", []string{"a", "b"}, configMapsOnly)
			q.restore("r1", 1, velerov1.RestoreSpec{BackupName: "b-ab"})
			q.restore("r2", 2, velerov1.RestoreSpec{BackupName: "b-a"})
			return nil
		}, want: []string{"r1"}},
		{name: "every namespace: nothing behind it starts", build: func(q *queueWorld) []*velerov1.Restore {
			q.backup("b-all", nil, configMapsOnly)
			q.backup("b-b", []string{"b"}, configMapsOnly)
			q.restore("r1", 1, velerov1.RestoreSpec{BackupName: "b-all"})
			q.restore("r2", 2, ns("b"))
			return nil
		}, want: []string{"r1"}},
		{name: "a namespace pattern is every namespace", build: func(q *queueWorld) []*velerov1.Restore {
			q.backup("b-b", []string{"b"}, configMapsOnly)
			q.backup("b-x", []string{"x*"}, configMapsOnly)
			q.restore("r1", 1, velerov1.RestoreSpec{BackupName: "b-x"})
			q.restore("r2", 2, ns("b"))
			return nil
		}, want: []string{"r1"}},
		{name: "cluster-scoped writers run one after the other", build: func(q *queueWorld) []*velerov1.Restore {
			q.backup("b-a", []string{"a"}, withCRD)
			q.backup("b-b", []string{"b"}, withCRD)
			q.backup("b-c", []string{"c"}, configMapsOnly)
			q.restore("r1", 1, ns("a"))
			q.restore("r2", 2, ns("b"))
			q.restore("r3", 3, ns("c"))
			return nil
		}, want: []string{"r1", "r3"}},
		{name: "includeClusterResources false writes none", build: func(q *queueWorld) []*velerov1.Restore {
			q.backup("b-a", []string{"a"}, withCRD)
			q.backup("b-b", []string{"b"}, withCRD)
			q.restore("r1", 1, ns("a"))
			q.restore("r2", 2, velerov1.RestoreSpec{BackupName: "b-b", IncludedNamespaces: []string{"b"}, IncludeClusterResources: &no})
			return nil
		}, want: []string{"r1", "r2"}},
		{name: "a restore for a user writes the snapshot contents it takes", build: func(q *queueWorld) []*velerov1.Restore {
			q.backup("b-a", []string{"a"}, withContents)
			q.backup("b-b", []string{"b"}, withContents)
			q.restore("r1", 1, velerov1.RestoreSpec{BackupName: "b-a", IncludedNamespaces: []string{"a"}, IncludeClusterResources: &no})
			r2 := q.restore("r2", 2, velerov1.RestoreSpec{BackupName: "b-b", IncludedNamespaces: []string{"b"}, IncludeClusterResources: &no})
			r2.Annotations[restoreas.Annotation] = `{"username":"alice"}`
			return nil
		}, want: []string{"r1"}},
		{name: "without a resource list: cluster-scoped items assumed", build: func(q *queueWorld) []*velerov1.Restore {
			q.backup("b-a", []string{"a"}, nil)
			q.backup("b-b", []string{"b"}, withCRD)
			q.restore("r1", 1, ns("a"))
			q.restore("r2", 2, ns("b"))
			return nil
		}, want: []string{"r1"}},
		{name: "a preview writes nothing", build: func(q *queueWorld) []*velerov1.Restore {
			q.backup("b-a", []string{"a"}, configMapsOnly)
			q.restore("r2", 2, velerov1.RestoreSpec{BackupName: "b-a", IncludedNamespaces: []string{"a"}, Preview: true})
			return []*velerov1.Restore{q.restore("r1", 1, ns("a"))}
		}, want: []string{"r2"}},
		{name: "at most the limit", concurrent: 2, build: func(q *queueWorld) []*velerov1.Restore {
			for _, n := range []string{"a", "b", "c"} {
				q.backup("b-"+n, []string{n}, configMapsOnly)
			}
			q.restore("r1", 1, ns("a"))
			q.restore("r2", 2, ns("b"))
			q.restore("r3", 3, ns("c"))
			return nil
		}, want: []string{"r1", "r2"}},
		{name: "the limit counts those running", concurrent: 2, build: func(q *queueWorld) []*velerov1.Restore {
			for _, n := range []string{"a", "b", "c"} {
				q.backup("b-"+n, []string{n}, configMapsOnly)
			}
			q.restore("r2", 2, ns("b"))
			q.restore("r3", 3, ns("c"))
			return []*velerov1.Restore{q.restore("r1", 1, ns("a"))}
		}, want: []string{"r2"}},
		{name: "a deleted restore does not wait", build: func(q *queueWorld) []*velerov1.Restore {
			q.backup("b-a", []string{"a"}, configMapsOnly)
			r1 := q.restore("r1", 1, ns("a"))
			r1.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			q.restore("r2", 2, ns("a"))
			return nil
		}, want: []string{"r2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueueWorld(t)
			running := tc.build(q)
			c, _ := newEngine(t, q.objs...)
			if tc.concurrent > 0 {
				c.cfg.Concurrent = tc.concurrent
			}
			ctx := context.Background()
			for _, r := range running {
				r.Status.Phase = velerov1.RestorePhaseInProgress
				c.running[r.UID] = &restoreRun{r: r, entry: c.entryOf(r, c.footprintOf(ctx, r))}
			}
			var got []string
			for _, cd := range c.startable(ctx) {
				got = append(got, cd.r.Name)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("startable %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFootprintOfTenantBackup: an admin's restore of a tenant's backup
// runs narrowed to the tenant's namespace, so that is what it writes.
func TestFootprintOfTenantBackup(t *testing.T) {
	q := newQueueWorld(t)
	q.backup("b", nil, withCRD)
	b := q.objs[len(q.objs)-1].(*velerov1.Backup)
	b.Annotations = map[string]string{oadpv1alpha1.NabOriginNamespaceAnnotation: "tenant-1"}
	r := q.restore("r", 1, velerov1.RestoreSpec{BackupName: "b"})
	c, _ := newEngine(t, q.objs...)
	got := c.footprintOf(context.Background(), r)
	if want := (footprint{namespaces: []string{"tenant-1"}}); !reflect.DeepEqual(got, want) {
		t.Errorf("footprint %+v, want %+v", got, want)
	}
	r.Annotations[oadpv1alpha1.FullRightsAnnotation] = "true"
	if got := c.footprintOf(context.Background(), r); !got.all {
		t.Errorf("with full rights: footprint %+v, want every namespace (as its spec says)", got)
	}
}
