package v1alpha1

import (
	"strings"
	"testing"
)

func TestNACUUID(t *testing.T) {
	const id = "0d0b7b2c-ee76-412d-a867-2c23b8aa51ab"
	cases := []struct {
		namespace, name, want string
	}{
		{"nacproject", "backup-1", "nacproject-backup-1-" + id},
		// The name is cut to what is left of 25 characters: the design
		// document's example.
		{"mongo-persistent", "anotherteam-backup", "mongo-persistent-anotherte-" + id},
		// A namespace of more than 25 characters: cut, and no name.
		{"a-very-long-namespace-name-for-tests", "b", "a-very-long-namespace-nam-" + id},
		{"", "x", "x-" + id},
	}
	for _, c := range cases {
		got := nacUUID(c.namespace, c.name, id)
		if got != c.want {
			t.Errorf("nacUUID(%q, %q) = %q, want %q", c.namespace, c.name, got, c.want)
		}
		if len(got) > 63 || strings.HasSuffix(got, "-") {
			t.Errorf("nacUUID(%q, %q) = %q: not a DNS-1123 label", c.namespace, c.name, got)
		}
	}
	if a, b := NewNACUUID("ns", "n"), NewNACUUID("ns", "n"); a == b || !strings.HasPrefix(a, "ns-n-") {
		t.Errorf("NewNACUUID: %q and %q", a, b)
	}
}
