// Package vmhost says which replica's VM engines look after a VM when the
// replicas run on several libvirt hosts. libvirt is local: a VM is on the
// host whose libvirt has its domain, and only that host's VM engines back
// it up or track its changed blocks. A host that lacks a VM's domain
// records it in the object's AbsentAnnotation and leaves the object to the
// others; once every live host (one whose VM engines' Lease is held) is
// listed there, the VM is on none, and the engine that sees it says so
// (a backup fails, a tracker shows the domain gone). A host that has the
// domain takes itself off the list before it acts.
package vmhost

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// AbsentAnnotation lists the hosts (comma-separated, sorted) whose libvirt
// has no domain for the object's VM.
const AbsentAnnotation = "backup.backstop.io/absent-on-hosts"

// Hosts is this replica's host among the live ones. A nil *Hosts is a
// single host: a VM it lacks is on none.
type Hosts struct {
	// Self is this host's name.
	Self string
	// Live lists the hosts whose VM engines run now, this one included.
	Live func(ctx context.Context) ([]string, error)
}

// Absence is what a host that lacks a VM's domain concludes.
type Absence struct {
	// Value is the annotation's value with this host in it; Changed
	// says whether it differs from the object's.
	Value   string
	Changed bool
	// Nowhere: every live host lacks the domain.
	Nowhere bool
	// Live are the live hosts.
	Live []string
}

// Absent records that this host lacks the VM of an object with these
// annotations. The only live host records nothing: the VM is on none.
func (h *Hosts) Absent(ctx context.Context, annotations map[string]string) (Absence, error) {
	if h == nil {
		return Absence{Nowhere: true}, nil
	}
	live, err := h.Live(ctx)
	if err != nil {
		return Absence{}, fmt.Errorf("listing the live VM hosts: %w", err)
	}
	if !slices.Contains(live, h.Self) {
		live = append(live, h.Self)
	}
	slices.Sort(live)
	if len(live) == 1 {
		return Absence{Value: annotations[AbsentAnnotation], Nowhere: true, Live: live}, nil
	}
	listed := parse(annotations[AbsentAnnotation])
	if !slices.Contains(listed, h.Self) {
		listed = append(listed, h.Self)
		slices.Sort(listed)
	}
	out := Absence{Value: strings.Join(listed, ","), Live: live, Nowhere: true}
	out.Changed = out.Value != annotations[AbsentAnnotation]
	for _, l := range live {
		if !slices.Contains(listed, l) {
			out.Nowhere = false
		}
	}
	return out, nil
}

// Present returns the annotation's value without this host, and whether
// it listed this host (the object must then be written before the host
// acts on it, so that no other host concludes the VM is nowhere).
func (h *Hosts) Present(annotations map[string]string) (value string, changed bool) {
	if h == nil {
		return annotations[AbsentAnnotation], false
	}
	listed := parse(annotations[AbsentAnnotation])
	i := slices.Index(listed, h.Self)
	if i < 0 {
		return annotations[AbsentAnnotation], false
	}
	return strings.Join(slices.Delete(listed, i, i+1), ","), true
}

// Alone reports whether this is the only live host (nil: always).
func (h *Hosts) Alone(ctx context.Context) bool {
	if h == nil {
		return true
	}
	live, err := h.Live(ctx)
	if err != nil {
		return false
	}
	for _, l := range live {
		if l != h.Self {
			return false
		}
	}
	return true
}

// Set returns annotations with the annotation set to value (removed when
// empty), a new map: the object's own is the informer's.
func Set(annotations map[string]string, value string) map[string]string {
	out := make(map[string]string, len(annotations)+1)
	for k, v := range annotations {
		out[k] = v
	}
	if value == "" {
		delete(out, AbsentAnnotation)
	} else {
		out[AbsentAnnotation] = value
	}
	return out
}

func parse(value string) []string {
	var out []string
	for _, h := range strings.Split(value, ",") {
		if h = strings.TrimSpace(h); h != "" && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}
