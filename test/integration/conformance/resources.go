// Package conformance is the API conformance suite of Backstop's resources:
// every verb of the Kubernetes API on every served resource, with the
// status rules, run by the standalone tests against the server itself and
// by the cluster tests through kube-apiserver.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	kvbackupv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
)

// ns is the admin namespace, where the engines process Velero objects.
const ns = "backstop-system"

// Namespaces are the namespaces the suite creates objects in (the admin
// namespace, a tenant's, a VM owner's); they must exist.
var Namespaces = []string{ns, "tenant-a", "vms"}

// Target is the server under test.
type Target struct {
	// Client is a cluster admin's.
	Client versioned.Interface
	// Engine acts as the server's engines (it may write their status).
	Engine versioned.Interface
}

// typedClient is the method set client-gen generates for every resource.
type typedClient[T any, L any] interface {
	Create(ctx context.Context, obj *T, opts metav1.CreateOptions) (*T, error)
	Update(ctx context.Context, obj *T, opts metav1.UpdateOptions) (*T, error)
	UpdateStatus(ctx context.Context, obj *T, opts metav1.UpdateOptions) (*T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*T, error)
	List(ctx context.Context, opts metav1.ListOptions) (*L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*T, error)
}

// resourceCase describes one resource for exercise.
type resourceCase[T any, L any] struct {
	gvk    schema.GroupVersionKind
	client typedClient[T, L]
	// engine, when set, writes the status: the resource's status is the
	// server's engines' (resource.Engines); the admin's write is refused.
	engine typedClient[T, L]
	// valid returns a valid new object.
	valid func(name string) *T
	// changeSpec changes the spec validly; nil when the spec is immutable
	// (then a change must be refused with 422) or has no fields.
	changeSpec func(*T)
	// immutable: any spec change is refused.
	immutable func(*T)
	spec      func(*T) any
	status    func(*T) any
	setStatus func(*T)
	invalid   func(name string) *T
	invalidAt string // the field path the invalid object is refused at
	// release, when set, is the owner's word a deleted object waits for
	// (a NonAdminBackup waits to be told what becomes of its backup).
	release func(*T)
}

func objMeta(o any) metav1.Object { return o.(metav1.Object) }

