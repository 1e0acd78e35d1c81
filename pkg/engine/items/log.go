package items

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// MaxResultMessages bounds the messages kept per scope in the results file;
// the counts in the status stay exact.
const MaxResultMessages = 1000

// Log is a backup's or restore's own log: text lines in the logrus format
// Velero's have (`velero backup logs` prints them as they are), spooled
// gzipped to a scratch file so memory stays flat, and mirrored to the
// server's log. It also gathers the errors and warnings of the results file.
type Log struct {
	mu     sync.Mutex
	file   *os.File
	gz     *gzip.Writer
	err    error
	clock  clock.Clock
	server logr.Logger
	fields string
	tee    io.Writer

	errors, warnings    Result
	errCount, warnCount int
}

// Result is Velero's results.Result: messages about Velero itself, about
// cluster-scoped items, and per namespace.
type Result struct {
	Velero     []string            `json:"velero,omitempty"`
	Cluster    []string            `json:"cluster,omitempty"`
	Namespaces map[string][]string `json:"namespaces,omitempty"`
}

func (r *Result) add(namespace, scope, msg string) {
	switch {
	case namespace != "":
		if r.Namespaces == nil {
			r.Namespaces = map[string][]string{}
		}
		if len(r.Namespaces[namespace]) < MaxResultMessages {
			r.Namespaces[namespace] = append(r.Namespaces[namespace], msg)
		}
	case scope == ScopeCluster:
		if len(r.Cluster) < MaxResultMessages {
			r.Cluster = append(r.Cluster, msg)
		}
	default:
		if len(r.Velero) < MaxResultMessages {
			r.Velero = append(r.Velero, msg)
		}
	}
}

const (
	ScopeVelero  = "velero"
	ScopeCluster = "cluster"
)

// NewLog spools a run's log into dir. fields (key, value pairs) are
// added to every line, e.g. backup=<ns>/<name>.
func NewLog(dir string, clk clock.Clock, server logr.Logger, fields ...string) (*Log, error) {
	f, err := os.CreateTemp(dir, "log-*.gz")
	if err != nil {
		return nil, fmt.Errorf("creating the log: %w", err)
	}
	var b strings.Builder
	for i := 0; i+1 < len(fields); i += 2 {
		fmt.Fprintf(&b, " %s=%s", fields[i], quote(fields[i+1]))
	}
	kv := make([]any, 0, len(fields))
	for _, s := range fields {
		kv = append(kv, s)
	}
	return &Log{file: f, gz: gzip.NewWriter(f), clock: clk, server: server.WithValues(kv...), fields: b.String()}, nil
}

func quote(s string) string {
	if s == "" || strings.ContainsAny(s, " \"=\t\n") {
		return fmt.Sprintf("%q", s)
	}
	return s
}

func (l *Log) line(level, msg string, kv []any) {
	var b strings.Builder
	fmt.Fprintf(&b, "time=%q level=%s msg=%q", l.clock.Now().UTC().Format(time.RFC3339), level, msg)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, " %v=%s", kv[i], quote(fmt.Sprint(kv[i+1])))
	}
	b.WriteString(l.fields)
	b.WriteByte('\n')
	if l.err == nil {
		line := []byte(b.String())
		if _, l.err = l.gz.Write(line); l.err == nil && l.tee != nil {
			_, _ = l.tee.Write(line)
		}
	}
}

// Tee sends every line from now on to w as well, as the stored log will
// have it (a run's live log: livelog.Tail).
func (l *Log) Tee(w io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tee = w
}

// Info logs a line.
func (l *Log) Info(msg string, kv ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.line("info", msg, kv)
	l.server.Info(msg, kv...)
}

// Item logs a line about one item: in the run's log, and in the server's
// at verbosity 4 only (a restore of 100,000 items would otherwise write
// them all to the server's log too).
func (l *Log) Item(msg string, kv ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.line("info", msg, kv)
	l.server.V(4).Info(msg, kv...)
}

// Warning logs a warning about an item of namespace ("" for cluster-scoped
// items, or for the run as a whole when scope is velero).
func (l *Log) Warning(namespace, scope, msg string, kv ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.warnCount++
	l.warnings.add(namespace, scope, msg)
	l.line("warning", msg, kv)
	l.server.Info("Warning: "+msg, kv...)
}

// Error logs an error; it makes the run PartiallyFailed.
func (l *Log) Error(namespace, scope, msg string, kv ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errCount++
	l.errors.add(namespace, scope, msg)
	l.line("error", msg, kv)
	l.server.Info("Error: "+msg, kv...)
}

// Carry counts errors and warnings that an earlier log of the same run
// counted (a run resumed by another process: the lines are that process's).
func (l *Log) Carry(errs, warnings int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errCount += errs
	l.warnCount += warnings
}

// Counts are the errors and warnings so far.
func (l *Log) Counts() (errs, warnings int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.errCount, l.warnCount
}

// Results is the content of <backup>-results.gz (before compression).
func (l *Log) Results() ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return json.Marshal(map[string]Result{"errors": l.errors, "warnings": l.warnings})
}

// Messages are the errors and warnings so far, each prefixed with its
// namespace or scope, at most max of each.
func (l *Log) Messages(max int) (errs, warnings []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.errors.flat(max), l.warnings.flat(max)
}

func (r *Result) flat(max int) []string {
	var out []string
	add := func(prefix string, msgs []string) {
		for _, m := range msgs {
			if len(out) < max {
				out = append(out, prefix+m)
			}
		}
	}
	add("", r.Velero)
	add("cluster: ", r.Cluster)
	namespaces := make([]string, 0, len(r.Namespaces))
	for ns := range r.Namespaces {
		namespaces = append(namespaces, ns)
	}
	sort.Strings(namespaces)
	for _, ns := range namespaces {
		add("namespace "+ns+": ", r.Namespaces[ns])
	}
	return out
}

// Finish closes the gzip stream and returns the log to upload; Close
// removes the scratch file.
func (l *Log) Finish() (io.ReadSeeker, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = l.gz.Close()
	}
	if l.err != nil {
		return nil, fmt.Errorf("writing the log: %w", l.err)
	}
	if _, err := l.file.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("reading the log: %w", err)
	}
	return l.file, nil
}

// Close removes the scratch file.
func (l *Log) Close() {
	_ = l.file.Close()
	_ = os.Remove(l.file.Name())
}
