package apiserver

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/apis/lifecycle"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

// enginesOf lists the engines a transition table names (a transition
// either of two engines makes names both: "backup, backup-queue").
func enginesOf[P lifecycle.Phase](t lifecycle.Table[P]) []string {
	var out []string
	for _, tr := range t.Transitions {
		out = append(out, strings.Split(tr.By, ", ")...)
	}
	return out
}

// TestEngineTable: every engine has one name (a DNS label, for
// --disable-controllers and the field managers), a part, workers and a
// constructor; every engine a transition table names is in the table; the
// parts an election runs cover every part once.
func TestEngineTable(t *testing.T) {
	seen := map[string]bool{}
	byPart := map[enginePart]int{}
	for _, d := range engineDescriptors() {
		if seen[d.name] {
			t.Errorf("engine %q is in the table twice", d.name)
		}
		seen[d.name] = true
		if msgs := validation.IsDNS1123Label(d.name); len(msgs) > 0 {
			t.Errorf("engine name %q: %v", d.name, msgs)
		}
		if d.workers < 1 || d.new == nil {
			t.Errorf("engine %q: workers %d, constructor set %v", d.name, d.workers, d.new != nil)
		}
		if !slices.Contains(everyPart, d.part) {
			t.Errorf("engine %q: part %d is not one of everyPart", d.name, d.part)
		}
		byPart[d.part]++
	}
	for _, p := range everyPart {
		if byPart[p] == 0 {
			t.Errorf("part %d has no engine", p)
		}
	}
	elected := slices.Concat(clusterParts, hostParts)
	slices.Sort(elected)
	if !slices.Equal(elected, everyPart) {
		t.Errorf("the Leases run parts %v, want each of %v once", elected, everyPart)
	}
	for _, name := range slices.Concat(
		enginesOf(velerov1.BackupLifecycle), enginesOf(velerov1.RestoreLifecycle), enginesOf(velerov1.DeleteBackupRequestLifecycle),
		enginesOf(velerov1.ScheduleLifecycle), enginesOf(oadpv1alpha1.NonAdminBackupLifecycle), enginesOf(oadpv1alpha1.NonAdminRestoreLifecycle),
		enginesOf(oadpv1alpha1.NonAdminBackupStorageLocationLifecycle), enginesOf(oadpv1alpha1.NonAdminScheduleLifecycle),
		enginesOf(oadpv1alpha1.NonAdminDownloadRequestLifecycle), enginesOf(kv.VirtualMachineBackupLifecycle), enginesOf(kv.ChangedBlockTrackingLifecycle),
	) {
		if !seen[name] {
			t.Errorf("a transition table names engine %q, which the engine table does not have", name)
		}
	}
}
