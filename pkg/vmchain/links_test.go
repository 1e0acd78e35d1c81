package vmchain

import (
	"testing"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/vmmanifest"
)

func linkOf(dir string, typ kv.BackupType, checkpoint, parent string) Link {
	return Link{Dir: dir, Manifest: vmmanifest.Manifest{Type: typ, Checkpoint: checkpoint, Parent: parent}}
}

func TestNextAndIncrementals(t *testing.T) {
	chain := []Link{
		linkOf("b3", kv.Incremental, "c3", "c2"),
		linkOf("b1", kv.Full, "c1", ""),
		linkOf("b2", kv.Incremental, "c2", "c1"),
		linkOf("other", kv.Full, "", ""), // a full backup without a checkpoint
	}
	for _, c := range []struct {
		checkpoint string
		next       string
		n          int
		found      bool
	}{
		{"c1", "b2", 0, true},
		{"c2", "b3", 1, true},
		{"c3", "", 2, true},
		{"gone", "", 0, false},
		{"", "", 0, false},
	} {
		next, ok, err := Next(chain, c.checkpoint)
		if err != nil || ok != (c.next != "") || next.Dir != c.next {
			t.Errorf("Next(%q) = %q, %v, %v; want %q", c.checkpoint, next.Dir, ok, err, c.next)
		}
		if n, found := Incrementals(chain, c.checkpoint); n != c.n || found != c.found {
			t.Errorf("Incrementals(%q) = %d, %v; want %d, %v", c.checkpoint, n, found, c.n, c.found)
		}
	}
	// A link missing in the middle: the chain is not whole.
	if _, found := Incrementals([]Link{chain[0], chain[1]}, "c3"); found {
		t.Errorf("Incrementals over a missing link: found")
	}
	// Two links since one checkpoint is an error, not a choice.
	if _, _, err := Next(append(chain, linkOf("b2bis", kv.Incremental, "c2bis", "c1")), "c1"); err == nil {
		t.Errorf("Next with two links since c1: no error")
	}
	// A loop ends.
	if _, found := Incrementals([]Link{linkOf("x", kv.Incremental, "a", "b"), linkOf("y", kv.Incremental, "b", "a")}, "a"); found {
		t.Errorf("Incrementals over a loop: found")
	}
}
