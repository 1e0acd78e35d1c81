package restore

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/items"
)

// TestDryRunTarget: every write through a preview's target, namespaced or
// not, carries dryRun=All; reads go through as they are.
func TestDryRunTarget(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	obj := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
		u.SetName("c")
		u.SetNamespace("ns")
		return u
	}
	fake := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ConfigMapList"}, obj())
	run := &restoreRun{preview: &preview{}}
	target := run.writes(fake)
	ctx := context.Background()
	for _, ri := range []interface {
		Create(context.Context, *unstructured.Unstructured, metav1.CreateOptions, ...string) (*unstructured.Unstructured, error)
		Update(context.Context, *unstructured.Unstructured, metav1.UpdateOptions, ...string) (*unstructured.Unstructured, error)
		UpdateStatus(context.Context, *unstructured.Unstructured, metav1.UpdateOptions) (*unstructured.Unstructured, error)
		Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*unstructured.Unstructured, error)
		Delete(context.Context, string, metav1.DeleteOptions, ...string) error
		DeleteCollection(context.Context, metav1.DeleteOptions, metav1.ListOptions) error
		Get(context.Context, string, metav1.GetOptions, ...string) (*unstructured.Unstructured, error)
	}{target.Resource(gvr).Namespace("ns"), target.Resource(gvr)} {
		fake.ClearActions()
		_, _ = ri.Create(ctx, obj(), metav1.CreateOptions{})
		_, _ = ri.Update(ctx, obj(), metav1.UpdateOptions{})
		_, _ = ri.UpdateStatus(ctx, obj(), metav1.UpdateOptions{})
		_, _ = ri.Patch(ctx, "c", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
		_ = ri.Delete(ctx, "c", metav1.DeleteOptions{})
		_ = ri.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_, _ = ri.Get(ctx, "c", metav1.GetOptions{})
		writes := 0
		for _, a := range fake.Actions() {
			var dryRun []string
			switch a := a.(type) {
			case clienttesting.CreateActionImpl:
				dryRun = a.CreateOptions.DryRun
			case clienttesting.UpdateActionImpl:
				dryRun = a.UpdateOptions.DryRun
			case clienttesting.PatchActionImpl:
				dryRun = a.PatchOptions.DryRun
			case clienttesting.DeleteActionImpl:
				dryRun = a.DeleteOptions.DryRun
			case clienttesting.DeleteCollectionActionImpl:
				dryRun = a.DeleteOptions.DryRun
			default:
				if a.GetVerb() != "get" {
					t.Errorf("%s: not checked", a.GetVerb())
				}
				continue
			}
			writes++
			if len(dryRun) != 1 || dryRun[0] != metav1.DryRunAll {
				t.Errorf("%s %s: dryRun %v", a.GetVerb(), a.GetSubresource(), dryRun)
			}
		}
		if writes != 6 {
			t.Errorf("%d writes seen, want 6: %v", writes, fake.Actions())
		}
	}
	if real := (&restoreRun{}).writes(fake); real != fake {
		t.Errorf("a restore's own target is wrapped: %T", real)
	}
}

// TestPreviewRecord: the items listed are bounded, the summary counts
// them all, and objects stop being shown past their bound.
func TestPreviewRecord(t *testing.T) {
	p := &preview{}
	big := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"data": map[string]any{"v": strings.Repeat("x", 300<<10)}}}
	for range velerov1.MaxPreviewItems + 5 {
		p.record("configmaps", "ns", "c", velerov1.PreviewCreate, "", big)
	}
	p.record("secrets", "ns", "s", velerov1.PreviewRefuse, "no", nil)
	log, err := items.NewLog(t.TempDir(), clock.RealClock{}, klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	r := p.result(log)
	if len(r.Items) != velerov1.MaxPreviewItems || !r.Truncated {
		t.Errorf("%d items listed, truncated %v", len(r.Items), r.Truncated)
	}
	shown := 0
	for _, it := range r.Items {
		if it.Object != nil {
			shown++
		}
	}
	if shown != 3 {
		t.Errorf("%d objects shown, want 3 (of about 300 KiB, within %d bytes)", shown, velerov1.MaxPreviewObjectBytes)
	}
	want := []velerov1.RestorePreviewCount{{Resource: "configmaps", Namespace: "ns", Create: velerov1.MaxPreviewItems + 5}, {Resource: "secrets", Namespace: "ns", Refuse: 1}}
	if len(r.Summary) != 2 || r.Summary[0] != want[0] || r.Summary[1] != want[1] {
		t.Errorf("summary %+v", r.Summary)
	}
}
