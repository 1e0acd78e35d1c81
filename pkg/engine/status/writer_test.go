package status

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned/fake"
)

type recorder struct{ seen []Transition }

func (r *recorder) Transition(_ context.Context, t Transition) { r.seen = append(r.seen, t) }

func updates(client *fake.Clientset) []clienttesting.UpdateAction {
	var out []clienttesting.UpdateAction
	for _, a := range client.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetSubresource() == "status" {
			out = append(out, u)
		}
	}
	return out
}

// TestUpdate: the writer writes only what changed, under the engine's
// field manager, again on a conflict with the object read anew, not at
// all for an object of another UID, and tells observers of phase changes
// only.
func TestUpdate(t *testing.T) {
	ctx := context.Background()
	stored := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", UID: "u1"}, Status: velerov1.BackupStatus{Phase: velerov1.BackupPhaseQueued}}
	client := fake.NewSimpleClientset(stored)
	obs := &recorder{}
	w := Writer{Engine: "backup-queue", Observers: []Observer{obs}}.Backups(client, "ns")

	// Nothing changed: no write.
	if _, err := w.Update(ctx, stored, func(*velerov1.Backup) {}); err != nil {
		t.Fatal(err)
	}
	if n := len(updates(client)); n != 0 {
		t.Errorf("%d status writes for no change, want 0", n)
	}

	// A conflict: read again, change again, write.
	conflicts := 1
	client.PrependReactor("update", "backups", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(velerov1.Resource("backups"), "b", nil)
		}
		return false, nil, nil
	})
	mutated := 0
	out, err := w.Update(ctx, stored, func(b *velerov1.Backup) {
		mutated++
		b.Status.Phase = velerov1.BackupPhaseReadyToStart
	})
	if err != nil || out.Status.Phase != velerov1.BackupPhaseReadyToStart || mutated != 2 {
		t.Fatalf("after a conflict: %v, phase %s, changed %d times (want twice)", err, out.Status.Phase, mutated)
	}
	if n := len(updates(client)); n != 2 {
		t.Errorf("%d status writes (the conflict, then the write), want 2", n)
	}
	for _, u := range updates(client) {
		if got := u.(clienttesting.UpdateActionImpl).UpdateOptions.FieldManager; got != "backup-queue" {
			t.Errorf("status written by field manager %q, want the engine's", got)
		}
	}
	if len(obs.seen) != 1 || obs.seen[0].From != "Queued" || obs.seen[0].To != "ReadyToStart" || obs.seen[0].Engine != "backup-queue" {
		t.Errorf("observed %+v, want one Queued → ReadyToStart by backup-queue", obs.seen)
	}

	// Another field only: written, no transition observed.
	if _, err := w.Update(ctx, stored, func(b *velerov1.Backup) { b.Status.Warnings = 1 }); err != nil {
		t.Fatal(err)
	}
	if len(obs.seen) != 1 {
		t.Errorf("a write without a phase change was observed: %+v", obs.seen)
	}

	// An informer's copy (it has a resourceVersion): written as given,
	// without a read first, and the copy itself left as it was.
	cached := stored.DeepCopy()
	cached.ResourceVersion = "7"
	client.ClearActions()
	out, err = w.Update(ctx, cached, func(b *velerov1.Backup) { b.Status.Errors = 3 })
	if err != nil || out.Status.Errors != 3 {
		t.Fatalf("writing from an informer's copy: %v, errors %d", err, out.Status.Errors)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "get" {
			t.Errorf("read before writing from an informer's copy: %v", a)
		}
	}
	if cached.Status.Errors != 0 {
		t.Error("the informer's copy was modified")
	}

	// Deleted and created again: the old object is gone.
	other := stored.DeepCopy()
	other.UID = "u0"
	before := len(updates(client))
	if _, err := w.Update(ctx, other, func(b *velerov1.Backup) { b.Status.Errors = 9 }); !Gone(err) {
		t.Errorf("update of an object replaced by another UID: %v, want NotFound", err)
	}
	if len(updates(client)) != before {
		t.Error("the object of another UID was written")
	}
}
