package restore

import (
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	listers "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
)

// TestFirstWaiting: the restore that runs next is the waiting one the
// registry queued first, whatever the order the engine is told of them.
func TestFirstWaiting(t *testing.T) {
	restore := func(name string, seq int64, phase velerov1.RestorePhase, deleted bool) *velerov1.Restore {
		r := &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "admin"}, Status: velerov1.RestoreStatus{Phase: phase}}
		if seq > 0 {
			r.Annotations = map[string]string{velerov1.QueueSequenceAnnotation: strconv.FormatInt(seq, 10)}
		}
		if deleted {
			r.DeletionTimestamp = &metav1.Time{}
		}
		return r
	}
	for _, tc := range []struct {
		name     string
		restores []*velerov1.Restore
		want     string
	}{
		{"by sequence, not by name", []*velerov1.Restore{restore("a", 3, "", false), restore("b", 2, velerov1.RestorePhaseNew, false), restore("c", 10, "", false)}, "b"},
		{"sequences compared as numbers", []*velerov1.Restore{restore("a", 10, "", false), restore("b", 9, "", false)}, "b"},
		{"running and finished ones are not waiting", []*velerov1.Restore{restore("a", 1, velerov1.RestorePhaseInProgress, false), restore("b", 2, velerov1.RestorePhaseCompleted, false), restore("c", 3, "", false)}, "c"},
		{"a deleted one is not waiting", []*velerov1.Restore{restore("a", 1, "", true), restore("b", 2, "", false)}, "b"},
		{"one without a sequence goes first", []*velerov1.Restore{restore("a", 1, "", false), restore("b", 0, "", false)}, "b"},
		{"none waiting", []*velerov1.Restore{restore("a", 1, velerov1.RestorePhaseFailed, false)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			for _, r := range tc.restores {
				if err := indexer.Add(r); err != nil {
					t.Fatal(err)
				}
			}
			c := &Controller{restores: listers.NewRestoreLister(indexer)}
			got := ""
			if r := c.firstWaiting("admin"); r != nil {
				got = r.Name
			}
			if got != tc.want {
				t.Errorf("first waiting %q, want %q", got, tc.want)
			}
		})
	}
}
