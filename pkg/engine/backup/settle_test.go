package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/enginetest"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// TestSyncSettlesOrphans: a backup the informer shows in a phase of a run
// while no run of this process has it (its end could not be written, or
// the server before this one ran it and this one's view was behind) is
// settled as a restart settles it, decided on the backup as stored: one
// in progress fails with the reason and loses its partial data, one
// finalizing is finished; one the informer shows behind its stored end,
// one a run has, and one cancelled before it started are left alone.
func TestSyncSettlesOrphans(t *testing.T) {
	const ns = "backstop-system"
	started := metav1.NewTime(time.Unix(100, 0))
	for _, tc := range []struct {
		name       string
		seen       velerov1.BackupPhase // in the informer
		stored     velerov1.BackupPhase
		notStarted bool // no status.startTimestamp
		running    bool // a run of this process has it
		wantPhase  velerov1.BackupPhase
		wantReason string
		wantData   bool // the tarball still in the location
	}{
		{name: "in progress, no run: failed, partial data removed", seen: velerov1.BackupPhaseInProgress, stored: velerov1.BackupPhaseInProgress,
			wantPhase: velerov1.BackupPhaseFailed, wantReason: velerov1.BackupInterruptedReason},
		{name: "finalizing, no run: finished", seen: velerov1.BackupPhaseFinalizing, stored: velerov1.BackupPhaseFinalizing,
			wantPhase: velerov1.BackupPhaseCompleted, wantData: true},
		{name: "the informer behind the run's written end: left", seen: velerov1.BackupPhaseInProgress, stored: velerov1.BackupPhaseCompleted,
			wantPhase: velerov1.BackupPhaseCompleted, wantData: true},
		{name: "a run has it: left", seen: velerov1.BackupPhaseInProgress, stored: velerov1.BackupPhaseInProgress, running: true,
			wantPhase: velerov1.BackupPhaseInProgress, wantData: true},
		{name: "cancelled before it started: the queue's", seen: velerov1.BackupPhaseFinalizingCancelled, stored: velerov1.BackupPhaseFinalizingCancelled,
			notStarted: true, wantPhase: velerov1.BackupPhaseFinalizingCancelled, wantData: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			bucket := t.TempDir()
			store, err := objectstore.NewFilesystem(bucket)
			if err != nil {
				t.Fatal(err)
			}
			layout := objectstore.NewLayout("")
			tarKey, _ := layout.Key(velerov1.DownloadTargetKindBackupContents, "b")
			if err := store.Put(ctx, tarKey, bytes.NewReader([]byte("items"))); err != nil {
				t.Fatal(err)
			}
			location := &velerov1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns},
				Spec: velerov1.BackupStorageLocationSpec{Provider: objectstore.ProviderFilesystem,
					StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: bucket}}},
				Status: velerov1.BackupStorageLocationStatus{Phase: velerov1.BackupStorageLocationPhaseAvailable}}
			backup := func(phase velerov1.BackupPhase, rv string) *velerov1.Backup {
				b := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: ns, UID: "u", ResourceVersion: rv},
					Spec: velerov1.BackupSpec{StorageLocation: "default"}, Status: velerov1.BackupStatus{Phase: phase, StartTimestamp: &started}}
				if tc.notStarted {
					b.Status.StartTimestamp = nil
				}
				return b
			}
			w := enginetest.New(t, location, backup(tc.stored, "2"))
			w.Put(t, backup(tc.seen, "1"))
			v := w.Factory.Velero().V1()
			c, err := New(Config{Client: w.Client, Backups: v.Backups(), Locations: v.BackupStorageLocations(),
				Clock: clocktesting.NewFakeClock(time.Unix(200, 0)), ScratchDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if tc.running {
				c.running["b"] = &run{uid: "u", cancel: func(error) {}, done: make(chan struct{})}
			}
			if err := c.sync(ctx, cache.ObjectName{Namespace: ns, Name: "b"}); err != nil {
				t.Fatal(err)
			}
			got, err := w.Client.VeleroV1().Backups(ns).Get(ctx, "b", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase != tc.wantPhase || got.Status.FailureReason != tc.wantReason {
				t.Errorf("stored: %s %q, want %s %q", got.Status.Phase, got.Status.FailureReason, tc.wantPhase, tc.wantReason)
			}
			_, err = store.Get(ctx, tarKey)
			if kept := err == nil; kept != tc.wantData {
				t.Errorf("the tarball in the location: %v, want kept %v", err, tc.wantData)
			}
			if tc.wantPhase == tc.stored && len(w.Writes()) != 0 {
				t.Errorf("writes %v, want none", w.Writes())
			}
		})
	}
}

// TestOwnStart: a start that finds the backup InProgress from its own
// write (it landed, though it answered a transient error) knows it, as
// stored (to the second); another start, or an ended run, is not its own.
func TestOwnStart(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 28, 12, 0, 0, 700_000_000, time.UTC))
	stored := func(phase velerov1.BackupPhase, start time.Time, ended bool) *velerov1.Backup {
		b := &velerov1.Backup{Status: velerov1.BackupStatus{Phase: phase}}
		if !start.IsZero() {
			// As read back from the API: JSON, to the second.
			data, err := json.Marshal(metav1.NewTime(start))
			if err != nil {
				t.Fatal(err)
			}
			var ts metav1.Time
			if err := json.Unmarshal(data, &ts); err != nil {
				t.Fatal(err)
			}
			b.Status.StartTimestamp = &ts
		}
		if ended {
			b.Status.CompletionTimestamp = &now
		}
		return b
	}
	for _, tc := range []struct {
		name string
		b    *velerov1.Backup
		want bool
	}{
		{"its own write, read back", stored(velerov1.BackupPhaseInProgress, now.Time, false), true},
		{"started a second earlier", stored(velerov1.BackupPhaseInProgress, now.Add(-time.Second), false), false},
		{"not started", stored(velerov1.BackupPhaseReadyToStart, time.Time{}, false), false},
		{"ended", stored(velerov1.BackupPhaseFailed, now.Time, true), false},
	} {
		if got := ownStart(tc.b, now); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestOwnEnd: a cancelled backup's last write, sent again after it landed
// though it answered an error, finds its own end and counts nothing twice.
func TestOwnEnd(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 29, 5, 0, 0, 300_000_000, time.UTC))
	second := metav1.NewTime(now.Truncate(time.Second))
	before := metav1.NewTime(now.Add(-time.Second))
	for _, tc := range []struct {
		name string
		s    velerov1.BackupStatus
		want bool
	}{
		{"its own end, read back", velerov1.BackupStatus{Phase: velerov1.BackupPhaseFailed, FailureReason: velerov1.BackupCancelledReason, CompletionTimestamp: &second}, true},
		{"ended a second earlier", velerov1.BackupStatus{Phase: velerov1.BackupPhaseFailed, FailureReason: velerov1.BackupCancelledReason, CompletionTimestamp: &before}, false},
		{"another reason", velerov1.BackupStatus{Phase: velerov1.BackupPhaseFailed, FailureReason: velerov1.BackupDeletedReason, CompletionTimestamp: &second}, false},
		{"still cancelling", velerov1.BackupStatus{Phase: velerov1.BackupPhaseFinalizingCancelled}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ownEnd(&tc.s, velerov1.BackupCancelledReason, now); got != tc.want {
				t.Errorf("ownEnd = %v, want %v", got, tc.want)
			}
		})
	}
}
