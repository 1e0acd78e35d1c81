// Package lifecycle is the form in which every Backstop resource with a life
// declares it: its phases, which of them are terminal, and a transition
// table naming every phase change that exists and the engine that makes it.
// The Velero kinds, the tenants' oadp.openshift.io kinds and the KubeVirt
// backup kinds have one each (docs/lifecycle.md, generated from them, shows
// them all).
//
// A resource's table lives beside its versioned types (for example
// pkg/apis/velero/v1/lifecycle.go). The registry's status strategy refuses a
// phase change the table does not list, for every writer; engines make only
// the changes it lists; a test walks each table through the strategy.
//
// Phase changes are made by the server's engines alone. The table says which
// engine (by its --disable-controllers name) makes each one, so that the
// whole life of a resource can be read in one place.
package lifecycle

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Phase is a resource's phase type (velerov1.BackupPhase, ...). The empty
// phase is the phase of an object nothing has processed yet.
type Phase interface{ ~string }

// Transition is one phase change: from any of From to To, made by the
// engine By when When holds.
type Transition[P Phase] struct {
	From []P
	To   P
	By   string
	When string
}

// Table is the life of one resource.
type Table[P Phase] struct {
	// Kind is the resource's kind, for messages.
	Kind string
	// Phases lists every phase in the order of a typical life; the first
	// ones are those of a new object.
	Phases []P
	// Terminal phases end the life: their only transitions lead to other
	// terminal phases (a finished backup may still be deleted), never back.
	Terminal []P
	// Transitions lists every phase change that exists.
	Transitions []Transition[P]
}

// From is a helper to write a transition's sources.
func From[P Phase](phases ...P) []P { return phases }

// Known reports whether p is one of the table's phases.
func (t Table[P]) Known(p P) bool { return slices.Contains(t.Phases, p) }

// IsTerminal reports whether p ends the life.
func (t Table[P]) IsTerminal(p P) bool { return slices.Contains(t.Terminal, p) }

// Lookup returns the transition from → to, if the table has it.
func (t Table[P]) Lookup(from, to P) (Transition[P], bool) {
	for _, tr := range t.Transitions {
		if tr.To == to && slices.Contains(tr.From, from) {
			return tr, true
		}
	}
	return Transition[P]{}, false
}

// Allows reports whether the phase may change from → to; staying in a phase
// is always allowed.
func (t Table[P]) Allows(from, to P) bool {
	if from == to {
		return true
	}
	_, ok := t.Lookup(from, to)
	return ok
}

// Next lists the phases the table allows after from.
func (t Table[P]) Next(from P) []P {
	var out []P
	for _, p := range t.Phases {
		if p != from && t.Allows(from, p) {
			out = append(out, p)
		}
	}
	return out
}

// Path returns the shortest list of phases leading from → to (without
// from), or nil when to cannot be reached. Tests use it to bring an object
// to a phase the way the engines would.
func (t Table[P]) Path(from, to P) []P {
	if from == to {
		return []P{}
	}
	prev := map[P]P{from: from}
	queue := []P{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, n := range t.Next(cur) {
			if _, seen := prev[n]; seen {
				continue
			}
			prev[n] = cur
			if n == to {
				var path []P
				for p := to; p != from; p = prev[p] {
					path = append([]P{p}, path...)
				}
				return path
			}
			queue = append(queue, n)
		}
	}
	return nil
}

// ValidateChange returns the error of a phase change the table does not
// allow, at fld (status.phase): an unknown phase, a move out of a terminal
// phase, or a change that is not a transition.
func (t Table[P]) ValidateChange(from, to P, fld *field.Path) field.ErrorList {
	if from == to {
		return nil
	}
	if !t.Known(to) {
		return field.ErrorList{field.NotSupported(fld, to, t.Phases)}
	}
	if t.Allows(from, to) {
		return nil
	}
	next := t.Next(from)
	switch {
	case t.IsTerminal(from) && len(next) == 0:
		return field.ErrorList{field.Forbidden(fld, fmt.Sprintf("a %s in the terminal phase %s cannot change phase (to %s)", t.Kind, show(from), show(to)))}
	case t.IsTerminal(from):
		return field.ErrorList{field.Forbidden(fld, fmt.Sprintf("a %s in the terminal phase %s cannot move back to %s (it may only move to %s)", t.Kind, show(from), show(to), list(next)))}
	case len(next) == 0:
		return field.ErrorList{field.Forbidden(fld, fmt.Sprintf("%s → %s is not a transition of a %s", show(from), show(to), t.Kind))}
	}
	return field.ErrorList{field.Forbidden(fld, fmt.Sprintf("%s → %s is not a transition of a %s (from %s: %s)", show(from), show(to), t.Kind, show(from), list(next)))}
}

// Check verifies the table itself: every phase a transition names is
// known, and terminal phases lead only to terminal phases.
func (t Table[P]) Check() error {
	var problems []string
	for _, tr := range t.Transitions {
		if tr.By == "" {
			problems = append(problems, fmt.Sprintf("→ %s: no engine makes it", show(tr.To)))
		}
		for _, p := range append(slices.Clone(tr.From), tr.To) {
			if !t.Known(p) {
				problems = append(problems, fmt.Sprintf("unknown phase %s", show(p)))
			}
		}
		for _, f := range tr.From {
			if t.IsTerminal(f) && !t.IsTerminal(tr.To) {
				problems = append(problems, fmt.Sprintf("%s → %s leaves a terminal phase", show(f), show(tr.To)))
			}
		}
	}
	for _, p := range t.Terminal {
		if !t.Known(p) {
			problems = append(problems, fmt.Sprintf("unknown terminal phase %s", show(p)))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s lifecycle: %s", t.Kind, strings.Join(problems, "; "))
	}
	return nil
}

// Markdown renders the table (docs/lifecycle.md is made of these).
func (t Table[P]) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "| from | to | by | when |\n|---|---|---|---|\n")
	for _, tr := range t.Transitions {
		from := make([]string, 0, len(tr.From))
		for _, f := range tr.From {
			from = append(from, show(f))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", strings.Join(from, ", "), show(tr.To), tr.By, tr.When)
	}
	terminal := make([]string, 0, len(t.Terminal))
	for _, p := range t.Terminal {
		terminal = append(terminal, show(p))
	}
	fmt.Fprintf(&b, "\nTerminal: %s.\n", strings.Join(terminal, ", "))
	return b.String()
}

func show[P Phase](p P) string {
	if p == "" {
		return `""`
	}
	return string(p)
}

func list[P Phase](ps []P) string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, show(p))
	}
	return strings.Join(out, ", ")
}

// Change is a pair of phases and whether the table allows the change.
type Change[P Phase] struct {
	From, To P
	Allowed  bool
}

// Changes lists every ordered pair of distinct phases with whether the
// table allows it: what a test walks.
func (t Table[P]) Changes() []Change[P] {
	var out []Change[P]
	for _, from := range t.Phases {
		for _, to := range t.Phases {
			if from != to {
				out = append(out, Change[P]{From: from, To: to, Allowed: t.Allows(from, to)})
			}
		}
	}
	return out
}
