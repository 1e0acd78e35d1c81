package backup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/items"
)

// discoverer is an ItemDiscoverer over a fixed list of VMs that records
// the items it was asked to start operations for.
type discoverer struct {
	vms     []*unstructured.Unstructured
	started []string
	err     error
}

var vmResource = items.Resource{
	GVR:  schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"},
	Kind: "VirtualMachine", Singular: "virtualmachine", ShortNames: []string{"vm"}, Namespaced: true,
}

func (d *discoverer) Name() string                       { return "test/vms" }
func (d *discoverer) AppliesTo(gr string) bool           { return gr == vmResource.GroupResource() }
func (d *discoverer) DiscoveredResource() items.Resource { return vmResource }
func (d *discoverer) Progress(context.Context, *velerov1.Backup, string) (OperationProgress, error) {
	return OperationProgress{}, nil
}
func (d *discoverer) Cancel(context.Context, *velerov1.Backup, string) error { return nil }
func (d *discoverer) Start(_ context.Context, _ *velerov1.Backup, item *unstructured.Unstructured) (Started, error) {
	id := item.GetNamespace() + "/" + item.GetName()
	d.started = append(d.started, id)
	return Started{OperationID: id}, nil
}
func (d *discoverer) Discover(_ context.Context, _ *velerov1.Backup, includesNamespace func(string) bool) ([]*unstructured.Unstructured, error) {
	if d.err != nil {
		return nil, d.err
	}
	var out []*unstructured.Unstructured
	for _, vm := range d.vms {
		if includesNamespace(vm.GetNamespace()) {
			out = append(out, vm)
		}
	}
	return out, nil
}

func vm(ns, name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("kubevirt.io/v1")
	u.SetKind("VirtualMachine")
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(labels)
	return u
}

// TestDiscoveredItems: discovered items go through the backup's filters
// (namespaces, resources, label selectors, the exclude label) and get one
// operation each, none for an item whose operation already started.
func TestDiscoveredItems(t *testing.T) {
	vms := []*unstructured.Unstructured{
		vm("a", "vm1", nil), vm("a", "vm2", map[string]string{"tier": "db"}), vm("b", "vm3", nil),
		vm("a", "skip", map[string]string{items.ExcludeLabel: "true"}),
	}
	for _, tc := range []struct {
		name       string
		spec       velerov1.BackupSpec
		apiStarted []string // operations started for API items first
		err        error    // the discoverer's
		// missing are namespaces the source cluster does not have; served
		// the VMs it has when it serves VirtualMachines itself (nil: it
		// does not).
		missing, served []string
		noNamespaces    bool // the source serves no Namespaces (standalone)
		want            []string
		warnings        int
	}{
		{name: "every namespace", want: []string{"a/vm1", "a/vm2", "b/vm3"}},
		{name: "one namespace", spec: velerov1.BackupSpec{IncludedNamespaces: []string{"a"}}, want: []string{"a/vm1", "a/vm2"}},
		{name: "excluded namespace", spec: velerov1.BackupSpec{ExcludedNamespaces: []string{"a"}}, want: []string{"b/vm3"}},
		{name: "resource excluded by plural", spec: velerov1.BackupSpec{ExcludedResources: []string{"virtualmachines"}}},
		{name: "resource excluded by short name", spec: velerov1.BackupSpec{ExcludedResources: []string{"vm"}}},
		{name: "other resources only", spec: velerov1.BackupSpec{IncludedResources: []string{"configmaps"}}},
		{name: "namespaced resources excluded", spec: velerov1.BackupSpec{ExcludedNamespaceScopedResources: []string{"virtualmachines.kubevirt.io"}}},
		{name: "label selector", spec: velerov1.BackupSpec{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "db"}}}, want: []string{"a/vm2"}},
		{name: "already started from the API", apiStarted: []string{"a/vm1"}, want: []string{"a/vm1", "a/vm2", "b/vm3"}},
		{name: "a namespace the source does not have: its domains are not its VMs", missing: []string{"b"}, want: []string{"a/vm1", "a/vm2"}},
		{name: "the source serves VirtualMachines: only those it has", served: []string{"a/vm2", "b/vm3"}, want: []string{"a/vm2", "b/vm3"}},
		{name: "a source serving no Namespaces has every namespace", missing: []string{"b"}, noNamespaces: true, want: []string{"a/vm1", "a/vm2", "b/vm3"}},
		{name: "no source on this host: no warning", err: fmt.Errorf("%w: no daemon", ErrNoSource)},
		{name: "the source fails: a warning", err: errors.New("listing domains: broken"), warnings: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &discoverer{vms: vms, err: tc.err}
			b := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "b", UID: "u"}, Spec: tc.spec}
			log, err := items.NewLog(t.TempDir(), clocktesting.NewFakeClock(metav1.Now().Time), klog.Background(), "backup", "b")
			if err != nil {
				t.Fatal(err)
			}
			defer log.Close()
			resources := []items.Resource{{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}}
			filter, err := items.NewFilter(&b.Spec, withDiscovered(resources, []ItemAction{d}))
			if err != nil {
				t.Fatal(err)
			}
			ops := newOperations([]ItemAction{d}, b, log, clocktesting.NewFakeClock(metav1.Now().Time))
			for _, id := range tc.apiStarted {
				for _, v := range vms {
					if v.GetNamespace()+"/"+v.GetName() == id {
						ops.start(context.Background(), vmResource, v)
					}
				}
			}
			has := func(_ context.Context, gvr schema.GroupVersionResource, ns, name string) (bool, error) {
				if gvr.Resource == "namespaces" {
					return !slices.Contains(tc.missing, name), nil
				}
				return slices.Contains(tc.served, ns+"/"+name), nil
			}
			served := func(r items.Resource) bool {
				return r.GroupResource() == "namespaces" && !tc.noNamespaces || tc.served != nil && r.GroupResource() == vmResource.GroupResource()
			}
			ops.discover(context.Background(), filter, has, served)
			if !slices.Equal(d.started, tc.want) {
				t.Errorf("operations started for %v, want %v", d.started, tc.want)
			}
			if len(ops.list) != len(tc.want) {
				t.Errorf("%d operations recorded, want %d", len(ops.list), len(tc.want))
			}
			if _, warnings := log.Counts(); warnings != tc.warnings {
				t.Errorf("%d warnings, want %d", warnings, tc.warnings)
			}
		})
	}
}