// exercise runs every verb on one resource through the generated clientset.
func exercise[T any, L any](c resourceCase[T, L]) func(t *testing.T) {
	return func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cl := c.client

		list, err := cl.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		w, err := cl.Watch(ctx, metav1.ListOptions{ResourceVersion: listRV(t, list), FieldSelector: "metadata.name=obj1"})
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		defer w.Stop()

		// create: the status sent is dropped, generation starts at 1.
		obj := c.valid("obj1")
		c.setStatus(obj)
		created, err := cl.Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		if g := objMeta(created).GetGeneration(); g != 1 {
			t.Errorf("generation after create = %d, want 1", g)
		}
		if !isZero(c.status(created)) {
			t.Errorf("status after create = %+v, want it empty (status is set through the status subresource only)", c.status(created))
		}
		if _, err := cl.Create(ctx, c.valid("obj1"), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
			t.Errorf("second create: got %v, want AlreadyExists", err)
		}

		got, err := cl.Get(ctx, "obj1", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if !apiequality.Semantic.DeepEqual(c.spec(got), c.spec(created)) {
			t.Errorf("get returned spec %+v, want %+v", c.spec(got), c.spec(created))
		}

		// update of the main resource: the status sent is ignored. Engines
		// may write the status meanwhile: read, change and write again on
		// conflict, and compare with the status that was read.
		var before, updated *T
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := cl.Get(ctx, "obj1", metav1.GetOptions{})
			if err != nil {
				return err
			}
			before = deepCopy(cur)
			c.setStatus(cur)
			if c.changeSpec != nil {
				c.changeSpec(cur)
			}
			updated, err = cl.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("update: %v", err)
		}
		wantGen := int64(1)
		if c.changeSpec != nil {
			wantGen = 2
		}
		if g := objMeta(updated).GetGeneration(); g != wantGen {
			t.Errorf("generation after spec update = %d, want %d", g, wantGen)
		}
		if !apiequality.Semantic.DeepEqual(c.status(updated), c.status(before)) {
			t.Errorf("update of the main resource changed the status from %+v to %+v", c.status(before), c.status(updated))
		}
		if c.immutable != nil {
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur, err := cl.Get(ctx, "obj1", metav1.GetOptions{})
				if err != nil {
					return err
				}
				c.immutable(cur)
				_, err = cl.Update(ctx, cur, metav1.UpdateOptions{})
				return err
			})
			if !apierrors.IsInvalid(err) {
				t.Errorf("update of an immutable spec: got %v, want 422 Invalid", err)
			}
		}

		// status subresource: the status changes, the spec and generation do not.
		var specBefore any
		var statusUpdated *T
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := cl.Get(ctx, "obj1", metav1.GetOptions{})
			if err != nil {
				return err
			}
			specBefore = c.spec(deepCopy(cur))
			c.setStatus(cur)
			if c.changeSpec != nil {
				c.changeSpec(cur)
				c.changeSpec(cur)
			}
			writer := cl
			if c.engine != nil {
				writer = c.engine
			}
			statusUpdated, err = writer.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("update status: %v", err)
		}
		want := deepCopy(statusUpdated)
		c.setStatus(want)
		if isZero(c.status(statusUpdated)) || !apiequality.Semantic.DeepEqual(c.status(statusUpdated), c.status(want)) {
			t.Errorf("update status did not set the status: %+v", c.status(statusUpdated))
		}
		if !apiequality.Semantic.DeepEqual(c.spec(statusUpdated), specBefore) {
			t.Errorf("update status changed the spec to %+v", c.spec(statusUpdated))
		}
		if g := objMeta(statusUpdated).GetGeneration(); g != wantGen {
			t.Errorf("generation after a status update = %d, want %d", g, wantGen)
		}

		// merge patch of metadata: generation unchanged.
		patched, err := cl.Patch(ctx, "obj1", types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"gold"}}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("merge patch: %v", err)
		}
		if objMeta(patched).GetLabels()["tier"] != "gold" || objMeta(patched).GetGeneration() != wantGen {
			t.Errorf("merge patch: labels %v generation %d", objMeta(patched).GetLabels(), objMeta(patched).GetGeneration())
		}
		// JSON patch.
		patched, err = cl.Patch(ctx, "obj1", types.JSONPatchType, []byte(`[{"op":"add","path":"/metadata/annotations","value":{"note":"json-patch"}}]`), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("json patch: %v", err)
		}
		if objMeta(patched).GetAnnotations()["note"] != "json-patch" {
			t.Errorf("json patch: annotations %v", objMeta(patched).GetAnnotations())
		}
		// server-side apply: the field manager is recorded.
		applied, err := cl.Patch(ctx, "obj1", types.ApplyPatchType,
			[]byte(fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{"name":"obj1","labels":{"applied":"yes"}}}`, c.gvk.GroupVersion().String(), c.gvk.Kind)),
			metav1.PatchOptions{FieldManager: "integration-test"})
		if err != nil {
			t.Fatalf("server-side apply: %v", err)
		}
		if objMeta(applied).GetLabels()["applied"] != "yes" || !hasManager(objMeta(applied), "integration-test") {
			t.Errorf("server-side apply: labels %v, managers %v", objMeta(applied).GetLabels(), Managers(objMeta(applied)))
		}
		// status patch through the subresource.
		if _, err := cl.Patch(ctx, "obj1", types.MergePatchType, []byte(`{"metadata":{"labels":{"via":"status"}}}`), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatalf("merge patch of the status subresource: %v", err)
		}

		// list with a label selector.
		sel, err := cl.List(ctx, metav1.ListOptions{LabelSelector: "tier=gold"})
		if err != nil {
			t.Fatalf("list with selector: %v", err)
		}
		if n := meta.LenList(any(sel).(runtime.Object)); n != 1 {
			t.Errorf("list tier=gold: %d items, want 1", n)
		}

		// finalizers hold the object with a deletionTimestamp.
		held, err := cl.Patch(ctx, "obj1", types.MergePatchType, []byte(`{"metadata":{"finalizers":["backstop.io/test"]}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("adding a finalizer: %v", err)
		}
		if err := cl.Delete(ctx, "obj1", metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete with a finalizer: %v", err)
		}
		held, err = cl.Get(ctx, "obj1", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get after delete with a finalizer: %v", err)
		}
		if objMeta(held).GetDeletionTimestamp() == nil {
			t.Errorf("object with a finalizer has no deletionTimestamp after delete")
		}
		if _, err := cl.Patch(ctx, "obj1", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("removing the finalizer: %v", err)
		}
		if _, err := cl.Get(ctx, "obj1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("get after the finalizer was removed: got %v, want NotFound", err)
		}

		// the watch saw the whole life of obj1, in order.
		wantEvents := []watch.EventType{watch.Added, watch.Modified, watch.Deleted}
		seen := collectUntilDeleted(t, w)
		if len(seen) < 3 || seen[0] != watch.Added || seen[len(seen)-1] != watch.Deleted {
			t.Errorf("watch events %v, want %v with MODIFIED in between", seen, wantEvents)
		}

		// deletecollection by label.
		for _, name := range []string{"obj2", "obj3"} {
			o := c.valid(name)
			objMeta(o).SetLabels(map[string]string{"batch": "x"})
			if _, err := cl.Create(ctx, o, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create %s: %v", name, err)
			}
		}
		if err := cl.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "batch=x"}); err != nil {
			t.Fatalf("deletecollection: %v", err)
		}
		// Resources whose engines clean up after them (finalizers) go
		// once the engine is done, and once released by their owner when
		// they wait for that.
		var left int
		released := map[string]bool{}
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			list, err := cl.List(ctx, metav1.ListOptions{LabelSelector: "batch=x"})
			if err != nil {
				return false, err
			}
			items, err := meta.ExtractList(any(list).(runtime.Object))
			if err != nil {
				return false, err
			}
			left = len(items)
			for _, item := range items {
				m := objMeta(item)
				if c.release == nil || m.GetDeletionTimestamp() == nil || released[m.GetName()] {
					continue
				}
				cur := any(item).(*T)
				c.release(cur)
				if _, err := cl.Update(ctx, cur, metav1.UpdateOptions{}); err == nil {
					released[m.GetName()] = true
				}
			}
			return left == 0, nil
		}); err != nil {
			t.Errorf("deletecollection left %d objects: %v", left, err)
		}

		// validation.
		if c.invalid != nil {
			_, err := cl.Create(ctx, c.invalid("bad"), metav1.CreateOptions{})
			assertInvalidAt(t, err, c.invalidAt)
			if _, err := cl.Get(ctx, "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("the refused object was stored: get returned %v", err)
			}
		}
	}
}

func listRV(t *testing.T, list any) string {
	t.Helper()
	acc, err := meta.ListAccessor(list)
	if err != nil {
		t.Fatalf("list accessor: %v", err)
	}
	return acc.GetResourceVersion()
}

func deepCopy[T any](o *T) *T {
	return any(o).(runtime.Object).DeepCopyObject().(any).(*T)
}

func hasManager(m metav1.Object, name string) bool {
	for _, f := range m.GetManagedFields() {
		if f.Manager == name {
			return true
		}
	}
	return false
}

// Managers lists the field managers of m and their operations.
func Managers(m metav1.Object) []string {
	var out []string
	for _, f := range m.GetManagedFields() {
		out = append(out, f.Manager+"/"+string(f.Operation))
	}
	return out
}

func collectUntilDeleted(t *testing.T, w watch.Interface) []watch.EventType {
	t.Helper()
	var seen []watch.EventType
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Errorf("watch closed early after %v", seen)
				return seen
			}
			if ev.Type == watch.Error {
				t.Errorf("watch error: %v", apierrors.FromObject(ev.Object))
				return seen
			}
			seen = append(seen, ev.Type)
			if ev.Type == watch.Deleted {
				return seen
			}
		case <-deadline:
			t.Errorf("no DELETED event within the deadline; saw %v", seen)
			return seen
		}
	}
}

// assertInvalidAt checks err is a 422 naming field.
func assertInvalidAt(t *testing.T, err error, field string) {
	t.Helper()
	if !InvalidAt(err, field, "") {
		t.Errorf("got %v, want 422 Invalid with a cause at %s", err, field)
	}
}

