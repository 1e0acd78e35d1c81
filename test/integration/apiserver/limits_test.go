package apiserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// waitLogged polls the server log until it has a line with every part.
func waitLogged(t *testing.T, s *framework.Server, parts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		data, err := os.ReadFile(filepath.Join(s.DataDir, "server.log"))
		if err != nil {
			return false, err
		}
		for _, line := range strings.Split(string(data), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the server log has no line with %q", parts)
	}
}

// TestConcurrencyLimits: with --concurrent-backups=1 and 3, that many
// backups of disjoint namespaces are ReadyToStart at once and the others
// wait in creation order; a backup sharing a namespace with a running one
// waits for it even with a slot free; the server log says what holds each
// waiting backup back.
func TestConcurrencyLimits(t *testing.T) {
	t.Parallel()
	type step struct {
		complete []string
		want     map[string]string
	}
	for _, c := range []struct {
		limit   int
		created map[string]string
		steps   []step
		logged  []string
	}{
		{
			limit:   1,
			created: map[string]string{"b1": "ReadyToStart/0", "b2": "Queued/1", "b3": "Queued/2", "b4": "Queued/3", "b5": "Queued/4"},
			steps: []step{
				{[]string{"b1"}, map[string]string{"b2": "ReadyToStart/0", "b3": "Queued/1", "b4": "Queued/2", "b5": "Queued/3"}},
				{[]string{"b2"}, map[string]string{"b3": "ReadyToStart/0", "b4": "Queued/1", "b5": "Queued/2"}},
			},
			logged: []string{`"Backup waits for a free slot"`, `backup="b2"`, "concurrentBackups=1"},
		},
		{
			limit:   3,
			created: map[string]string{"b1": "ReadyToStart/0", "b2": "ReadyToStart/0", "b3": "ReadyToStart/0", "b4": "Queued/1", "b5": "Queued/2"},
			steps: []step{
				// Two slots free: b4 starts, b5 waits for b1 (ns-1).
				{[]string{"b2", "b3"}, map[string]string{"b1": "ReadyToStart/0", "b4": "ReadyToStart/0", "b5": "Queued/1"}},
				{[]string{"b1"}, map[string]string{"b4": "ReadyToStart/0", "b5": "ReadyToStart/0"}},
			},
			logged: []string{`"Backup waits: its namespaces are in use"`, `backup="b5"`, `b1 (running): ns-1`},
		},
	} {
		t.Run(fmt.Sprintf("concurrent-backups=%d", c.limit), func(t *testing.T) {
			s := framework.Start(t, framework.Options{Args: append([]string{fmt.Sprintf("--concurrent-backups=%d", c.limit)}, withoutBackupEngine...)})
			// b1..b4 have namespaces of their own; b5 shares ns-1 with b1.
			for i, namespaces := range [][]string{{"ns-1"}, {"ns-2"}, {"ns-3"}, {"ns-4"}, {"ns-5", "ns-1"}} {
				name := fmt.Sprintf("b%d", i+1)
				createBackup(t, s, name, namespaces...)
				waitBackup(t, s, name, "queued", func(b *velerov1.Backup) bool {
					return b.Status.Phase == velerov1.BackupPhaseQueued || b.Status.Phase == velerov1.BackupPhaseReadyToStart
				})
			}
			waitQueue(t, s, c.created)
			waitLogged(t, s, c.logged...)
			for _, st := range c.steps {
				for _, name := range st.complete {
					setBackupPhase(t, s, name, velerov1.BackupPhaseInProgress)
					setBackupPhase(t, s, name, velerov1.BackupPhaseCompleted)
				}
				waitQueue(t, s, st.want)
			}
		})
	}
}
