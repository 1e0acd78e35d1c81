package vmbackup

import (
	"strings"
	"testing"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
)

// TestDecide: which backup a run takes, how it copies, what it does to its
// tracker, and what it says, for each situation it can meet.
func TestDecide(t *testing.T) {
	withCheckpoint := &kv.VirtualMachineBackupTracker{Status: &kv.VirtualMachineBackupTrackerStatus{LatestCheckpoint: &kv.BackupCheckpoint{Name: "cp-1"}}}
	fresh := &kv.VirtualMachineBackupTracker{}
	for _, tc := range []struct {
		name  string
		facts facts
		want  plan
		// says: words the plan's Complete condition holds.
		says       string
		wantReason string
		// bound: the chain is at its bound (kv.FullEveryAnnotation).
		bound string
	}{
		{name: "a VM, no tracker: full, no checkpoint, tracker untouched", facts: facts{vm: "vm"},
			want: plan{backupType: kv.Full, copy: copyPush, tracker: trackerKept}, wantReason: kv.ReasonCompleted},
		{name: "pull mode: full backups pulled", facts: facts{vm: "vm", fullPull: true},
			want: plan{backupType: kv.Full, copy: copyPull, tracker: trackerKept}, wantReason: kv.ReasonCompleted},
		{name: "a tracker without a checkpoint: full, makes the first", facts: facts{vm: "vm", tracker: fresh, checkpoint: "b-1"},
			want: plan{backupType: kv.Full, checkpoint: "b-1", copy: copyPush, tracker: trackerMoved}, wantReason: kv.ReasonCompleted},
		{name: "a tracker with a checkpoint: incremental since it, pushed even in pull mode", facts: facts{vm: "vm", tracker: withCheckpoint, checkpoint: "b-2", fullPull: true},
			want: plan{backupType: kv.Incremental, since: "cp-1", checkpoint: "b-2", copy: copyPush, tracker: trackerMoved}, wantReason: kv.ReasonCompleted},
		{name: "forceFullBackup", facts: facts{vm: "vm", tracker: withCheckpoint, checkpoint: "b-2", forceFull: true},
			want: plan{backupType: kv.Full, checkpoint: "b-2", copy: copyPush, tracker: trackerMoved}, wantReason: kv.ReasonCompleted},
		{name: "the chain at its bound: full, and why", facts: facts{vm: "vm", tracker: withCheckpoint, checkpoint: "b-2"}, bound: "the chain holds 3",
			want: plan{backupType: kv.Full, checkpoint: "b-2", copy: copyPush, tracker: trackerMoved, bounded: "the chain holds 3"},
			says: "the chain holds 3", wantReason: kv.ReasonCompleted},
		{name: "a stopped VM of a tracker: its disks copied, no checkpoint, the tracker keeps its own", facts: facts{vm: "vm", tracker: withCheckpoint, checkpoint: "b-2", stopped: true, fullPull: true},
			want: plan{backupType: kv.Full, copy: copyStopped, tracker: trackerKept}, says: "is not running", wantReason: kv.ReasonCompletedWithWarning},
		{name: "a stopped VM without a tracker: copied, nothing to warn of", facts: facts{vm: "vm", stopped: true},
			want: plan{backupType: kv.Full, copy: copyStopped, tracker: trackerKept}, wantReason: kv.ReasonCompleted},
		{name: "a raw disk: full, no checkpoint, the tracker cleared", facts: facts{vm: "vm", tracker: withCheckpoint, checkpoint: "b-2", untracked: []string{"vdb"}},
			want: plan{backupType: kv.Full, copy: copyPush, tracker: trackerCleared, untrackedWithTracker: true}, says: "vdb", wantReason: kv.ReasonCompletedWithWarning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decide(tc.facts)
			if tc.bound != "" {
				got = got.fullBounded(tc.bound, tc.facts.fullPull)
			}
			fallback := got.fallback
			got.fallback = ""
			if got != tc.want {
				t.Errorf("decide = %+v, want %+v", got, tc.want)
			}
			got.fallback = fallback
			cond := got.completed(2, 100)
			if cond.Reason != tc.wantReason || (tc.says != "" && !strings.Contains(cond.Message, tc.says)) {
				t.Errorf("Complete: %s %q, want %s saying %q", cond.Reason, cond.Message, tc.wantReason, tc.says)
			}
		})
	}
}

// TestFullInstead: an incremental the checkpoint cannot give becomes a
// full backup that says why, pulled in pull mode, still making its
// checkpoint.
func TestFullInstead(t *testing.T) {
	withCheckpoint := &kv.VirtualMachineBackupTracker{Status: &kv.VirtualMachineBackupTrackerStatus{LatestCheckpoint: &kv.BackupCheckpoint{Name: "cp-1"}}}
	for _, pull := range []bool{false, true} {
		p := decide(facts{vm: "vm", tracker: withCheckpoint, checkpoint: "b-2", fullPull: pull}).fullInstead("checkpoint cp-1 is inconsistent", pull)
		want := copyPush
		if pull {
			want = copyPull
		}
		if p.backupType != kv.Full || p.since != "" || p.checkpoint != "b-2" || p.copy != want || p.tracker != trackerMoved {
			t.Errorf("pull %v: %+v", pull, p)
		}
		if c := p.completed(1, 1); c.Reason != kv.ReasonCompletedWithWarning || !strings.Contains(c.Message, "instead of an incremental one: checkpoint cp-1 is inconsistent") {
			t.Errorf("pull %v: Complete %s %q", pull, c.Reason, c.Message)
		}
	}
}