// suiteCase is one resource's part of the suite.
type suiteCase struct {
	run func(t *testing.T)
	// valid returns a valid new object of the resource, with its kind.
	valid func(name string) runtime.Object
}

func newCase[T any, L any](c resourceCase[T, L]) suiteCase {
	return suiteCase{run: exercise(c), valid: func(name string) runtime.Object {
		obj := any(c.valid(name)).(runtime.Object)
		obj.GetObjectKind().SetGroupVersionKind(c.gvk)
		return obj
	}}
}

// EveryResourceAndVerb runs every verb on every served resource of
// target: create, get, list, watch, update, the patches (merge, JSON,
// apply), the status subresource and its rules, finalizers, delete and
// deletecollection, bad input. Run it with the backup engine off (backups
// stay as the suite writes them).
func EveryResourceAndVerb(t *testing.T, target Target) {
	Prerequisites(t, target)
	cases := suite(target)
	// Every served resource has a case.
	for r := range servedResources(t, target.Client) {
		if _, ok := cases[r]; !ok {
			t.Errorf("resource %s is served but has no case in this test", r)
		}
	}
	for name, c := range cases {
		t.Run(name, c.run)
	}
}

// Prerequisites creates what valid objects name: the NonAdminBackup nab1
// that NonAdminRestores restore from.
func Prerequisites(t *testing.T, target Target) {
	t.Helper()
	nab := &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: "nab1", Namespace: "tenant-a"},
		Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{}}}
	if _, err := target.Client.OadpV1alpha1().NonAdminBackups("tenant-a").Create(context.Background(), nab, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating NonAdminBackup tenant-a/nab1: %v", err)
	}
}

// ValidObjects returns a valid new object named name of every resource
// the suite covers, by resource.
func ValidObjects(target Target, name string) map[string]runtime.Object {
	out := map[string]runtime.Object{}
	for resource, c := range suite(target) {
		out[resource] = c.valid(name)
	}
	return out
}

