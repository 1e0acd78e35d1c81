package lifecycle_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/lifecycle"
)

type phase string

var table = lifecycle.Table[phase]{
	Kind:     "Thing",
	Phases:   []phase{"", "Running", "Done", "Gone"},
	Terminal: []phase{"Done", "Gone"},
	Transitions: []lifecycle.Transition[phase]{
		{From: lifecycle.From[phase](""), To: "Running", By: "engine"},
		{From: lifecycle.From[phase]("Running"), To: "Done", By: "engine"},
		{From: lifecycle.From[phase]("", "Done"), To: "Gone", By: "engine"},
	},
}

func TestTable(t *testing.T) {
	if err := table.Check(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		from, to phase
		wantErr  string // substring; "" for allowed
	}{
		{"", "", ""},
		{"", "Running", ""},
		{"Running", "Done", ""},
		{"Done", "Gone", ""},
		{"Done", "Running", "terminal phase Done cannot move back to Running (it may only move to Gone)"},
		{"Gone", "Done", "terminal phase Gone cannot change phase"},
		{"Running", "", `Running → "" is not a transition of a Thing (from Running: Done)`},
		{"", "Sideways", "Unsupported value"},
	} {
		errs := table.ValidateChange(c.from, c.to, field.NewPath("status", "phase"))
		switch {
		case c.wantErr == "" && len(errs) > 0:
			t.Errorf("%q → %q: %v, want allowed", c.from, c.to, errs)
		case c.wantErr != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), c.wantErr) || errs[0].Field != "status.phase"):
			t.Errorf("%q → %q: %v, want one error at status.phase containing %q", c.from, c.to, errs, c.wantErr)
		}
	}
	if got := table.Path("", "Gone"); len(got) != 1 || got[0] != "Gone" {
		t.Errorf("Path to Gone = %v, want the direct step", got)
	}
	if got := table.Path("Running", "Gone"); len(got) != 2 || got[0] != "Done" || got[1] != "Gone" {
		t.Errorf("Path Running → Gone = %v, want [Done Gone]", got)
	}
	if got := table.Path("Gone", ""); got != nil {
		t.Errorf("Path out of Gone = %v, want none", got)
	}
	allowed := 0
	for _, c := range table.Changes() {
		if c.Allowed {
			allowed++
		}
	}
	if allowed != 4 {
		t.Errorf("Changes allows %d changes, want the table's 4", allowed)
	}
}

func TestCheckFindsBadTables(t *testing.T) {
	bad := table
	bad.Transitions = append(bad.Transitions[:3:3], lifecycle.Transition[phase]{From: lifecycle.From[phase]("Done"), To: "Running", By: "engine"},
		lifecycle.Transition[phase]{From: lifecycle.From[phase]("Running"), To: "Elsewhere"})
	err := bad.Check()
	for _, want := range []string{"Done → Running leaves a terminal phase", "unknown phase Elsewhere", "no engine makes it"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check() = %v, want it to say %q", err, want)
		}
	}
}
