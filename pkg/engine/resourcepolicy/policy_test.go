package resourcepolicy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func csiVolume(size, class, driver string, attributes map[string]string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{
		Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
		StorageClassName: class,
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
			Driver: driver, VolumeHandle: "v", VolumeAttributes: attributes}},
	}}
}

func claim(phase corev1.PersistentVolumeClaimPhase, labels map[string]string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Status: corev1.PersistentVolumeClaimStatus{Phase: phase}}
}

// TestVolumePolicyMatch: the first policy whose conditions all hold gives the action.
func TestVolumePolicyMatch(t *testing.T) {
	policies, err := Parse(`version: v1
volumePolicies:
- conditions: {storageClass: [cheap]}
  action: {type: skip}
- conditions: {capacity: "0,1Gi", csi: {driver: hostpath.csi.k8s.io}}
  action: {type: snapshot}
- conditions: {capacity: "10Gi,"}
  action: {type: fs-backup}
- conditions: {pvcLabels: {app: db}, pvcPhase: [Bound]}
  action: {type: snapshot, parameters: {why: db}}
- conditions: {csi: {driver: other.csi, volumeAttributes: {tier: gold}}}
  action: {type: skip}
- conditions: {volumeTypes: [nfs], nfs: {server: nas}}
  action: {type: skip}
- conditions: {pvcPhase: [Pending]}
  action: {type: skip}
`)
	if err != nil {
		t.Fatal(err)
	}
	nfs := &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
		NFS: &corev1.NFSVolumeSource{Server: "nas", Path: "/x"}}}}
	for _, tc := range []struct {
		name string
		v    Volume
		want ActionType
	}{
		{"by storage class", Volume{PV: csiVolume("5Gi", "cheap", "hostpath.csi.k8s.io", nil), PVC: claim(corev1.ClaimBound, nil)}, Skip},
		{"small volume of the driver", Volume{PV: csiVolume("512Mi", "fast", "hostpath.csi.k8s.io", nil), PVC: claim(corev1.ClaimBound, nil)}, Snapshot},
		{"the capacity bound is inclusive", Volume{PV: csiVolume("1Gi", "fast", "hostpath.csi.k8s.io", nil), PVC: claim(corev1.ClaimBound, nil)}, Snapshot},
		{"large volume", Volume{PV: csiVolume("20Gi", "fast", "hostpath.csi.k8s.io", nil), PVC: claim(corev1.ClaimBound, nil)}, FSBackup},
		{"by claim labels and phase", Volume{PV: csiVolume("5Gi", "fast", "hostpath.csi.k8s.io", nil), PVC: claim(corev1.ClaimBound, map[string]string{"app": "db"})}, Snapshot},
		{"by driver and attributes", Volume{PV: csiVolume("5Gi", "fast", "other.csi", map[string]string{"tier": "gold", "x": "y"}), PVC: claim(corev1.ClaimBound, nil)}, Skip},
		{"attributes that differ", Volume{PV: csiVolume("5Gi", "fast", "other.csi", map[string]string{"tier": "silver"}), PVC: claim(corev1.ClaimBound, nil)}, ""},
		{"by volume type and NFS server", Volume{PV: nfs, PVC: claim(corev1.ClaimBound, nil)}, Skip},
		{"an unbound claim: only its own conditions", Volume{PVC: claim(corev1.ClaimPending, map[string]string{"app": "db"})}, Skip},
		{"no policy holds", Volume{PV: csiVolume("5Gi", "fast", "hostpath.csi.k8s.io", nil), PVC: claim(corev1.ClaimBound, nil)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := policies.Match(tc.v)
			if tc.want == "" {
				if got != nil {
					t.Errorf("matched %v, want none", got)
				}
				return
			}
			if got == nil || got.Type != tc.want {
				t.Errorf("matched %v, want %s", got, tc.want)
			}
		})
	}
}

// TestVolumePolicyParseRefuses: what Velero refuses, with its words.
func TestVolumePolicyParseRefuses(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"another version", "version: v2\nvolumePolicies: []", "incompatible version number v2 with supported version v1"},
		{"an unknown action", "version: v1\nvolumePolicies: [{action: {type: archive}}]", "invalid action type archive"},
		{"an unknown field", "version: v1\nvolumePolicy: []", "failed to decode yaml data into resource policies"},
		{"an unknown condition", "version: v1\nvolumePolicies: [{conditions: {color: red}, action: {type: skip}}]", "failed to decode volume conditions"},
		{"labels not a map", "version: v1\nvolumePolicies: [{conditions: {pvcLabels: [a]}, action: {type: skip}}]", "failed to decode volume conditions"},
		{"a capacity without a comma", "version: v1\nvolumePolicies: [{conditions: {capacity: 10Gi}, action: {type: skip}}]", "wrong format of Capacity 10Gi"},
		{"a capacity that is no quantity", "version: v1\nvolumePolicies: [{conditions: {capacity: 'ten,'}, action: {type: skip}}]", "wrong format of Capacity ten,"},
		{"a capacity range upside down", "version: v1\nvolumePolicies: [{conditions: {capacity: '10Gi,1Gi'}, action: {type: skip}}]", "illegal values for capacity 10Gi,1Gi"},
		{"attributes without a driver", "version: v1\nvolumePolicies: [{conditions: {csi: {volumeAttributes: {a: b}}}, action: {type: skip}}]", "csi driver should not be empty"},
		{"an unknown claim phase", "version: v1\nvolumePolicies: [{conditions: {pvcPhase: [Gone]}, action: {type: skip}}]", `pvcPhase "Gone"`},
		{"include-exclude policies", "version: v1\nincludeExcludePolicy: {excludedClusterScopedResources: [x]}", "includeExcludePolicy is not supported"},
		{"not YAML", "version: [", "failed to decode yaml data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.doc)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
	if _, err := FromConfigMap(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Data: map[string]string{"a": "version: v1", "b": "version: v1"}}); err == nil ||
		!strings.Contains(err.Error(), "illegal resource policies ns/p configmap") {
		t.Errorf("two data keys: %v", err)
	}
}