// suite is the case of each resource.
func suite(target Target) map[string]suiteCase {
	cs := target.Client
	velero := cs.VeleroV1()
	oadp := cs.OadpV1alpha1()
	kv := cs.BackupV1alpha1()
	engine := target.Engine
	om := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }
	vmRef := corev1.TypedLocalObjectReference{APIGroup: ptr.To("kubevirt.io"), Kind: "VirtualMachine", Name: "vm1"}

	return map[string]suiteCase{
		"backups": newCase(resourceCase[velerov1.Backup, velerov1.BackupList]{
			gvk: velerov1.SchemeGroupVersion.WithKind("Backup"), client: velero.Backups(ns), engine: engine.VeleroV1().Backups(ns),
			valid: func(n string) *velerov1.Backup {
				return &velerov1.Backup{ObjectMeta: om(n), Spec: velerov1.BackupSpec{IncludedNamespaces: []string{"app"}}}
			},
			changeSpec: func(b *velerov1.Backup) { b.Spec.IncludedNamespaces = append(b.Spec.IncludedNamespaces, "more") },
			spec:       func(b *velerov1.Backup) any { return b.Spec },
			status:     func(b *velerov1.Backup) any { return b.Status },
			setStatus:  func(b *velerov1.Backup) { b.Status.Warnings = 3 },
			invalid: func(n string) *velerov1.Backup {
				return &velerov1.Backup{ObjectMeta: om(n), Spec: velerov1.BackupSpec{IncludedNamespaces: []string{"a"}, ExcludedNamespaces: []string{"a"}}}
			},
			invalidAt: "spec.excludedNamespaces[0]",
		}),
		"schedules": newCase(resourceCase[velerov1.Schedule, velerov1.ScheduleList]{
			gvk: velerov1.SchemeGroupVersion.WithKind("Schedule"), client: velero.Schedules(ns), engine: engine.VeleroV1().Schedules(ns),
			valid: func(n string) *velerov1.Schedule {
				return &velerov1.Schedule{ObjectMeta: om(n), Spec: velerov1.ScheduleSpec{Schedule: "@every 1h"}}
			},
			changeSpec: func(s *velerov1.Schedule) { s.Spec.Paused = !s.Spec.Paused },
			spec:       func(s *velerov1.Schedule) any { return s.Spec },
			status:     func(s *velerov1.Schedule) any { return s.Status },
			setStatus:  func(s *velerov1.Schedule) { s.Status.Phase = velerov1.SchedulePhaseEnabled },
			invalid: func(n string) *velerov1.Schedule {
				return &velerov1.Schedule{ObjectMeta: om(n), Spec: velerov1.ScheduleSpec{Schedule: "every tuesday"}}
			},
			invalidAt: "spec.schedule",
		}),
		"restores": newCase(resourceCase[velerov1.Restore, velerov1.RestoreList]{
			gvk: velerov1.SchemeGroupVersion.WithKind("Restore"), client: velero.Restores(ns), engine: engine.VeleroV1().Restores(ns),
			valid: func(n string) *velerov1.Restore {
				return &velerov1.Restore{ObjectMeta: om(n), Spec: velerov1.RestoreSpec{BackupName: "b1"}}
			},
			changeSpec: func(r *velerov1.Restore) { r.Spec.IncludedNamespaces = append(r.Spec.IncludedNamespaces, "x") },
			spec:       func(r *velerov1.Restore) any { return r.Spec },
			status: func(r *velerov1.Restore) any {
				st := r.Status
				st.QueuePosition = 0 // read from the queue, not stored
				return st
			},
			setStatus: func(r *velerov1.Restore) { r.Status.Warnings = 2 },
			invalid:   func(n string) *velerov1.Restore { return &velerov1.Restore{ObjectMeta: om(n)} },
			invalidAt: "spec.backupName",
		}),
		"deletebackuprequests": newCase(resourceCase[velerov1.DeleteBackupRequest, velerov1.DeleteBackupRequestList]{
			gvk: velerov1.SchemeGroupVersion.WithKind("DeleteBackupRequest"), client: velero.DeleteBackupRequests(ns), engine: engine.VeleroV1().DeleteBackupRequests(ns),
			valid: func(n string) *velerov1.DeleteBackupRequest {
				return &velerov1.DeleteBackupRequest{ObjectMeta: om(n), Spec: velerov1.DeleteBackupRequestSpec{BackupName: "b1"}}
			},
			changeSpec: func(d *velerov1.DeleteBackupRequest) { d.Spec.BackupName += "x" },
			spec:       func(d *velerov1.DeleteBackupRequest) any { return d.Spec },
			status:     func(d *velerov1.DeleteBackupRequest) any { return d.Status },
			setStatus:  func(d *velerov1.DeleteBackupRequest) { d.Status.Errors = []string{"an error"} },
			invalid: func(n string) *velerov1.DeleteBackupRequest {
				return &velerov1.DeleteBackupRequest{ObjectMeta: om(n)}
			},
			invalidAt: "spec.backupName",
		}),
		"backupstoragelocations": newCase(resourceCase[velerov1.BackupStorageLocation, velerov1.BackupStorageLocationList]{
			gvk: velerov1.SchemeGroupVersion.WithKind("BackupStorageLocation"), client: velero.BackupStorageLocations(ns),
			valid: func(n string) *velerov1.BackupStorageLocation {
				return &velerov1.BackupStorageLocation{ObjectMeta: om(n), Spec: velerov1.BackupStorageLocationSpec{
					Provider: "filesystem", StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: "/var/backups"}}}}
			},
			changeSpec: func(l *velerov1.BackupStorageLocation) { l.Spec.ObjectStorage.Prefix += "p" },
			spec:       func(l *velerov1.BackupStorageLocation) any { return l.Spec },
			status:     func(l *velerov1.BackupStorageLocation) any { return l.Status },
			setStatus:  func(l *velerov1.BackupStorageLocation) { l.Status.Phase = velerov1.BackupStorageLocationPhaseAvailable },
			invalid: func(n string) *velerov1.BackupStorageLocation {
				return &velerov1.BackupStorageLocation{ObjectMeta: om(n), Spec: velerov1.BackupStorageLocationSpec{
					StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: "b"}}}}
			},
			invalidAt: "spec.provider",
		}),
		"downloadrequests": newCase(resourceCase[velerov1.DownloadRequest, velerov1.DownloadRequestList]{
			gvk: velerov1.SchemeGroupVersion.WithKind("DownloadRequest"), client: velero.DownloadRequests(ns),
			valid: func(n string) *velerov1.DownloadRequest {
				return &velerov1.DownloadRequest{ObjectMeta: om(n), Spec: velerov1.DownloadRequestSpec{Target: velerov1.DownloadTarget{Kind: velerov1.DownloadTargetKindBackupLog, Name: "b1"}}}
			},
			changeSpec: func(d *velerov1.DownloadRequest) { d.Spec.Target.Name += "x" },
			spec:       func(d *velerov1.DownloadRequest) any { return d.Spec },
			status:     func(d *velerov1.DownloadRequest) any { return d.Status },
			setStatus:  func(d *velerov1.DownloadRequest) { d.Status.Phase = velerov1.DownloadRequestPhaseProcessed },
			invalid: func(n string) *velerov1.DownloadRequest {
				return &velerov1.DownloadRequest{ObjectMeta: om(n), Spec: velerov1.DownloadRequestSpec{Target: velerov1.DownloadTarget{Kind: "Bogus", Name: "b1"}}}
			},
			invalidAt: "spec.target.kind",
		}),
		"serverstatusrequests": newCase(resourceCase[velerov1.ServerStatusRequest, velerov1.ServerStatusRequestList]{
			gvk: velerov1.SchemeGroupVersion.WithKind("ServerStatusRequest"), client: velero.ServerStatusRequests(ns),
			valid: func(n string) *velerov1.ServerStatusRequest {
				return &velerov1.ServerStatusRequest{ObjectMeta: om(n)}
			},
			spec:      func(r *velerov1.ServerStatusRequest) any { return r.Spec },
			status:    func(r *velerov1.ServerStatusRequest) any { return r.Status },
			setStatus: func(r *velerov1.ServerStatusRequest) { r.Status.Phase = velerov1.ServerStatusRequestPhaseProcessed },
		}),
		"podvolumebackups": newCase(resourceCase[velerov1.PodVolumeBackup, velerov1.PodVolumeBackupList]{
			gvk: velerov1.SchemeGroupVersion.WithKind("PodVolumeBackup"), client: velero.PodVolumeBackups(ns),
			valid: func(n string) *velerov1.PodVolumeBackup {
				return &velerov1.PodVolumeBackup{ObjectMeta: om(n), Spec: velerov1.PodVolumeBackupSpec{Node: "n1", Volume: "data"}}
			},
			changeSpec: func(p *velerov1.PodVolumeBackup) { p.Spec.Node += "x" },
			spec:       func(p *velerov1.PodVolumeBackup) any { return p.Spec },
			status:     func(p *velerov1.PodVolumeBackup) any { return p.Status },
			setStatus:  func(p *velerov1.PodVolumeBackup) { p.Status.Phase = velerov1.PodVolumeBackupPhaseCompleted },
		}),
		"podvolumerestores": newCase(resourceCase[velerov1.PodVolumeRestore, velerov1.PodVolumeRestoreList]{
			gvk: velerov1.SchemeGroupVersion.WithKind("PodVolumeRestore"), client: velero.PodVolumeRestores(ns),
			valid: func(n string) *velerov1.PodVolumeRestore {
				return &velerov1.PodVolumeRestore{ObjectMeta: om(n), Spec: velerov1.PodVolumeRestoreSpec{Volume: "data"}}
			},
			changeSpec: func(p *velerov1.PodVolumeRestore) { p.Spec.Volume += "x" },
			spec:       func(p *velerov1.PodVolumeRestore) any { return p.Spec },
			status:     func(p *velerov1.PodVolumeRestore) any { return p.Status },
			setStatus:  func(p *velerov1.PodVolumeRestore) { p.Status.Phase = velerov1.PodVolumeRestorePhaseCompleted },
		}),
		"backuprepositories": newCase(resourceCase[velerov1.BackupRepository, velerov1.BackupRepositoryList]{
			gvk: velerov1.SchemeGroupVersion.WithKind("BackupRepository"), client: velero.BackupRepositories(ns),
			valid: func(n string) *velerov1.BackupRepository {
				return &velerov1.BackupRepository{ObjectMeta: om(n), Spec: velerov1.BackupRepositorySpec{VolumeNamespace: "app", BackupStorageLocation: "default", RepositoryType: "kopia"}}
			},
			changeSpec: func(r *velerov1.BackupRepository) { r.Spec.VolumeNamespace += "x" },
			spec:       func(r *velerov1.BackupRepository) any { return r.Spec },
			status:     func(r *velerov1.BackupRepository) any { return r.Status },
			setStatus:  func(r *velerov1.BackupRepository) { r.Status.Phase = velerov1.BackupRepositoryPhaseReady },
		}),
		"volumesnapshotlocations": newCase(resourceCase[velerov1.VolumeSnapshotLocation, velerov1.VolumeSnapshotLocationList]{
			gvk: velerov1.SchemeGroupVersion.WithKind("VolumeSnapshotLocation"), client: velero.VolumeSnapshotLocations(ns),
			valid: func(n string) *velerov1.VolumeSnapshotLocation {
				return &velerov1.VolumeSnapshotLocation{ObjectMeta: om(n), Spec: velerov1.VolumeSnapshotLocationSpec{Provider: "csi"}}
			},
			changeSpec: func(l *velerov1.VolumeSnapshotLocation) { l.Spec.Config = map[string]string{"k": "v"} },
			spec:       func(l *velerov1.VolumeSnapshotLocation) any { return l.Spec },
			status:     func(l *velerov1.VolumeSnapshotLocation) any { return l.Status },
			setStatus: func(l *velerov1.VolumeSnapshotLocation) {
				l.Status.Phase = velerov1.VolumeSnapshotLocationPhaseAvailable
			},
			invalid: func(n string) *velerov1.VolumeSnapshotLocation {
				return &velerov1.VolumeSnapshotLocation{ObjectMeta: om(n)}
			},
			invalidAt: "spec.provider",
		}),
		"datauploads": newCase(resourceCase[velerov2alpha1.DataUpload, velerov2alpha1.DataUploadList]{
			gvk: velerov2alpha1.SchemeGroupVersion.WithKind("DataUpload"), client: cs.VeleroV2alpha1().DataUploads(ns), engine: engine.VeleroV2alpha1().DataUploads(ns),
			valid: func(n string) *velerov2alpha1.DataUpload {
				return &velerov2alpha1.DataUpload{ObjectMeta: om(n), Spec: velerov2alpha1.DataUploadSpec{
					SnapshotType: velerov2alpha1.SnapshotTypeCSI, CSISnapshot: &velerov2alpha1.CSISnapshotSpec{VolumeSnapshot: "velero-data-x1", StorageClass: "csi-hostpath-sc"},
					SourcePVC: "data", SourceNamespace: "app", BackupStorageLocation: "default", OperationTimeout: metav1.Duration{Duration: 10 * time.Minute}}}
			},
			immutable: func(d *velerov2alpha1.DataUpload) { d.Spec.SourcePVC += "x" },
			spec:      func(d *velerov2alpha1.DataUpload) any { return d.Spec },
			status:    func(d *velerov2alpha1.DataUpload) any { return d.Status },
			setStatus: func(d *velerov2alpha1.DataUpload) { d.Status.Phase = velerov2alpha1.DataUploadPhaseAccepted },
			invalid: func(n string) *velerov2alpha1.DataUpload {
				return &velerov2alpha1.DataUpload{ObjectMeta: om(n), Spec: velerov2alpha1.DataUploadSpec{
					SnapshotType: velerov2alpha1.SnapshotTypeCSI, CSISnapshot: &velerov2alpha1.CSISnapshotSpec{VolumeSnapshot: "velero-data-x1", StorageClass: "csi-hostpath-sc"},
					SourcePVC: "../../etc", SourceNamespace: "app", BackupStorageLocation: "default"}}
			},
			invalidAt: "spec.sourcePVC",
		}),
		"datadownloads": newCase(resourceCase[velerov2alpha1.DataDownload, velerov2alpha1.DataDownloadList]{
			gvk: velerov2alpha1.SchemeGroupVersion.WithKind("DataDownload"), client: cs.VeleroV2alpha1().DataDownloads(ns), engine: engine.VeleroV2alpha1().DataDownloads(ns),
			valid: func(n string) *velerov2alpha1.DataDownload {
				return &velerov2alpha1.DataDownload{ObjectMeta: om(n), Spec: velerov2alpha1.DataDownloadSpec{
					TargetVolume: velerov2alpha1.TargetVolumeSpec{PVC: "data", Namespace: "app"}, SnapshotID: "k3f9a0b1c2d3e4f5",
					SourceNamespace: "app", BackupStorageLocation: "default", OperationTimeout: metav1.Duration{Duration: 10 * time.Minute}}}
			},
			immutable: func(d *velerov2alpha1.DataDownload) { d.Spec.SnapshotID += "x" },
			spec:      func(d *velerov2alpha1.DataDownload) any { return d.Spec },
			status:    func(d *velerov2alpha1.DataDownload) any { return d.Status },
			setStatus: func(d *velerov2alpha1.DataDownload) { d.Status.Phase = velerov2alpha1.DataDownloadPhaseAccepted },
			invalid: func(n string) *velerov2alpha1.DataDownload {
				return &velerov2alpha1.DataDownload{ObjectMeta: om(n), Spec: velerov2alpha1.DataDownloadSpec{
					TargetVolume: velerov2alpha1.TargetVolumeSpec{PVC: "data", Namespace: "app"}, SnapshotID: "../../k1",
					SourceNamespace: "app", BackupStorageLocation: "default"}}
			},
			invalidAt: "spec.snapshotID",
		}),
		"nonadminbackups": newCase(resourceCase[oadpv1alpha1.NonAdminBackup, oadpv1alpha1.NonAdminBackupList]{
			gvk: oadpv1alpha1.SchemeGroupVersion.WithKind("NonAdminBackup"), client: oadp.NonAdminBackups("tenant-a"), engine: engine.OadpV1alpha1().NonAdminBackups("tenant-a"),
			valid: func(n string) *oadpv1alpha1.NonAdminBackup {
				return &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "tenant-a"},
					Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{IncludedNamespaces: []string{"tenant-a"}}}}
			},
			// Its only mutable fields (deleteBackup, forceDeleteBackup)
			// delete it: the delete flows have their own tests.
			immutable: func(b *oadpv1alpha1.NonAdminBackup) { b.Spec.BackupSpec.TTL = metav1.Duration{Duration: time.Hour} },
			release:   func(b *oadpv1alpha1.NonAdminBackup) { b.Spec.DeleteBackup = true },
			spec:      func(b *oadpv1alpha1.NonAdminBackup) any { return b.Spec },
			status: func(b *oadpv1alpha1.NonAdminBackup) any {
				st := b.Status.DeepCopy()
				withoutQueuePosition(st.QueueInfo)
				if vb := st.VeleroBackup; vb != nil && vb.Status != nil {
					vb.Status.QueuePosition = 0 // also read from the queue
				}
				return *st
			},
			setStatus: func(b *oadpv1alpha1.NonAdminBackup) { b.Status.Phase = oadpv1alpha1.NonAdminPhaseCreated },
			invalid: func(n string) *oadpv1alpha1.NonAdminBackup {
				return &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "tenant-a"},
					Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{IncludedNamespaces: []string{"tenant-b"}}}}
			},
			invalidAt: "spec.backupSpec.includedNamespaces[0]",
		}),
		"nonadminrestores": newCase(resourceCase[oadpv1alpha1.NonAdminRestore, oadpv1alpha1.NonAdminRestoreList]{
			gvk: oadpv1alpha1.SchemeGroupVersion.WithKind("NonAdminRestore"), client: oadp.NonAdminRestores("tenant-a"), engine: engine.OadpV1alpha1().NonAdminRestores("tenant-a"),
			valid: func(n string) *oadpv1alpha1.NonAdminRestore {
				return &oadpv1alpha1.NonAdminRestore{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "tenant-a"},
					Spec: oadpv1alpha1.NonAdminRestoreSpec{RestoreSpec: &velerov1.RestoreSpec{BackupName: "nab1"}}}
			},
			immutable: func(r *oadpv1alpha1.NonAdminRestore) { r.Spec.RestoreSpec.BackupName = "other" },
			spec:      func(r *oadpv1alpha1.NonAdminRestore) any { return r.Spec },
			status: func(r *oadpv1alpha1.NonAdminRestore) any {
				st := r.Status.DeepCopy()
				withoutQueuePosition(st.QueueInfo)
				return *st
			},
			setStatus: func(r *oadpv1alpha1.NonAdminRestore) { r.Status.Phase = oadpv1alpha1.NonAdminPhaseCreated },
			invalid: func(n string) *oadpv1alpha1.NonAdminRestore {
				return &oadpv1alpha1.NonAdminRestore{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "tenant-a"},
					Spec: oadpv1alpha1.NonAdminRestoreSpec{RestoreSpec: &velerov1.RestoreSpec{}}}
			},
			invalidAt: "spec.restoreSpec.backupName",
		}),
		"nonadminbackupstoragelocations": newCase(resourceCase[oadpv1alpha1.NonAdminBackupStorageLocation, oadpv1alpha1.NonAdminBackupStorageLocationList]{
			gvk: oadpv1alpha1.SchemeGroupVersion.WithKind("NonAdminBackupStorageLocation"), client: oadp.NonAdminBackupStorageLocations("tenant-a"), engine: engine.OadpV1alpha1().NonAdminBackupStorageLocations("tenant-a"),
			valid: func(n string) *oadpv1alpha1.NonAdminBackupStorageLocation {
				return &oadpv1alpha1.NonAdminBackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "tenant-a"},
					Spec: oadpv1alpha1.NonAdminBackupStorageLocationSpec{BackupStorageLocationSpec: &velerov1.BackupStorageLocationSpec{
						Provider: "aws", Config: map[string]string{"region": "us-east-1"},
						Credential:  &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "cloud"},
						StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: "tenant-a"}}}}}
			},
			immutable: func(l *oadpv1alpha1.NonAdminBackupStorageLocation) {
				l.Spec.BackupStorageLocationSpec.ObjectStorage.Bucket = "other"
			},
			spec:   func(l *oadpv1alpha1.NonAdminBackupStorageLocation) any { return l.Spec },
			status: func(l *oadpv1alpha1.NonAdminBackupStorageLocation) any { return l.Status },
			setStatus: func(l *oadpv1alpha1.NonAdminBackupStorageLocation) {
				l.Status.Phase = oadpv1alpha1.NonAdminPhaseCreated
			},
			invalid: func(n string) *oadpv1alpha1.NonAdminBackupStorageLocation {
				return &oadpv1alpha1.NonAdminBackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "tenant-a"},
					Spec: oadpv1alpha1.NonAdminBackupStorageLocationSpec{BackupStorageLocationSpec: &velerov1.BackupStorageLocationSpec{
						Provider: "filesystem", Credential: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "cloud"},
						StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: "/etc"}}}}}
			},
			invalidAt: "spec.backupStorageLocationSpec.provider",
		}),
		// Requests are made by the server: the suite makes them as an engine.
		"nonadminbackupstoragelocationrequests": newCase(resourceCase[oadpv1alpha1.NonAdminBackupStorageLocationRequest, oadpv1alpha1.NonAdminBackupStorageLocationRequestList]{
			gvk: oadpv1alpha1.SchemeGroupVersion.WithKind("NonAdminBackupStorageLocationRequest"), client: engine.OadpV1alpha1().NonAdminBackupStorageLocationRequests(ns), engine: engine.OadpV1alpha1().NonAdminBackupStorageLocationRequests(ns),
			valid: func(n string) *oadpv1alpha1.NonAdminBackupStorageLocationRequest {
				return &oadpv1alpha1.NonAdminBackupStorageLocationRequest{ObjectMeta: om(n),
					Spec: oadpv1alpha1.NonAdminBackupStorageLocationRequestSpec{ApprovalDecision: oadpv1alpha1.NonAdminBSLRequestPending}}
			},
			changeSpec: func(r *oadpv1alpha1.NonAdminBackupStorageLocationRequest) {
				r.Spec.ApprovalDecision = map[oadpv1alpha1.NonAdminBSLRequest]oadpv1alpha1.NonAdminBSLRequest{
					oadpv1alpha1.NonAdminBSLRequestApproved: oadpv1alpha1.NonAdminBSLRequestRejected}[r.Spec.ApprovalDecision]
				if r.Spec.ApprovalDecision == "" {
					r.Spec.ApprovalDecision = oadpv1alpha1.NonAdminBSLRequestApproved
				}
			},
			spec:   func(r *oadpv1alpha1.NonAdminBackupStorageLocationRequest) any { return r.Spec },
			status: func(r *oadpv1alpha1.NonAdminBackupStorageLocationRequest) any { return r.Status },
			setStatus: func(r *oadpv1alpha1.NonAdminBackupStorageLocationRequest) {
				r.Status.Phase = oadpv1alpha1.NonAdminBSLRequestPhasePending
			},
			invalid: func(n string) *oadpv1alpha1.NonAdminBackupStorageLocationRequest {
				return &oadpv1alpha1.NonAdminBackupStorageLocationRequest{ObjectMeta: om(n),
					Spec: oadpv1alpha1.NonAdminBackupStorageLocationRequestSpec{ApprovalDecision: "maybe"}}
			},
			invalidAt: "spec.approvalDecision",
		}),
		"nonadmindownloadrequests": newCase(resourceCase[oadpv1alpha1.NonAdminDownloadRequest, oadpv1alpha1.NonAdminDownloadRequestList]{
			gvk: oadpv1alpha1.SchemeGroupVersion.WithKind("NonAdminDownloadRequest"), client: oadp.NonAdminDownloadRequests("tenant-a"), engine: engine.OadpV1alpha1().NonAdminDownloadRequests("tenant-a"),
			valid: func(n string) *oadpv1alpha1.NonAdminDownloadRequest {
				return &oadpv1alpha1.NonAdminDownloadRequest{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "tenant-a"},
					Spec: oadpv1alpha1.NonAdminDownloadRequestSpec{Target: velerov1.DownloadTarget{Kind: velerov1.DownloadTargetKindBackupLog, Name: "nab1"}}}
			},
			immutable: func(r *oadpv1alpha1.NonAdminDownloadRequest) {
				r.Spec.Target.Kind = velerov1.DownloadTargetKindBackupResults
			},
			spec:   func(r *oadpv1alpha1.NonAdminDownloadRequest) any { return r.Spec },
			status: func(r *oadpv1alpha1.NonAdminDownloadRequest) any { return r.Status },
			// Not Created: a Created request without its Velero request has
			// expired, and goes.
			setStatus: func(r *oadpv1alpha1.NonAdminDownloadRequest) { r.Status.Phase = oadpv1alpha1.NonAdminPhaseBackingOff },
			invalid: func(n string) *oadpv1alpha1.NonAdminDownloadRequest {
				return &oadpv1alpha1.NonAdminDownloadRequest{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "tenant-a"},
					Spec: oadpv1alpha1.NonAdminDownloadRequestSpec{Target: velerov1.DownloadTarget{Kind: velerov1.DownloadTargetKindBackupLog, Name: "not-a-nab"}}}
			},
			invalidAt: "spec.target.name",
		}),
		"nonadminschedules": newCase(resourceCase[oadpv1alpha1.NonAdminSchedule, oadpv1alpha1.NonAdminScheduleList]{
			gvk: oadpv1alpha1.SchemeGroupVersion.WithKind("NonAdminSchedule"), client: oadp.NonAdminSchedules("tenant-a"), engine: engine.OadpV1alpha1().NonAdminSchedules("tenant-a"),
			valid: func(n string) *oadpv1alpha1.NonAdminSchedule {
				return &oadpv1alpha1.NonAdminSchedule{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "tenant-a"},
					Spec: oadpv1alpha1.NonAdminScheduleSpec{Schedule: "@every 1h", Template: oadpv1alpha1.NonAdminScheduleTemplate{BackupSpec: &velerov1.BackupSpec{}}}}
			},
			changeSpec: func(s *oadpv1alpha1.NonAdminSchedule) { s.Spec.Paused = !s.Spec.Paused },
			spec:       func(s *oadpv1alpha1.NonAdminSchedule) any { return s.Spec },
			status:     func(s *oadpv1alpha1.NonAdminSchedule) any { return s.Status },
			setStatus:  func(s *oadpv1alpha1.NonAdminSchedule) { s.Status.Phase = oadpv1alpha1.NonAdminPhaseCreated },
			invalid: func(n string) *oadpv1alpha1.NonAdminSchedule {
				return &oadpv1alpha1.NonAdminSchedule{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "tenant-a"},
					Spec: oadpv1alpha1.NonAdminScheduleSpec{Schedule: "@every 1h",
						Template: oadpv1alpha1.NonAdminScheduleTemplate{BackupSpec: &velerov1.BackupSpec{IncludedNamespaces: []string{"tenant-b"}}}}}
			},
			invalidAt: "spec.template.backupSpec.includedNamespaces[0]",
		}),
		"dataprotectionapplications": newCase(resourceCase[oadpv1alpha1.DataProtectionApplication, oadpv1alpha1.DataProtectionApplicationList]{
			gvk: oadpv1alpha1.SchemeGroupVersion.WithKind("DataProtectionApplication"), client: oadp.DataProtectionApplications(ns), engine: engine.OadpV1alpha1().DataProtectionApplications(ns),
			valid: func(n string) *oadpv1alpha1.DataProtectionApplication {
				return &oadpv1alpha1.DataProtectionApplication{ObjectMeta: om(n), Spec: oadpv1alpha1.DataProtectionApplicationSpec{
					Configuration: &runtime.RawExtension{Raw: []byte(`{"velero":{"defaultPlugins":["openshift","aws"]}}`)},
					NonAdmin:      &oadpv1alpha1.NonAdmin{Enable: ptr.To(true)}}}
			},
			changeSpec: func(d *oadpv1alpha1.DataProtectionApplication) {
				d.Spec.LogFormat = map[string]string{"": "json", "text": "json", "json": "text"}[d.Spec.LogFormat]
			},
			spec:   func(d *oadpv1alpha1.DataProtectionApplication) any { return d.Spec },
			status: func(d *oadpv1alpha1.DataProtectionApplication) any { return d.Status },
			setStatus: func(d *oadpv1alpha1.DataProtectionApplication) {
				meta.SetStatusCondition(&d.Status.Conditions, metav1.Condition{Type: "Tested", Status: metav1.ConditionTrue, Reason: "Tested", Message: "by the suite"})
			},
			invalid: func(n string) *oadpv1alpha1.DataProtectionApplication {
				return &oadpv1alpha1.DataProtectionApplication{ObjectMeta: om(n), Spec: oadpv1alpha1.DataProtectionApplicationSpec{
					NonAdmin: &oadpv1alpha1.NonAdmin{EnforceBackupSpec: &velerov1.BackupSpec{IncludedNamespaces: []string{"other"}}}}}
			},
			invalidAt: "spec.nonAdmin.enforceBackupSpec.includedNamespaces",
		}),
		"virtualmachinebackups": newCase(resourceCase[kvbackupv1alpha1.VirtualMachineBackup, kvbackupv1alpha1.VirtualMachineBackupList]{
			gvk: kvbackupv1alpha1.SchemeGroupVersion.WithKind("VirtualMachineBackup"), client: kv.VirtualMachineBackups("vms"), engine: engine.BackupV1alpha1().VirtualMachineBackups("vms"),
			valid: func(n string) *kvbackupv1alpha1.VirtualMachineBackup {
				return &kvbackupv1alpha1.VirtualMachineBackup{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "vms"},
					Spec: kvbackupv1alpha1.VirtualMachineBackupSpec{Source: vmRef, PvcName: ptr.To("out")}}
			},
			immutable: func(b *kvbackupv1alpha1.VirtualMachineBackup) { b.Spec.ForceFullBackup = true },
			spec:      func(b *kvbackupv1alpha1.VirtualMachineBackup) any { return b.Spec },
			status:    func(b *kvbackupv1alpha1.VirtualMachineBackup) any { return b.Status },
			setStatus: func(b *kvbackupv1alpha1.VirtualMachineBackup) {
				if b.Status == nil {
					b.Status = &kvbackupv1alpha1.VirtualMachineBackupStatus{}
				}
				b.Status.Type, b.Status.BackupType = kvbackupv1alpha1.Full, kvbackupv1alpha1.Full
			},
			invalid: func(n string) *kvbackupv1alpha1.VirtualMachineBackup {
				return &kvbackupv1alpha1.VirtualMachineBackup{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "vms"},
					Spec: kvbackupv1alpha1.VirtualMachineBackupSpec{PvcName: ptr.To("out")}}
			},
			invalidAt: "spec.source",
		}),
		"virtualmachinebackuptrackers": newCase(resourceCase[kvbackupv1alpha1.VirtualMachineBackupTracker, kvbackupv1alpha1.VirtualMachineBackupTrackerList]{
			gvk: kvbackupv1alpha1.SchemeGroupVersion.WithKind("VirtualMachineBackupTracker"), client: kv.VirtualMachineBackupTrackers("vms"), engine: engine.BackupV1alpha1().VirtualMachineBackupTrackers("vms"),
			valid: func(n string) *kvbackupv1alpha1.VirtualMachineBackupTracker {
				return &kvbackupv1alpha1.VirtualMachineBackupTracker{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "vms"},
					Spec: kvbackupv1alpha1.VirtualMachineBackupTrackerSpec{Source: vmRef}}
			},
			immutable: func(tr *kvbackupv1alpha1.VirtualMachineBackupTracker) { tr.Spec.Source.Name = "vm2" },
			spec:      func(tr *kvbackupv1alpha1.VirtualMachineBackupTracker) any { return tr.Spec },
			status:    func(tr *kvbackupv1alpha1.VirtualMachineBackupTracker) any { return tr.Status },
			// What the vmcbt engine wrote meanwhile (the tracker's state)
			// stays: a state change has to follow the tracker's table.
			setStatus: func(tr *kvbackupv1alpha1.VirtualMachineBackupTracker) {
				if tr.Status == nil {
					tr.Status = &kvbackupv1alpha1.VirtualMachineBackupTrackerStatus{}
				}
				tr.Status.LatestCheckpoint = &kvbackupv1alpha1.BackupCheckpoint{Name: "cp1"}
			},
			invalid: func(n string) *kvbackupv1alpha1.VirtualMachineBackupTracker {
				return &kvbackupv1alpha1.VirtualMachineBackupTracker{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "vms"},
					Spec: kvbackupv1alpha1.VirtualMachineBackupTrackerSpec{Source: corev1.TypedLocalObjectReference{APIGroup: ptr.To("kubevirt.io"), Kind: "Pod", Name: "p"}}}
			},
			invalidAt: "spec.source.kind",
		}),
	}
}

// servedResources lists the (non-subresource) resources of the three groups.
func servedResources(t *testing.T, cs versioned.Interface) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, gv := range []string{"velero.io/v1", "oadp.openshift.io/v1alpha1", "backup.kubevirt.io/v1alpha1"} {
		list, err := cs.Discovery().ServerResourcesForGroupVersion(gv)
		if err != nil {
			t.Fatalf("discovery of %s: %v", gv, err)
		}
		for _, r := range list.APIResources {
			if !strings.Contains(r.Name, "/") {
				out[r.Name] = true
			}
		}
	}
	return out
}

// isZero reports whether v (a status struct or pointer) is its zero value.
func isZero(v any) bool {
	return v == nil || reflect.ValueOf(v).IsZero()
}

// InvalidAt reports whether err is a 422 with a cause at field whose
// message contains detail.
func InvalidAt(err error, field, detail string) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == field && strings.Contains(c.Message, detail) {
			return true
		}
	}
	return false
}

// withoutQueuePosition clears a tenant object's queue position, which is
// not stored but read from the backup queue at each read: a backup that
// ends between two reads moves it.
func withoutQueuePosition(q *oadpv1alpha1.QueueInfo) {
	if q != nil {
		q.EstimatedQueuePosition = 0
	}
}
