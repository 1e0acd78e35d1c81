// Command benchratio reads `go test -bench` output of test/storagebench
// from stdin and prints a markdown table comparing, per benchmark and
// metric, the backend=pebble result with the backend=etcd3 one, with the
// targets the Pebble backend is meant to meet; then, when the input has
// backend=pebble+watchcache results, a table of Pebble with and without the
// apiserver's watch cache in front.
//
// Usage: go run ./hack/benchratio < _output/bench.txt
//
// Benchmarks are paired by their name without the backend=<name> element.
// Metrics: ops/s (higher is better) and *-ns latencies (lower is better);
// ns/op is left out, being the inverse of ops/s. Results of repeated runs
// (-count) are averaged.
package main

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

const (
	candidate = "pebble"
	baseline  = "etcd3"
	cached    = "pebble+watchcache"
)

// target is a goal for the pebble/etcd3 ratio of one metric of the
// benchmarks whose names start with prefix.
type target struct {
	prefix, unit string
	// atLeast: ratio >= value when true, ratio <= value otherwise.
	atLeast bool
	value   float64
}

func targets() []target {
	return []target{
		{prefix: "BenchmarkStorage/Create/", unit: "ops/s", atLeast: true, value: 3},
		{prefix: "BenchmarkStorage/Update/", unit: "ops/s", atLeast: true, value: 3},
		{prefix: "BenchmarkStorage/List/", unit: "ops/s", atLeast: true, value: 2},
		{prefix: "BenchmarkStorage/Watch/", unit: "p99-ns", atLeast: false, value: 1},
	}
}

// sums accumulates the values of one metric of one backend.
type sums struct {
	total float64
	n     int
}

func (s sums) mean() float64 { return s.total / float64(s.n) }

type row struct{ bench, unit string }

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "benchratio: %v\n", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	var order []row
	values := map[row]map[string]*sums{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		bench, backend, metrics, ok := parseLine(sc.Text())
		if !ok {
			continue
		}
		for unit, v := range metrics {
			r := row{bench, unit}
			if values[r] == nil {
				values[r] = map[string]*sums{}
				order = append(order, r)
			}
			if values[r][backend] == nil {
				values[r][backend] = &sums{}
			}
			values[r][backend].total += v
			values[r][backend].n++
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading the benchmark output: %w", err)
	}
	if len(order) == 0 {
		return fmt.Errorf("no backend=%s or backend=%s benchmark results in the input", candidate, baseline)
	}
	// Metrics of one benchmark in a stable order: throughput, then latencies.
	sortRows(order)

	fmt.Fprintf(out, "| Benchmark | Metric | %s | %s | %s/%s | %s is | Target |\n", candidate, baseline, candidate, baseline, candidate)
	fmt.Fprintln(out, "|---|---|---:|---:|---:|---|---|")
	for _, r := range order {
		c, b := values[r][candidate], values[r][baseline]
		if c == nil || b == nil {
			continue
		}
		cv, bv := c.mean(), b.mean()
		ratio := cv / bv
		fmt.Fprintf(out, "| %s | %s | %s | %s | %.2f | %s | %s |\n",
			strings.TrimPrefix(r.bench, "BenchmarkStorage/"), metricName(r.unit),
			format(cv, r.unit), format(bv, r.unit), ratio, verdict(ratio, r.unit), targetCell(r, ratio))
	}

	header := false
	for _, r := range order {
		c, w, b := values[r][candidate], values[r][cached], values[r][baseline]
		if c == nil || w == nil {
			continue
		}
		if !header {
			fmt.Fprintf(out, "\nWith the watch cache in front (%s) and without (%s):\n\n", cached, candidate)
			fmt.Fprintf(out, "| Benchmark | Metric | %s | %s | with/without | with cache is | %s/%s |\n", candidate, cached, cached, baseline)
			fmt.Fprintln(out, "|---|---|---:|---:|---:|---|---:|")
			header = true
		}
		cv, wv := c.mean(), w.mean()
		vsBaseline := "-"
		if b != nil {
			vsBaseline = fmt.Sprintf("%.2f", wv/b.mean())
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s | %.2f | %s | %s |\n",
			strings.TrimPrefix(r.bench, "BenchmarkStorage/"), metricName(r.unit),
			format(cv, r.unit), format(wv, r.unit), wv/cv, verdict(wv/cv, r.unit), vsBaseline)
	}
	return nil
}

// parseLine splits a benchmark result line into its name without the
// backend element and the -GOMAXPROCS suffix, the backend, and the metrics
// kept for the table.
func parseLine(line string) (bench, backend string, metrics map[string]float64, ok bool) {
	fields := strings.Fields(line)
	if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
		return "", "", nil, false
	}
	name := fields[0]
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			name = name[:i]
		}
	}
	var parts []string
	for _, p := range strings.Split(name, "/") {
		if b, found := strings.CutPrefix(p, "backend="); found {
			backend = b
			continue
		}
		parts = append(parts, p)
	}
	if backend != candidate && backend != baseline && backend != cached {
		return "", "", nil, false
	}
	metrics = map[string]float64{}
	for i := 2; i+1 < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			continue
		}
		unit := fields[i+1]
		if unit == "ops/s" || strings.HasSuffix(unit, "-ns") {
			metrics[unit] = v
		}
	}
	return strings.Join(parts, "/"), backend, metrics, len(metrics) > 0
}

// sortRows orders the metrics of each benchmark (ops/s first), keeping the
// benchmarks in their input order.
func sortRows(rows []row) {
	rank := func(unit string) int {
		switch unit {
		case "ops/s":
			return 0
		case "p50-ns":
			return 1
		case "p99-ns":
			return 2
		}
		return 3
	}
	first := map[string]int{}
	for i, r := range rows {
		if _, ok := first[r.bench]; !ok {
			first[r.bench] = i
		}
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		if c := cmp.Compare(first[a.bench], first[b.bench]); c != 0 {
			return c
		}
		return cmp.Compare(rank(a.unit), rank(b.unit))
	})
}

func metricName(unit string) string {
	if q, ok := strings.CutSuffix(unit, "-ns"); ok {
		return q + " latency"
	}
	return unit
}

func lowerIsBetter(unit string) bool { return strings.HasSuffix(unit, "-ns") }

func format(v float64, unit string) string {
	if lowerIsBetter(unit) {
		switch {
		case v >= 1e6:
			return fmt.Sprintf("%.2f ms", v/1e6)
		case v >= 1e3:
			return fmt.Sprintf("%.1f µs", v/1e3)
		}
		return fmt.Sprintf("%.0f ns", v)
	}
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// verdict says how much better or worse the candidate is.
func verdict(ratio float64, unit string) string {
	better := ratio
	if lowerIsBetter(unit) {
		better = 1 / ratio
	}
	if better >= 1 {
		return fmt.Sprintf("%.2fx better", better)
	}
	return fmt.Sprintf("%.2fx worse", 1/better)
}

func targetCell(r row, ratio float64) string {
	for _, t := range targets() {
		if t.unit != r.unit || !strings.HasPrefix(r.bench, t.prefix) {
			continue
		}
		if t.atLeast {
			if ratio >= t.value {
				return fmt.Sprintf("met (>= %gx)", t.value)
			}
			return fmt.Sprintf("**not met** (>= %gx)", t.value)
		}
		if ratio <= t.value {
			return fmt.Sprintf("met (ratio <= %g)", t.value)
		}
		return fmt.Sprintf("**not met** (ratio <= %g)", t.value)
	}
	return ""
}
