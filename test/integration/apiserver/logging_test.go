package apiserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestJSONLogs: with --logging-format=json (kube components' flag) every
// line the server writes, from its start to its stop, is a JSON object
// with a time and a message, and the engines' lines carry the object
// they are about as a field, for log pipelines to select on.
func TestJSONLogs(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{Args: []string{"--logging-format=json"}})
	createBackup(t, s, "logged", "app")
	if b := waitBackup(t, s, "logged", "finished", finished); b.Status.Phase != velerov1.BackupPhaseCompleted {
		t.Fatalf("backup: %s %q", b.Status.Phase, b.Status.FailureReason)
	}
	s.Stop()
	data, err := os.ReadFile(filepath.Join(s.DataDir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	lines, aboutTheBackup := 0, 0
	scanner := bufio.NewScanner(bytes.NewReader(data))
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		line := scanner.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		lines++
		var entry map[string]any
		if err := json.Unmarshal(line, &entry); err != nil {
			t.Errorf("line %d is not JSON: %v: %.300s", lines, err, line)
			continue
		}
		if _, ok := entry["ts"].(float64); !ok {
			t.Errorf("line %d has no time (ts): %.300s", lines, line)
		}
		if _, ok := entry["msg"].(string); !ok {
			t.Errorf("line %d has no message (msg): %.300s", lines, line)
		}
		for key, value := range entry {
			if key != "msg" && strings.Contains(key, "backup") {
				if v, ok := value.(string); ok && strings.Contains(v, "logged") {
					aboutTheBackup++
				}
			}
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	if lines < 10 {
		t.Fatalf("%d lines logged, want the server's (more than 10)", lines)
	}
	if aboutTheBackup == 0 {
		t.Errorf("no line names the backup in a field of its own")
	}
}
