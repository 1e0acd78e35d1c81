package backup

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// finder is a finisher that finds the operations it started in the
// cluster.
type finder struct {
	finisher
	found []Started
}

func (f *finder) StartedOperations(context.Context, *velerov1.Backup) ([]Started, error) {
	return f.found, nil
}

// foundSnapshot is what a finder finds of a snapshot operation: its ID
// differs from the recorded one (the found one's time is the object's).
func foundSnapshot(id, name string) Started {
	return Started{OperationID: id, Resource: &ResourceIdentifier{Namespace: "shop", Name: name}}
}

// TestCancelInterruptedOperations: a backup a restart interrupted has
// every operation it started cancelled, what ended discarded: those its
// item operations file records and those the action finds in the cluster
// (started while it collected, not recorded), each once.
func TestCancelInterruptedOperations(t *testing.T) {
	for _, tc := range []struct {
		name          string
		phase         velerov1.BackupPhase
		recorded      []*BackupOperation // nil: no item operations file
		found         []Started
		wantCanceled  []string
		wantDiscarded []string
	}{
		{
			name:         "collecting: no file, the found operations",
			phase:        velerov1.BackupPhaseInProgress,
			found:        []Started{foundSnapshot("a@found", "a"), foundSnapshot("b@found", "b")},
			wantCanceled: []string{"a@found", "b@found"},
		},
		{
			name:  "waiting: the recorded operations, and the found ones they do not hold",
			phase: velerov1.BackupPhaseWaitingForPluginOperations,
			recorded: []*BackupOperation{operation("a", OperationPhaseInProgress), operation("c", OperationPhaseCompleted),
				operation("d", OperationPhaseInProgress)},
			found:         []Started{foundSnapshot("a@found", "a"), foundSnapshot("c", "other"), foundSnapshot("e@found", "e")},
			wantCanceled:  []string{"a", "d", "e@found"},
			wantDiscarded: []string{"c"},
		},
		{
			name:         "waiting without its file: the found operations",
			phase:        velerov1.BackupPhaseWaitingForPluginOperationsPartiallyFailed,
			found:        []Started{foundSnapshot("a@found", "a")},
			wantCanceled: []string{"a@found"},
		},
		{
			name:         "nothing found, nothing recorded",
			phase:        velerov1.BackupPhaseInProgress,
			wantCanceled: nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store, err := objectstore.NewFilesystem(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			layout := objectstore.NewLayout("")
			clk := clocktesting.NewFakeClock(time.Unix(100, 0))
			b := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "b", UID: "u"}, Status: velerov1.BackupStatus{Phase: tc.phase}}
			log, err := items.NewLog(t.TempDir(), clk, klog.Background(), "backup", "b")
			if err != nil {
				t.Fatal(err)
			}
			defer log.Close()
			f := &finder{found: tc.found}
			if tc.recorded != nil {
				ops := newOperations([]ItemAction{f}, b, log, clk)
				ops.list = tc.recorded
				if err := putOperations(ctx, store, layout, b.Name, ops); err != nil {
					t.Fatal(err)
				}
			}
			r := &backupRun{c: &Controller{cfg: Config{Clock: clk, Actions: []ItemAction{f}}}, b: b, store: store, layout: layout, log: log}
			r.cancelInterruptedOperations(ctx)
			if !slices.Equal(f.canceled, tc.wantCanceled) {
				t.Errorf("cancelled %q, want %q", f.canceled, tc.wantCanceled)
			}
			if !slices.Equal(f.discarded, tc.wantDiscarded) {
				t.Errorf("discarded %q, want %q", f.discarded, tc.wantDiscarded)
			}
		})
	}
}
