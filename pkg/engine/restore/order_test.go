package restore

import (
	"context"
	"os"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/backstop-io/backstop/pkg/archive"
	"github.com/backstop-io/backstop/pkg/engine/items"
)

func resource(group, name string) items.Resource {
	return items.Resource{GVR: schema.GroupVersionResource{Group: group, Version: "v1", Resource: name}}
}

// TestRestoreOrder: Velero's priorities first (names resolved against the
// target's resources, the core group's first), the rest alphabetically,
// the low priorities last; only what the backup holds.
func TestRestoreOrder(t *testing.T) {
	served := []items.Resource{
		resource("metrics.k8s.io", "pods"), resource("", "pods"), resource("", "services"), resource("", "configmaps"),
		resource("rbac.authorization.k8s.io", "rolebindings"), resource("rbac.authorization.k8s.io", "roles"),
		resource("apps", "deployments"), resource("apps", "replicasets"), resource("batch", "jobs"),
		resource("cluster.x-k8s.io", "clusters"), resource("example.com", "widgets"),
	}
	present := map[string]bool{}
	for _, gr := range []string{"widgets.example.com", "services", "jobs.batch", "clusters.cluster.x-k8s.io", "pods", "deployments.apps",
		"rolebindings.rbac.authorization.k8s.io", "roles.rbac.authorization.k8s.io", "configmaps", "replicasets.apps", "gone.example.org"} {
		present[gr] = true
	}
	want := []string{
		"roles.rbac.authorization.k8s.io", "rolebindings.rbac.authorization.k8s.io", "configmaps", "pods", "replicasets.apps", "services",
		"deployments.apps", "gone.example.org", "jobs.batch", "widgets.example.com",
		"clusters.cluster.x-k8s.io",
	}
	if got := restoreOrder(served, present); !slices.Equal(got, want) {
		t.Errorf("restore order\n got %v\nwant %v", got, want)
	}
}

// TestSpoolReplay: items come back whole, by group resource in the order
// given, in their tarball order within one, and the spool leaves nothing.
func TestSpoolReplay(t *testing.T) {
	dir := t.TempDir()
	s, err := newSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	in := []archive.Item{
		{GroupResource: "services", Namespace: "a", Name: "s1", Version: "v1", Preferred: true, Data: []byte(`{"s":1}`)},
		{GroupResource: "configmaps", Namespace: "a", Name: "c1", Version: "v1", Preferred: true, Data: []byte(`{"c":1}`)},
		{GroupResource: "services", Namespace: "b", Name: "s2", Version: "v1", Preferred: true, Data: []byte(`{"s":2}`)},
	}
	for i := range in {
		if err := s.add(&in[i]); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	if err := s.replay(context.Background(), []string{"configmaps", "services"}, func(it *archive.Item) error {
		got = append(got, it.Namespace+"/"+it.Name+"="+string(it.Data))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{`a/c1={"c":1}`, `a/s1={"s":1}`, `b/s2={"s":2}`}; !slices.Equal(got, want) {
		t.Errorf("replayed %v, want %v", got, want)
	}
	s.close()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the spool left %d entries", len(entries))
	}
}
