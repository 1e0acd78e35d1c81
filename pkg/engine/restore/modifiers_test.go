package restore

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	"github.com/backstop-io/backstop/pkg/apis/restoreas"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/enginetest"
	"github.com/backstop-io/backstop/pkg/engine/items"
)

// TestModifiersOf: an admin's restore reads its resource modifiers in its
// own namespace with the server's rights; a restore made for a tenant's
// NonAdminRestore reads them in the tenant's namespace with the tenant's
// rights, and never finds the admin namespace's.
func TestModifiersOf(t *testing.T) {
	const tenantNS = "tenant-a"
	rules := func(ns, value string) *corev1.ConfigMap {
		return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "mods", Namespace: ns},
			Data: map[string]string{"rules.yaml": "version: v1\nresourceModifierRules:\n- conditions: {groupResource: configmaps}\n  mergePatches:\n  - patchData: '{\"data\":{\"by\":\"" + value + "\"}}'\n"}}
	}
	alice := restoreas.User{Username: "alice", Groups: []string{"system:authenticated"}}
	forTenant := func(r *velerov1.Restore) {
		r.Annotations[restoreas.Annotation] = alice.String()
		r.Annotations[oadpv1alpha1.NarOriginNamespaceAnnotation] = tenantNS
	}
	for _, tc := range []struct {
		name string
		// objs are in the cluster; forbidden makes the tenant's reads fail
		// as RBAC would.
		objs      []runtime.Object
		forbidden bool
		restore   func(*velerov1.Restore)
		want      string // the value the rules read set, or the problem
		wantUser  string
	}{
		{name: "an admin's restore: its namespace's, as the server", objs: []runtime.Object{rules(adminNS, "admin"), rules(tenantNS, "tenant")},
			restore: func(*velerov1.Restore) {}, want: "admin"},
		{name: "a tenant's restore: the tenant's namespace's, as the tenant", objs: []runtime.Object{rules(adminNS, "admin"), rules(tenantNS, "tenant")},
			restore: forTenant, want: "tenant", wantUser: "alice"},
		{name: "a tenant's restore never reads the admin namespace's", objs: []runtime.Object{rules(adminNS, "admin")},
			restore: forTenant, want: "failed to get resource modifiers configmap tenant-a/mods: not found", wantUser: "alice"},
		{name: "a tenant's restore where the tenant may not read it", objs: []runtime.Object{rules(tenantNS, "tenant")}, forbidden: true,
			restore: forTenant, want: "failed to get resource modifiers configmap tenant-a/mods: configmaps \"mods\" is forbidden", wantUser: "alice"},
		{name: "a restore as a user for no NonAdminRestore", objs: []runtime.Object{rules(adminNS, "admin")},
			restore: func(r *velerov1.Restore) { r.Annotations[restoreas.Annotation] = alice.String() },
			want:    "acts as user \"alice\" for no NonAdminRestore", wantUser: "alice"},
		{name: "a restore as a user no one can be", objs: []runtime.Object{rules(adminNS, "admin")},
			restore: func(r *velerov1.Restore) {
				r.Annotations[restoreas.Annotation] = `{"username":"eve","groups":["system:masters"]}`
			},
			want: "resourceModifier: annotation backstop.io/restore-as"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := dynamicfake.NewSimpleDynamicClient(kubescheme.Scheme, tc.objs...)
			var asUser string
			w := enginetest.New(t)
			v := w.Factory.Velero().V1()
			c, err := New(Config{Client: w.Client, Restores: v.Restores(), Backups: v.Backups(), Locations: v.BackupStorageLocations(),
				Clock: clocktesting.NewFakeClock(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)), Target: items.Source{Dynamic: server},
				TargetAs: func(as restoreas.User) (dynamic.Interface, error) {
					asUser = as.Username
					impersonated := dynamicfake.NewSimpleDynamicClient(kubescheme.Scheme, tc.objs...)
					if tc.forbidden {
						impersonated.PrependReactor("get", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
							return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "mods", nil)
						})
					}
					return impersonated, nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			r := restoreOf("r", velerov1.RestoreSpec{BackupName: "b", ResourceModifier: &corev1.TypedLocalObjectReference{Kind: "ConfigMap", Name: "mods"}}, "1")
			tc.restore(r)
			mods, problem, err := c.modifiersOf(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			if asUser != tc.wantUser {
				t.Errorf("read as user %q, want %q", asUser, tc.wantUser)
			}
			if mods == nil {
				if !strings.Contains(problem, tc.want) {
					t.Errorf("problem %q, want one saying %q", problem, tc.want)
				}
				return
			}
			item := rules("shop", "nobody")
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(item)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: obj}
			if err := mods.Apply(u, "configmaps", nil); err != nil {
				t.Fatal(err)
			}
			if got := u.Object["data"].(map[string]any)["by"]; got != tc.want {
				t.Errorf("the rules read set %v, want %q's", got, tc.want)
			}
		})
	}
}
