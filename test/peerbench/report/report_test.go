package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSplice: the section replaces what is between the markers, and only
// that; a document without markers gets them appended.
func TestSplice(t *testing.T) {
	doc := "# Benchmarks\n\nbefore\n\n" + Begin + "\nold\n" + End + "\n\nafter\n"
	got := Splice(doc, "new\n")
	if want := "# Benchmarks\n\nbefore\n\n" + Begin + "\nnew\n" + End + "\n\nafter\n"; got != want {
		t.Errorf("splice into markers:\n%s\nwant\n%s", got, want)
	}
	if got := Splice("# Benchmarks\n", "new\n"); got != "# Benchmarks\n\n"+Begin+"\nnew\n"+End+"\n" {
		t.Errorf("splice without markers:\n%s", got)
	}
}

// TestReport: results written by two benchmarks load as one; the section
// has a row per size and op with the ratio against Velero, and the
// charts are SVG files naming both peers.
func TestReport(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("transfers.json", `{"versions": {"Velero": "v1.18.3"}, "transfers": [
		{"objects": 1000, "peer": "velero", "op": "backup", "itemsPerSec": 100, "peakRSSMiB": 90},
		{"objects": 1000, "peer": "backstop", "op": "backup", "itemsPerSec": 400, "peakRSSMiB": 30},
		{"objects": 10000, "peer": "velero", "op": "backup", "itemsPerSec": 80, "peakRSSMiB": 300, "heapBeforeMiB": 10, "heapAfterMiB": 12, "requestsPerItem": 2.5},
		{"objects": 10000, "peer": "backstop", "op": "backup", "itemsPerSec": 500, "peakRSSMiB": 60,
		 "heapBeforeMiB": 38, "heapAfterMiB": 42, "enginesHeapMiB": 3, "watchCacheHeapMiB": 5, "requestsPerItem": 0.01}]}`)
	write("transfers-qps300.json", `{"transfers": [
		{"objects": 10000, "clientQPS": 300, "peer": "velero", "op": "restore", "itemsPerSec": 40, "peakRSSMiB": 90},
		{"objects": 10000, "clientQPS": 300, "peer": "backstop", "op": "restore", "itemsPerSec": 240, "peakRSSMiB": 30}]}`)
	write("queue.json", `{"versions": {"Go": "go1"}, "bursts": [{"peer": "backstop", "backups": 200, "concurrency": 5, "drainSeconds": 12.5, "maxRunning": 5},
		{"peer": "velero", "backups": 200, "concurrency": 5, "failed": 1, "notCompleted": ["b-7: PartiallyFailed"]}]}`)
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	md := r.Markdown("make bench-peers", "images")
	if strings.Count(md, "| 1000 | backup | defaults (100/100) |") != 1 {
		t.Errorf("a run without heap profiles has a row in the live heap table:\n%s", md)
	}
	for _, want := range []string{"- Velero: v1.18.3", "- Go: go1", "| 1000 | backup | defaults (100/100) | 100 | 400 | 4.0x | 90 MiB | 30 MiB | 0.33 |",
		"| 10000 | backup | defaults (100/100) | 80 | 500 | 6.2x |", "| 10000 | restore | both 300/300 | 40 | 240 | 6.0x |", "| backstop | 200 | 5 | 12.5 s |", "(images/peers-throughput.svg)",
		"| 10000 | backup | defaults (100/100) | 2.500 | 0.010 | 10 → 12 MiB | 38 → 42 MiB | 3 MiB | 5 MiB |", "velero's backups not Completed: b-7: PartiallyFailed"} {
		if !strings.Contains(md, want) {
			t.Errorf("the section lacks %q:\n%s", want, md)
		}
	}
	if err := r.Charts(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"peers-throughput.svg", "peers-memory.svg"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if s := string(data); !strings.HasPrefix(strings.TrimSpace(s), "<?xml") || !strings.Contains(s, "<svg") {
			t.Errorf("%s is not an SVG: %.80s", f, s)
		}
	}
}
