package status

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

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

// TestUpdateTransient: a write that fails transiently (the storage electing
// a leader, the server overloaded) is tried again from the object as stored
// (the failed write may have landed), a refusal is not, and a write still
// failing when ctx ends reports the failure.
func TestUpdateTransient(t *testing.T) {
	gr := velerov1.Resource("backups")
	cases := []struct {
		name      string
		failures  []error // the first status writes' errors, in order
		landed    bool    // the failed write was stored anyway
		cancelled bool    // ctx ends while the writes fail
		wantErr   func(error) bool
		wantWrite int // status writes sent
	}{
		{name: "an internal error of the storage, then success", failures: []error{apierrors.NewInternalError(errors.New("etcdserver: leader changed"))}, wantWrite: 2},
		{name: "a timeout, too many requests, then success", failures: []error{apierrors.NewServerTimeout(gr, "update", 1), apierrors.NewTooManyRequests("busy", 1)}, wantWrite: 3},
		{name: "a timeout of a write that landed", failures: []error{apierrors.NewTimeoutError("the storage did not answer", 1)}, landed: true, wantWrite: 1},
		{name: "a refusal is not tried again", failures: []error{apierrors.NewForbidden(gr, "b", errors.New("ended term"))}, wantErr: apierrors.IsForbidden, wantWrite: 1},
		{name: "ctx ends while the storage is unavailable", failures: slices.Repeat([]error{apierrors.NewServiceUnavailable("no leader")}, 100), cancelled: true,
			wantErr: apierrors.IsServiceUnavailable},
		{name: "failing for many tries within the window, then success", failures: slices.Repeat([]error{apierrors.NewInternalError(errors.New("etcdserver: no leader"))}, 40), wantWrite: 41},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stored := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", UID: "u1", ResourceVersion: "1"}, Status: velerov1.BackupStatus{Phase: velerov1.BackupPhaseInProgress}}
			client := fake.NewSimpleClientset(stored)
			failures := tc.failures
			client.PrependReactor("update", "backups", func(a clienttesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "status" || len(failures) == 0 {
					return false, nil, nil
				}
				err := failures[0]
				failures = failures[1:]
				if tc.cancelled {
					cancel()
				}
				if tc.landed {
					if err := client.Tracker().Update(velerov1.SchemeGroupVersion.WithResource("backups"), a.(clienttesting.UpdateAction).GetObject(), "ns"); err != nil {
						t.Fatal(err)
					}
				}
				return true, nil, err
			})
			obs := &recorder{}
			// Short delays and a window that holds 40 tries: the
			// retries go on for the window, not for a number of steps.
			w := Writer{Engine: "backup", Observers: []Observer{obs}, Retry: TransientRetry{First: time.Millisecond, Cap: 2 * time.Millisecond, Window: 20 * time.Second}}.Backups(client, "ns")
			mutated := 0
			out, err := w.Update(ctx, stored, func(b *velerov1.Backup) {
				mutated++
				if b.Status.Phase == velerov1.BackupPhaseInProgress {
					b.Status.Phase = velerov1.BackupPhaseCompleted
				}
			})
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Fatalf("Update: %v, want the last failure", err)
				}
			} else if err != nil || out.Status.Phase != velerov1.BackupPhaseCompleted {
				t.Fatalf("Update: %v, %v; want Completed", err, out)
			}
			if got := len(updates(client)); tc.wantWrite > 0 && got != tc.wantWrite {
				t.Errorf("%d status writes, want %d", got, tc.wantWrite)
			}
			if tc.cancelled && len(updates(client)) > 2 {
				t.Errorf("%d status writes after ctx ended, want it to stop", len(updates(client)))
			}
			if tc.wantErr == nil {
				b, err := client.VeleroV1().Backups("ns").Get(context.Background(), "b", metav1.GetOptions{})
				if err != nil || b.Status.Phase != velerov1.BackupPhaseCompleted {
					t.Errorf("stored: %v, %v; want Completed", b, err)
				}
			}
			if tc.landed && mutated != 2 {
				t.Errorf("mutate ran %d times, want twice: from the informer's copy, then from the stored object", mutated)
			}
			// The observers hear of the transition once, landed or not.
			if tc.wantErr == nil && (len(obs.seen) != 1 || obs.seen[0].From != string(velerov1.BackupPhaseInProgress) || obs.seen[0].To != string(velerov1.BackupPhaseCompleted)) {
				t.Errorf("the observers were told %+v, want InProgress → Completed once", obs.seen)
			}
		})
	}
}
