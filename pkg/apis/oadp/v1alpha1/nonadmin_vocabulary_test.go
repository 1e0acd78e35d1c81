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

func TestTenantSyncable(t *testing.T) {
	made := NewNACUUID("tenant-a", "nightly")
	long := NewNACUUID(strings.Repeat("n", 40), strings.Repeat("x", 40))
	for _, tc := range []struct {
		name string
		want bool
	}{
		{made, true},
		{long, true},
		{made + "-20261124080000", true},
		{long + "-20261124080000", true},
		{"nightly", false},
		{"nightly-20261124080000", false},
		{"full", false},
		{made + "-2026112408000", false},  // not a timestamp
		{made + "-x", false},              // no UUID at the end
		{strings.ToUpper(made), false},    // a UUID in upper case is not one the server writes
		{"a" + made[len(made)-37:], true}, // the shortest: one character and the UUID
		{made[len(made)-36:], false},      // a bare UUID: no namespace
		{strings.Repeat("a", 20) + made[len(made)-37:], true},
		{strings.Repeat("a", 30) + made, false}, // longer than a NACUUID
	} {
		if got := TenantSyncable(tc.name); got != tc.want {
			t.Errorf("TenantSyncable(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
