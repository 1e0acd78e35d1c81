package nonadmin

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	"github.com/backstop-io/backstop/pkg/engine/enginetest"
)

// countingResyncer counts its passes and records the clock's time at each.
type countingResyncer struct {
	n     atomic.Int64
	clock *clocktesting.FakeClock
	mu    sync.Mutex
	at    []time.Time
}

func (r *countingResyncer) Resync(context.Context) int {
	r.mu.Lock()
	r.at = append(r.at, r.clock.Now())
	r.mu.Unlock()
	r.n.Add(1)
	return 1
}

// TestNonAdminGC: the tenant garbage collection runs every orphan loop
// once per garbageCollectionPeriod of the policy, the loops read when it
// runs (whichever engines were built after it), and not before a period
// has passed since the start.
func TestNonAdminGC(t *testing.T) {
	start := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	dpa := &oadpv1alpha1.DataProtectionApplication{ObjectMeta: metav1.ObjectMeta{Name: "dpa", Namespace: adminNS, CreationTimestamp: metav1.NewTime(start)},
		Spec: oadpv1alpha1.DataProtectionApplicationSpec{NonAdmin: &oadpv1alpha1.NonAdmin{Enable: ptr.To(true),
			GarbageCollectionPeriod: &metav1.Duration{Duration: time.Hour}}}}
	w := enginetest.New(t, dpa)
	clock := clocktesting.NewFakeClock(start)
	var loops []Resyncer
	c, err := NewGCController(GCConfig{AdminNamespace: adminNS, DPAs: w.Factory.Oadp().V1alpha1().DataProtectionApplications(),
		Orphans: func() []Resyncer { return loops }, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	// An engine built after the collection: its loop is run too.
	late := &countingResyncer{clock: clock}
	loops = append(loops, late)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	stop := make(chan struct{})
	defer func() { cancel(); close(stop); <-done }()
	w.Factory.Start(stop)
	go func() { defer close(done); c.Run(ctx, 1) }()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	waitFor("the collection to wait for its first period", clock.HasWaiters)
	if late.n.Load() != 0 {
		t.Fatalf("the orphan loops ran %d times at the start, want 0 (they see every object at the start anyway)", late.n.Load())
	}
	clock.Step(time.Hour)
	waitFor("the first pass", func() bool { return late.n.Load() == 1 })
	waitFor("the collection to wait for its next period", clock.HasWaiters)
	clock.Step(59 * time.Minute)
	waitFor("the collection to wait again", clock.HasWaiters)
	if n := late.n.Load(); n != 1 {
		t.Errorf("%d passes before the second period ended, want 1", n)
	}
	clock.Step(time.Minute)
	waitFor("the second pass", func() bool { return late.n.Load() == 2 })
	// When they ran, whatever the goroutines' timing: a pass run early
	// (before its period ended) shows here.
	late.mu.Lock()
	defer late.mu.Unlock()
	if want := []time.Time{start.Add(time.Hour), start.Add(2 * time.Hour)}; len(late.at) != 2 || !late.at[0].Equal(want[0]) || !late.at[1].Equal(want[1]) {
		t.Errorf("passes at %v, want %v", late.at, want)
	}
}
