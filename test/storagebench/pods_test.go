//go:build bench

package storagebench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/apis/example"
)

// newPod is pod i: about 1.9 KiB once encoded (see TestPodSize), with the
// labels, annotations, owner reference and status conditions a Deployment's
// pod carries.
func newPod(i int) *example.Pod {
	namespace, name, _ := podKey(i)
	app := fmt.Sprintf("app-%03d", i%100)
	hash := fmt.Sprintf("%010x", uint64(i)*2654435761%(1<<40))
	created := metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second))
	grace := int64(30)
	trueVal := true
	conditions := make([]example.PodCondition, 0, 4)
	for _, t := range []string{"PodScheduled", "Initialized", "ContainersReady", "Ready"} {
		conditions = append(conditions, example.PodCondition{
			Type:               example.PodConditionType(t),
			Status:             example.ConditionStatus("True"),
			LastTransitionTime: created,
		})
	}
	return &example.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:         name,
			Namespace:    namespace,
			GenerateName: app + "-" + hash[:8] + "-",
			UID:          types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)),
			Labels: map[string]string{
				"app":                          app,
				"app.kubernetes.io/name":       app,
				"app.kubernetes.io/instance":   app + "-prod",
				"app.kubernetes.io/component":  "backend",
				"app.kubernetes.io/part-of":    "storefront",
				"app.kubernetes.io/managed-by": "helm",
				"app.kubernetes.io/version":    "1.27.3",
				"pod-template-hash":            hash[:8],
				"team":                         fmt.Sprintf("team-%d", i%7),
				"tier":                         "web",
			},
			Annotations: map[string]string{
				"kubectl.kubernetes.io/restartedAt":     "2025-01-01T00:00:00Z",
				"prometheus.io/scrape":                  "true",
				"prometheus.io/port":                    "9090",
				"prometheus.io/path":                    "/metrics",
				"cluster-autoscaler.kubernetes.io/safe": "true",
				"checksum/config":                       strings.Repeat(hash[:8], 8),
				"example.com/owner":                     "platform team, paged on SLO breach",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         "apps/v1",
				Kind:               "ReplicaSet",
				Name:               app + "-" + hash[:8],
				UID:                types.UID(fmt.Sprintf("%08x-1111-4000-8000-%012x", i%100, i%100)),
				Controller:         &trueVal,
				BlockOwnerDeletion: &trueVal,
			}},
			Finalizers: []string{"example.com/cleanup"},
		},
		Spec: example.PodSpec{
			RestartPolicy:                 example.RestartPolicy("Always"),
			TerminationGracePeriodSeconds: &grace,
			NodeSelector: map[string]string{
				"kubernetes.io/os":                 "linux",
				"node.kubernetes.io/instance-type": "m5.xlarge",
			},
			ServiceAccountName: app,
			NodeName:           fmt.Sprintf("node-%04d.eu-west-1.compute.internal", i%500),
			Hostname:           name,
			Subdomain:          app,
			SchedulerName:      "default-scheduler",
		},
		Status: example.PodStatus{
			Phase:      example.PodPhase("Running"),
			Conditions: conditions,
			HostIP:     fmt.Sprintf("10.0.%d.%d", i/250%250, i%250+1),
			PodIP:      fmt.Sprintf("10.244.%d.%d", i/250%250, i%250+1),
			StartTime:  &created,
		},
	}
}

// TestPodSize checks that the benchmark's pods are the size of real ones
// once encoded by the storage codecs.
func TestPodSize(t *testing.T) {
	for _, format := range []string{"protobuf", "json"} {
		codec := newCodec(t, format)
		for _, i := range []int{0, 1234, 99999} {
			data, err := runtime.Encode(codec, newPod(i))
			if err != nil {
				t.Fatalf("encoding pod %d as %s: %v", i, format, err)
			}
			t.Logf("pod %d as %s: %d bytes", i, format, len(data))
			decoded, err := runtime.Decode(codec, data)
			if err != nil {
				t.Fatalf("decoding pod %d from %s: %v", i, format, err)
			}
			if pod, ok := decoded.(*example.Pod); !ok || pod.Name != newPod(i).Name {
				t.Fatalf("decoding pod %d from %s: got %#v", i, format, decoded)
			}
			if len(data) < 1024 || len(data) > 2048 {
				t.Errorf("pod %d encodes to %d bytes of %s, want 1-2 KiB", i, len(data), format)
			}
		}
	}
}
