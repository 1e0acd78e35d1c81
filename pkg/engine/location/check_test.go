package location

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/enginetest"
	"github.com/backstop-io/backstop/pkg/objectstore"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestCheckDeadline: a location whose endpoint trickles its answer is
// Unavailable once its check's deadline passes, saying so; while its
// check waits, another location's check does not wait behind it.
func TestCheckDeadline(t *testing.T) {
	ctx := context.Background()
	tr := &framework.Trickler{}
	srv := httptest.NewServer(tr)
	defer srv.Close()
	slow := &velerov1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: "slow", Namespace: "velero"},
		Spec: velerov1.BackupStorageLocationSpec{Provider: "aws", Config: map[string]string{"s3Url": srv.URL, "region": "us-east-1", "s3ForcePathStyle": "true"},
			StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: "trickle"}}}}
	fast := &velerov1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: "fast", Namespace: "velero"},
		Spec: velerov1.BackupStorageLocationSpec{Provider: objectstore.ProviderFilesystem,
			StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: t.TempDir()}}}}
	w := enginetest.New(t, slow, fast)
	c, err := New(w.Client, w.Factory.Velero().V1().BackupStorageLocations(), objectstore.Opener{}, clocktesting.NewFakeClock(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	c.CheckTimeout = 3 * time.Second
	phase := func(name string) *velerov1.BackupStorageLocation {
		t.Helper()
		l, err := w.Client.VeleroV1().BackupStorageLocations("velero").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}

	slowDone := make(chan error, 1)
	go func() { slowDone <- c.sync(ctx, cache.ObjectName{Namespace: "velero", Name: "slow"}) }()
	// The slow location's check is waiting on its endpoint.
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return tr.InFlight.Load() > 0, nil
	}); err != nil {
		t.Fatalf("the slow location's check never reached its endpoint: %v", err)
	}
	t.Run("another location is checked meanwhile", func(t *testing.T) {
		if err := c.sync(ctx, cache.ObjectName{Namespace: "velero", Name: "fast"}); err != nil {
			t.Fatal(err)
		}
		if l := phase("fast"); l.Status.Phase != velerov1.BackupStorageLocationPhaseAvailable {
			t.Errorf("location fast: %s %q, want Available", l.Status.Phase, l.Status.Message)
		}
		if tr.InFlight.Load() == 0 {
			t.Errorf("the slow location's check ended before the fast one's: the test shows nothing")
		}
	})
	t.Run("the slow one is Unavailable at its deadline, saying so", func(t *testing.T) {
		if err := <-slowDone; err != nil {
			t.Fatal(err)
		}
		l := phase("slow")
		if l.Status.Phase != velerov1.BackupStorageLocationPhaseUnavailable || !strings.Contains(l.Status.Message, "took longer than 3s") {
			t.Errorf("location slow: %s %q, want Unavailable, its check past its deadline", l.Status.Phase, l.Status.Message)
		}
	})
}

// TestTenantsShareWorkers: tenants' locations whose endpoints answer
// slowly hold one worker per tenant and, together, all but one: of four
// tenants' eight slow locations synced at once, three checks wait on
// their endpoints, one per tenant; the others return at once, holding no
// worker (they are added again for later); the admin's location is
// checked meanwhile.
func TestTenantsShareWorkers(t *testing.T) {
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
			objects = append(objects, &velerov1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", tenant, i), Namespace: "velero",
				Annotations: map[string]string{velerov1.TenantLocationNamespaceAnnotation: tenant}},
				Spec: velerov1.BackupStorageLocationSpec{Provider: "aws", Config: map[string]string{"s3Url": srv.URL, "region": "us-east-1", "s3ForcePathStyle": "true"},
					StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: "trickle"}}}})
		}
	}
	objects = append(objects, &velerov1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: "admins", Namespace: "velero"},
		Spec: velerov1.BackupStorageLocationSpec{Provider: objectstore.ProviderFilesystem,
			StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: t.TempDir()}}}})
	w := enginetest.New(t, objects...)
	c, err := New(w.Client, w.Factory.Velero().V1().BackupStorageLocations(), objectstore.Opener{}, clocktesting.NewFakeClock(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	c.CheckTimeout = 5 * time.Second
	done := make(chan error, 2*len(tenants))
	for _, tenant := range tenants {
		for i := range 2 {
			go func() {
				done <- c.sync(ctx, cache.ObjectName{Namespace: "velero", Name: fmt.Sprintf("%s-%d", tenant, i)})
			}()
		}
	}
	// Five of the eight return at once; three wait on their endpoints.
	for range 5 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(c.CheckTimeout / 2):
			t.Fatalf("the syncs of locations whose owner's share is in use did not return at once")
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		all, _ := tricklers.InFlight()
		return all == 3, nil
	}); err != nil {
		all, most := tricklers.InFlight()
		t.Fatalf("checks at the endpoints: %d (at most %d for one tenant), want 3", all, most)
	}
	if all, most := tricklers.InFlight(); all != 3 || most != 1 {
		t.Errorf("checks at the endpoints: %d, at most %d for one tenant; want 3, one each", all, most)
	}
	t.Run("the admin's location meanwhile", func(t *testing.T) {
		if err := c.sync(ctx, cache.ObjectName{Namespace: "velero", Name: "admins"}); err != nil {
			t.Fatal(err)
		}
		l, err := w.Client.VeleroV1().BackupStorageLocations("velero").Get(ctx, "admins", metav1.GetOptions{})
		if err != nil || l.Status.Phase != velerov1.BackupStorageLocationPhaseAvailable {
			t.Errorf("the admin's location: %v %+v, want Available", err, l.Status)
		}
	})
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
