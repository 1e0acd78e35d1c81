package vmhost

import (
	"context"
	"errors"
	"slices"
	"testing"
)

func TestAbsent(t *testing.T) {
	for _, c := range []struct {
		name        string
		self        string
		live        []string
		annotation  string
		wantValue   string
		wantChanged bool
		wantNowhere bool
	}{
		{"the only host lacks it: nothing recorded", "a", []string{"a"}, "", "", false, true},
		{"another host may have it", "a", []string{"a", "b"}, "", "a", true, false},
		{"the other host lacks it too", "b", []string{"a", "b"}, "a", "a,b", true, true},
		{"recorded already", "a", []string{"a", "b"}, "a", "a", false, false},
		{"a host that went away still listed", "a", []string{"a", "b"}, "gone,b", "a,b,gone", true, true},
		{"a live host not listed", "a", []string{"a", "b", "c"}, "b", "a,b", true, false},
		{"this host not live yet", "a", []string{"b"}, "b", "a,b", true, true},
		{"a listing written by hand", "c", []string{"a", "b", "c"}, " b, a,a", "a,b,c", true, true},
	} {
		h := &Hosts{Self: c.self, Live: func(context.Context) ([]string, error) { return slices.Clone(c.live), nil }}
		got, err := h.Absent(context.Background(), map[string]string{AbsentAnnotation: c.annotation})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got.Value != c.wantValue || got.Changed != c.wantChanged || got.Nowhere != c.wantNowhere {
			t.Errorf("%s: %+v, want value %q changed %v nowhere %v", c.name, got, c.wantValue, c.wantChanged, c.wantNowhere)
		}
	}

	var single *Hosts
	if got, err := single.Absent(context.Background(), nil); err != nil || !got.Nowhere || got.Changed {
		t.Errorf("a single host: %+v %v, want nowhere without a change", got, err)
	}
	failing := &Hosts{Self: "a", Live: func(context.Context) ([]string, error) { return nil, errors.New("no leases") }}
	if _, err := failing.Absent(context.Background(), nil); err == nil {
		t.Errorf("live hosts unknown: no error")
	}
}

func TestPresent(t *testing.T) {
	h := &Hosts{Self: "b"}
	for _, c := range []struct {
		annotation, wantValue string
		wantChanged           bool
	}{
		{"", "", false},
		{"a", "a", false},
		{"a,b,c", "a,c", true},
		{"b", "", true},
	} {
		value, changed := h.Present(map[string]string{AbsentAnnotation: c.annotation})
		if value != c.wantValue || changed != c.wantChanged {
			t.Errorf("Present(%q) = %q, %v; want %q, %v", c.annotation, value, changed, c.wantValue, c.wantChanged)
		}
	}
	if got := Set(map[string]string{"x": "1", AbsentAnnotation: "a"}, ""); len(got) != 1 || got["x"] != "1" {
		t.Errorf("Set to empty: %v", got)
	}
}
