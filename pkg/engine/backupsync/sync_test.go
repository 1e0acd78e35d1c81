package backupsync

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/enginetest"
	"github.com/backstop-io/backstop/pkg/objectstore"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestSyncPass: one pass over a filesystem location makes the Backups it
// holds and the server has not (finished ones only, at most MaxPerPass),
// and deletes the Completed Backups whose files are gone, unless a
// DeleteBackupRequest is deleting them.
func TestSyncPass(t *testing.T) {
	const ns = "backstop-system"
	bucket := t.TempDir()
	layout := objectstore.NewLayout("")
	store, err := objectstore.NewFilesystem(bucket)
	if err != nil {
		t.Fatal(err)
	}
	put := func(name string, phase velerov1.BackupPhase) {
		// Each claims to be locked (velero-backup.json is anyone's to
		// write who can write the bucket): a location without object lock
		// has nothing locked.
		far := metav1.NewTime(time.Now().Add(1000 * time.Hour))
		// And each claims a size: the size synced is its manifest's.
		b := velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "elsewhere"}, Status: velerov1.BackupStatus{Phase: phase, Expiration: &far, SizeBytes: 1 << 40,
			Conditions: []metav1.Condition{{Type: velerov1.BackupConditionLocked, Status: metav1.ConditionTrue, Reason: velerov1.ObjectLockCompliance}}}}
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Put(context.Background(), layout.BackupMetadataKey(name), bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"found-1", "found-2", "found-3"} {
		put(n, velerov1.BackupPhaseCompleted)
	}
	put("unfinished", velerov1.BackupPhaseInProgress)
	// found-1 has a manifest (of its velero-backup.json and a tarball),
	// found-2 none.
	if err := store.Put(context.Background(), layout.BackupDir("found-1")+"found-1.tar.gz", strings.NewReader("twelve bytes")); err != nil {
		t.Fatal(err)
	}
	manifest, err := objectstore.MakeManifest(context.Background(), store, layout.BackupDir("found-1"), "found-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := objectstore.PutManifest(context.Background(), store, layout, manifest); err != nil {
		t.Fatal(err)
	}
	wantSize := map[string]int64{"found-1": manifest.Size(), "found-2": 0}
	if manifest.Size() <= 12 {
		t.Fatalf("the manifest of found-1 sums %d bytes, want its two objects'", manifest.Size())
	}
	put("known", velerov1.BackupPhaseCompleted)
	location := &velerov1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns},
		Spec: velerov1.BackupStorageLocationSpec{Provider: objectstore.ProviderFilesystem,
			StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: bucket}}},
		Status: velerov1.BackupStorageLocationStatus{Phase: velerov1.BackupStorageLocationPhaseAvailable}}
	held := func(name string) *velerov1.Backup {
		return &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: k8stypes.UID("uid-" + name),
			Labels: map[string]string{velerov1.StorageLocationLabel: "default"}},
			Spec: velerov1.BackupSpec{StorageLocation: "default"}, Status: velerov1.BackupStatus{Phase: velerov1.BackupPhaseCompleted}}
	}
	objs := []runtime.Object{location, held("known"), held("files-gone"), held("files-gone-being-deleted"),
		&velerov1.DeleteBackupRequest{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: ns}, Spec: velerov1.DeleteBackupRequestSpec{BackupName: "files-gone-being-deleted"},
			Status: velerov1.DeleteBackupRequestStatus{Phase: velerov1.DeleteBackupRequestPhaseInProgress}}}
	w := enginetest.New(t, objs...)
	v := w.Factory.Velero().V1()
	c, err := New(Config{Client: w.Client, Backups: v.Backups(), Locations: v.BackupStorageLocations(), Requests: v.DeleteBackupRequests(),
		Period: time.Minute, MaxPerPass: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.sync(ctx, cache.ObjectName{Namespace: ns, Name: "default"}); err != nil {
		t.Fatal(err)
	}
	list, err := w.Client.VeleroV1().Backups(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range list.Items {
		names = append(names, b.Name)
		if _, _, locked := velerov1.LockedUntil(&b); locked && b.Annotations[velerov1.SyncedFromLocationAnnotation] == "default" {
			t.Errorf("synced %s: the Locked condition its velero-backup.json claims was kept, in a location without object lock", b.Name)
		}
		if b.Annotations[velerov1.SyncedFromLocationAnnotation] == "default" && (b.Spec.StorageLocation != "default" || b.Namespace != ns) {
			t.Errorf("synced %s: location %q, namespace %q", b.Name, b.Spec.StorageLocation, b.Namespace)
		}
		if want, ok := wantSize[b.Name]; ok && b.Status.SizeBytes != want {
			t.Errorf("synced %s: status.sizeBytes %d, want %d (its manifest's)", b.Name, b.Status.SizeBytes, want)
		}
	}
	sort.Strings(names)
	// Two of the three found (MaxPerPass), the unfinished one never, the
	// one whose files went deleted, the one being deleted left to its
	// request.
	want := []string{"files-gone-being-deleted", "found-1", "found-2", "known"}
	if len(names) != len(want) {
		t.Fatalf("Backups after the pass: %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("Backups after the pass: %v, want %v", names, want)
		}
	}
	if _, err := w.Client.VeleroV1().Backups(ns).Get(ctx, "files-gone", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("files-gone: %v, want deleted", err)
	}
}

// TestTenantSyncLimit: a tenant's bucket makes no Backups past the
// tenant's maxBackupsPerNamespace, whatever it holds, counting what all
// the tenant's locations hold (and not another tenant's); an admin's
// location is not bounded by it.
func TestTenantSyncLimit(t *testing.T) {
	const ns = "backstop-system"
	ctx := context.Background()
	bucket := t.TempDir()
	layout := objectstore.NewLayout("")
	store, err := objectstore.NewFilesystem(bucket)
	if err != nil {
		t.Fatal(err)
	}
	// Names the server gives tenants' backups (TenantSyncable); the first
	// is held already.
	var names []string
	for i := range 6 {
		name := oadpv1alpha1.NewNACUUID("tenant-a", fmt.Sprintf("b%d", i))
		names = append(names, name)
		data, err := json.Marshal(velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: velerov1.BackupStatus{Phase: velerov1.BackupPhaseCompleted}})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Put(ctx, layout.BackupMetadataKey(name), bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
	}
	tenantLocation := &velerov1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: "tenant-loc", Namespace: ns,
		Labels:      map[string]string{oadpv1alpha1.NabslOriginNACUUIDLabel: "tenant-loc"},
		Annotations: map[string]string{oadpv1alpha1.NabslOriginNamespaceAnnotation: "tenant-a", oadpv1alpha1.NabslOriginNameAnnotation: "mine"}},
		Spec: velerov1.BackupStorageLocationSpec{Provider: objectstore.ProviderFilesystem,
			StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: bucket}}},
		Status: velerov1.BackupStorageLocationStatus{Phase: velerov1.BackupStorageLocationPhaseAvailable}}
	location := func(name, tenant string) *velerov1.BackupStorageLocation {
		l := tenantLocation.DeepCopy()
		l.Name, l.Labels[oadpv1alpha1.NabslOriginNACUUIDLabel], l.Annotations[oadpv1alpha1.NabslOriginNamespaceAnnotation] = name, name, tenant
		return l
	}
	heldIn := func(name, location string) *velerov1.Backup {
		return &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{velerov1.StorageLocationLabel: location}},
			Spec: velerov1.BackupSpec{StorageLocation: location}, Status: velerov1.BackupStatus{Phase: velerov1.BackupPhaseCompleted}}
	}
	// One Backup of the location is there already, one of the tenant's
	// other location, and two of another tenant's.
	w := enginetest.New(t, tenantLocation, location("tenant-loc-2", "tenant-a"), location("tenant-b-loc", "tenant-b"),
		heldIn(names[0], "tenant-loc"), heldIn("in-the-other", "tenant-loc-2"), heldIn("b-1", "tenant-b-loc"), heldIn("b-2", "tenant-b-loc"))
	v := w.Factory.Velero().V1()
	c, err := New(Config{Client: w.Client, Backups: v.Backups(), Locations: v.BackupStorageLocations(), Requests: v.DeleteBackupRequests(),
		Period: time.Minute, MaxPerPass: 100, TenantPeriod: func() time.Duration { return time.Minute }, TenantMaxBackups: func() int { return 3 }})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.sync(ctx, cache.ObjectName{Namespace: ns, Name: "tenant-loc"}); err != nil {
		t.Fatal(err)
	}
	list, err := w.Client.VeleroV1().Backups(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	synced := 0
	for _, b := range list.Items {
		if b.Annotations[velerov1.SyncedFromLocationAnnotation] == "tenant-loc" {
			synced++
		}
	}
	if synced != 1 || len(list.Items) != 5 {
		t.Errorf("%d Backups synced from the tenant's bucket of six (%d in all), want 1: the limit of 3 with two held in its locations", synced, len(list.Items))
	}
}

