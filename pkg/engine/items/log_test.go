package items

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// TestLogTee: the lines teed are the stored log's, byte for byte (a live
// reader's offsets go on in the stored log), and none after it is
// finished.
func TestLogTee(t *testing.T) {
	log, err := NewLog(t.TempDir(), clock.RealClock{}, klog.Background(), "backup", "ns/b")
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	log.Info("before the tee") // not teed: the tee starts later
	var tee bytes.Buffer
	log.Tee(&tee)
	log.Info("Backup started", "storageLocation", "default")
	log.Warning("ns", ScopeVelero, "a warning")
	log.Error("", ScopeCluster, "an error", "item", "a b")
	rd, err := log.Finish()
	if err != nil {
		t.Fatal(err)
	}
	log.Info("after the log was finished")
	zr, err := gzip.NewReader(rd)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	first, rest, _ := strings.Cut(string(stored), "\n")
	if !strings.Contains(first, "before the tee") || rest != tee.String() || strings.Count(rest, "\n") != 3 {
		t.Errorf("stored log:\n%s\nteed:\n%s\nwant the stored lines after the first teed as they are", stored, tee.String())
	}
	if strings.Contains(tee.String(), "after the log was finished") {
		t.Error("a line logged after Finish was teed")
	}
}
