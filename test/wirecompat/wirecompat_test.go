// Package wirecompat checks that Backstop's served types are JSON
// supersets of the upstream ones: an object of the upstream Go type, filled
// with random values, encodes to JSON that decodes into Backstop's type and
// encodes back to the same JSON. A field missing (or renamed, or typed
// differently) on Backstop's side would be lost or changed on the way.
//
// Upstream: Velero v1.18.0 pkg/apis/velero/v1 and KubeVirt kubevirt.io/api
// v1.9.0 backup/v1alpha1, taken from the Go module proxy as test-only
// dependencies. The OADP non-admin API (github.com/migtools/oadp-non-admin)
// is not on the module proxy, so its types cannot be round-tripped; they are
// copied field for field from api/v1alpha1 (see pkg/apis/oadp/v1alpha1), and
// oadp_test.go checks their JSON names, enums, labels and finalizers against
// upstream's as recorded.
package wirecompat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"

	upstreamvelero "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	upstreamvelerov2alpha1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v2alpha1"
	upstreamkubevirt "kubevirt.io/api/backup/v1alpha1"

	kvbackupv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
)

// filler fills objects with random values JSON can carry exactly.
func filler(seed int64) *randfill.Filler {
	return randfill.NewWithSeed(seed).NilChance(0.2).NumElements(1, 2).MaxDepth(8).Funcs(
		func(t *metav1.Time, c randfill.Continue) {
			*t = metav1.Unix(c.Int63n(4e9), 0).Rfc3339Copy()
		},
		func(d *metav1.Duration, c randfill.Continue) {
			d.Duration = time.Duration(c.Int63n(1e6)) * time.Second
		},
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewQuantity(c.Int63n(1000), resource.DecimalSI)
		},
		func(e *runtime.RawExtension, c randfill.Continue) {
			e.Raw = []byte(fmt.Sprintf(`{"n":%d}`, c.Intn(100)))
		},
		func(i *intstr.IntOrString, c randfill.Continue) {
			*i = intstr.FromInt32(c.Int31n(100))
		},
		func(m *metav1.ObjectMeta, c randfill.Continue) {
			m.Name = fmt.Sprintf("n%d", c.Intn(1000))
			m.Namespace = "ns"
			m.Labels = map[string]string{"k": c.String(5)}
			m.Annotations = map[string]string{"a": c.String(5)}
		},
		func(m *metav1.TypeMeta, c randfill.Continue) {},
		// A pointer to a nil map encodes as null, which decodes as no
		// pointer: upstream's own type does not keep it either.
		func(m **map[string]string, c randfill.Continue) {
			if c.Intn(5) == 0 {
				*m = nil
				return
			}
			*m = &map[string]string{"k": c.String(5)}
		},
		func(f *metav1.FieldsV1, c randfill.Continue) { f.Raw = []byte(`{}`) },
	)
}

// roundTrip fills an upstream object and checks that Backstop's type
// carries all of its JSON.
func roundTrip(t *testing.T, upstream, ours any) {
	t.Helper()
	for seed := int64(0); seed < 50; seed++ {
		u := reflect.New(reflect.TypeOf(upstream).Elem()).Interface()
		filler(seed).Fill(u)
		in, err := json.Marshal(u)
		if err != nil {
			t.Fatalf("seed %d: encoding the upstream %T: %v", seed, u, err)
		}
		o := reflect.New(reflect.TypeOf(ours).Elem()).Interface()
		dec := json.NewDecoder(bytes.NewReader(in))
		dec.DisallowUnknownFields()
		if err := dec.Decode(o); err != nil {
			t.Fatalf("seed %d: upstream %T JSON does not decode into %T: %v\n%s", seed, u, o, err, in)
		}
		out, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		_ = json.Unmarshal(in, &a)
		_ = json.Unmarshal(out, &b)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d: %T changed the JSON of upstream %T:\nupstream: %s\nbackstop: %s", seed, o, u, in, out)
		}
	}
}

func TestVeleroV1IsASuperset(t *testing.T) {
	cases := []struct{ upstream, ours any }{
		{&upstreamvelero.Backup{}, &velerov1.Backup{}},
		{&upstreamvelero.Restore{}, &velerov1.Restore{}},
		{&upstreamvelero.Schedule{}, &velerov1.Schedule{}},
		{&upstreamvelero.BackupStorageLocation{}, &velerov1.BackupStorageLocation{}},
		{&upstreamvelero.VolumeSnapshotLocation{}, &velerov1.VolumeSnapshotLocation{}},
		{&upstreamvelero.DeleteBackupRequest{}, &velerov1.DeleteBackupRequest{}},
		{&upstreamvelero.DownloadRequest{}, &velerov1.DownloadRequest{}},
		{&upstreamvelero.ServerStatusRequest{}, &velerov1.ServerStatusRequest{}},
		{&upstreamvelero.PodVolumeBackup{}, &velerov1.PodVolumeBackup{}},
		{&upstreamvelero.PodVolumeRestore{}, &velerov1.PodVolumeRestore{}},
		{&upstreamvelero.BackupRepository{}, &velerov1.BackupRepository{}},
	}
	for _, c := range cases {
		t.Run(reflect.TypeOf(c.ours).Elem().Name(), func(t *testing.T) { roundTrip(t, c.upstream, c.ours) })
	}
}

func TestVeleroV2alpha1IsASuperset(t *testing.T) {
	cases := []struct{ upstream, ours any }{
		{&upstreamvelerov2alpha1.DataUpload{}, &velerov2alpha1.DataUpload{}},
		{&upstreamvelerov2alpha1.DataDownload{}, &velerov2alpha1.DataDownload{}},
		{&upstreamvelerov2alpha1.DataUploadResult{}, &velerov2alpha1.DataUploadResult{}},
	}
	for _, c := range cases {
		t.Run(reflect.TypeOf(c.ours).Elem().Name(), func(t *testing.T) { roundTrip(t, c.upstream, c.ours) })
	}
}

func TestKubeVirtBackupV1alpha1IsASuperset(t *testing.T) {
	cases := []struct{ upstream, ours any }{
		{&upstreamkubevirt.VirtualMachineBackup{}, &kvbackupv1alpha1.VirtualMachineBackup{}},
		{&upstreamkubevirt.VirtualMachineBackupTracker{}, &kvbackupv1alpha1.VirtualMachineBackupTracker{}},
	}
	for _, c := range cases {
		t.Run(reflect.TypeOf(c.ours).Elem().Name(), func(t *testing.T) { roundTrip(t, c.upstream, c.ours) })
	}
}