// TestTenantsShareSyncWorkers: tenants' locations whose endpoints answer
// slowly hold one sync worker per tenant and, together, all but one: of
// four tenants' eight trickling locations synced at once, three passes
// wait on their endpoints, one per tenant, and the others return at once
// (added again for later), holding no worker.
func TestTenantsShareSyncWorkers(t *testing.T) {
	const ns = "backstop-system"
	ctx := context.Background()
	tenants := []string{"tenant-a", "tenant-b", "tenant-c", "tenant-d"}
	tricklers := framework.Tricklers{}
	var objects []runtime.Object
	for _, tenant := range tenants {
		tr := &framework.Trickler{}
		srv := httptest.NewServer(tr)
		defer srv.Close()
		tricklers[tenant] = tr
		for i := range 2 {
			name := fmt.Sprintf("%s-%d", tenant, i)
			objects = append(objects, &velerov1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
				Labels:      map[string]string{oadpv1alpha1.NabslOriginNACUUIDLabel: name},
				Annotations: map[string]string{oadpv1alpha1.NabslOriginNamespaceAnnotation: tenant}},
				Spec: velerov1.BackupStorageLocationSpec{Provider: "aws", Config: map[string]string{"s3Url": srv.URL, "region": "us-east-1", "s3ForcePathStyle": "true"},
					Credential:  &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "cloud"},
					StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: "trickle"}}},
				Status: velerov1.BackupStorageLocationStatus{Phase: velerov1.BackupStorageLocationPhaseAvailable}})
		}
	}
	w := enginetest.New(t, objects...)
	v := w.Factory.Velero().V1()
	// The tenants' keys; their endpoints, on loopback, allowed.
	opener := objectstore.Opener{
		Secrets: func(context.Context, string, string, string) ([]byte, error) {
			return []byte("[default]\naws_access_key_id = a\naws_secret_access_key = b\n"), nil
		},
		TenantEndpoints: func(context.Context) ([]string, error) { return []string{"127.0.0.0/8"}, nil },
	}
	c, err := New(Config{Client: w.Client, Backups: v.Backups(), Locations: v.BackupStorageLocations(), Requests: v.DeleteBackupRequests(), Opener: opener,
		Period: time.Minute, TenantPeriod: func() time.Duration { return time.Minute }, PassTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2*len(tenants))
	for _, tenant := range tenants {
		for i := range 2 {
			go func() { done <- c.sync(ctx, cache.ObjectName{Namespace: ns, Name: fmt.Sprintf("%s-%d", tenant, i)}) }()
		}
	}
	for range 5 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("the syncs of locations whose owner's share is in use did not return at once")
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		all, _ := tricklers.InFlight()
		return all == 3, nil
	}); err != nil {
		all, most := tricklers.InFlight()
		t.Fatalf("passes at the endpoints: %d (at most %d for one tenant), want 3", all, most)
	}
	if all, most := tricklers.InFlight(); all != 3 || most != 1 {
		t.Errorf("passes at the endpoints: %d, at most %d for one tenant; want 3, one each", all, most)
	}
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
