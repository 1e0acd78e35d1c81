// Command peer-report turns a run of the peer benchmarks (the JSON files
// `make bench-peers` writes) into the charts under docs/images/ and the
// section of docs/benchmarks.md between report.Begin and report.End.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/backstop-io/backstop/test/peerbench/report"
)

func main() {
	results := flag.String("results", "_output/bench-peers", "directory of the run's JSON results")
	doc := flag.String("doc", "docs/benchmarks.md", "the Markdown file whose section is rewritten")
	charts := flag.String("charts", "docs/images", "directory the charts are written to")
	command := flag.String("command", "make bench-peers", "the command the section says reproduces it")
	flag.Parse()
	if err := run(*results, *doc, *charts, *command); err != nil {
		fmt.Fprintln(os.Stderr, "peer-report:", err)
		os.Exit(1)
	}
}

func run(results, doc, charts, command string) error {
	r, err := report.Load(results)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(charts, 0o755); err != nil {
		return err
	}
	if err := r.Charts(charts); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(doc), charts)
	if err != nil {
		return err
	}
	return report.WriteDoc(doc, r.Markdown(command, filepath.ToSlash(rel)))
}
