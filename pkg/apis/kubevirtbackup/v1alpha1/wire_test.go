/*
Copyright 2026 the Backstop authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package v1alpha1

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The first two documents are the examples of the design seed (KubeVirt VEP
// "Storage agnostic incremental backup using qemu", sections
// "VirtualMachineBackupTracker CR" and "VirtualMachineBackup CRD"), copied
// verbatim. The third is an object as upstream KubeVirt (kubevirt.io/api
// v1.9.0) writes it. All three must decode strictly (no unknown field) and
// land in the fields below. Decoding does not normalize: moving
// backupTracker into source, canonical mode and type case and filling both
// type/backupType and volumes/disks is done by the registry strategies (see
// pkg/apis/kubevirtbackup/validation).

const seedTrackerYAML = `
apiVersion: backup.kubevirt.io/v1alpha1
kind: VirtualMachineBackupTracker
metadata:
    name: my-backup-tracker
    namespace: ns1
spec:
    source:
        apiGroup: kubevirt.io
        kind: VirtualMachine
        name: my-vm
status:
    latestCheckpoint:
      name: my-backup-tracker-2025-03-03T16:13:28Z
      creationTime: "2025-03-03T16:13:28Z"
      disks:
        - my-volume
`

const seedBackupYAML = `
apiVersion: backup.kubevirt.io/v1alpha1
kind: VirtualMachineBackup
metadata:
    name: backup1
    namespace: ns1
spec:
    backupTracker: my-backup-tracker
    mode: push
    pvcName: backup-output-pvc
status:
    checkpointName: my-backup-tracker-2025-03-03T16:13:28Z
    backupType: full
`

const upstreamBackupJSON = `{
  "apiVersion": "backup.kubevirt.io/v1alpha1",
  "kind": "VirtualMachineBackup",
  "metadata": {"name": "backup2", "namespace": "ns1"},
  "spec": {
    "source": {"apiGroup": "backup.kubevirt.io", "kind": "VirtualMachineBackupTracker", "name": "my-backup-tracker"},
    "mode": "Push",
    "pvcName": "backup-output-pvc",
    "forceFullBackup": true
  },
  "status": {
    "type": "Full",
    "checkpointName": "my-backup-tracker-2025-03-04T10:00:00Z",
    "includedVolumes": [{"volumeName": "rootdisk", "diskTarget": "vda"}]
  }
}`

func strPtr(s string) *string { return &s }

func TestDecodeWireSpellings(t *testing.T) {
	checkpointTime := time.Date(2025, 3, 3, 16, 13, 28, 0, time.UTC)

	for _, c := range []struct {
		name  string
		doc   string
		into  func() any
		check func(t *testing.T, obj any)
	}{{
		name: "seed VirtualMachineBackupTracker",
		doc:  seedTrackerYAML,
		into: func() any { return &VirtualMachineBackupTracker{} },
		check: func(t *testing.T, obj any) {
			tr := obj.(*VirtualMachineBackupTracker)
			if tr.Kind != "VirtualMachineBackupTracker" || tr.APIVersion != SchemeGroupVersion.String() {
				t.Errorf("type meta: %+v", tr.TypeMeta)
			}
			if tr.Name != "my-backup-tracker" || tr.Namespace != "ns1" {
				t.Errorf("metadata: %s/%s", tr.Namespace, tr.Name)
			}
			want := corev1.TypedLocalObjectReference{APIGroup: strPtr("kubevirt.io"), Kind: "VirtualMachine", Name: "my-vm"}
			if !reflect.DeepEqual(tr.Spec.Source, want) {
				t.Errorf("spec.source = %+v, want %+v", tr.Spec.Source, want)
			}
			if tr.Status == nil || tr.Status.LatestCheckpoint == nil {
				t.Fatalf("status.latestCheckpoint missing: %+v", tr.Status)
			}
			cp := tr.Status.LatestCheckpoint
			if cp.Name != "my-backup-tracker-2025-03-03T16:13:28Z" {
				t.Errorf("latestCheckpoint.name = %q", cp.Name)
			}
			if cp.CreationTime == nil || !cp.CreationTime.Time.Equal(checkpointTime) {
				t.Errorf("latestCheckpoint.creationTime = %v, want %v", cp.CreationTime, checkpointTime)
			}
			if !reflect.DeepEqual(cp.Disks, []string{"my-volume"}) {
				t.Errorf("latestCheckpoint.disks = %v", cp.Disks)
			}
			if cp.Volumes != nil {
				t.Errorf("latestCheckpoint.volumes = %v, want none before normalization", cp.Volumes)
			}
		},
	}, {
		name: "seed VirtualMachineBackup",
		doc:  seedBackupYAML,
		into: func() any { return &VirtualMachineBackup{} },
		check: func(t *testing.T, obj any) {
			b := obj.(*VirtualMachineBackup)
			if b.Kind != "VirtualMachineBackup" || b.Name != "backup1" || b.Namespace != "ns1" {
				t.Errorf("object: %+v %s/%s", b.TypeMeta, b.Namespace, b.Name)
			}
			if b.Spec.BackupTracker == nil || *b.Spec.BackupTracker != "my-backup-tracker" {
				t.Errorf("spec.backupTracker = %v", b.Spec.BackupTracker)
			}
			if !reflect.DeepEqual(b.Spec.Source, corev1.TypedLocalObjectReference{}) {
				t.Errorf("spec.source = %+v, want empty before normalization", b.Spec.Source)
			}
			if b.Spec.Mode == nil || *b.Spec.Mode != BackupMode("push") {
				t.Errorf("spec.mode = %v, want the seed's lower-case push as written", b.Spec.Mode)
			}
			if b.Spec.PvcName == nil || *b.Spec.PvcName != "backup-output-pvc" {
				t.Errorf("spec.pvcName = %v", b.Spec.PvcName)
			}
			if b.Status == nil {
				t.Fatal("status missing")
			}
			if b.Status.CheckpointName == nil || *b.Status.CheckpointName != "my-backup-tracker-2025-03-03T16:13:28Z" {
				t.Errorf("status.checkpointName = %v", b.Status.CheckpointName)
			}
			if b.Status.BackupType != BackupType("full") || b.Status.Type != "" {
				t.Errorf("status.backupType = %q, status.type = %q; want %q, empty", b.Status.BackupType, b.Status.Type, "full")
			}
		},
	}, {
		name: "upstream VirtualMachineBackup",
		doc:  upstreamBackupJSON,
		into: func() any { return &VirtualMachineBackup{} },
		check: func(t *testing.T, obj any) {
			b := obj.(*VirtualMachineBackup)
			want := corev1.TypedLocalObjectReference{APIGroup: strPtr(GroupName), Kind: "VirtualMachineBackupTracker", Name: "my-backup-tracker"}
			if !reflect.DeepEqual(b.Spec.Source, want) {
				t.Errorf("spec.source = %+v, want %+v", b.Spec.Source, want)
			}
			if b.Spec.BackupTracker != nil {
				t.Errorf("spec.backupTracker = %q, want unset", *b.Spec.BackupTracker)
			}
			if b.Spec.Mode == nil || *b.Spec.Mode != PushMode {
				t.Errorf("spec.mode = %v, want %q", b.Spec.Mode, PushMode)
			}
			if !b.Spec.ForceFullBackup {
				t.Error("spec.forceFullBackup lost")
			}
			if b.Status == nil {
				t.Fatal("status missing")
			}
			if b.Status.Type != Full || b.Status.BackupType != "" {
				t.Errorf("status.type = %q, status.backupType = %q; want %q, empty", b.Status.Type, b.Status.BackupType, Full)
			}
			if want := []BackupVolumeInfo{{VolumeName: "rootdisk", DiskTarget: "vda"}}; !reflect.DeepEqual(b.Status.IncludedVolumes, want) {
				t.Errorf("status.includedVolumes = %+v", b.Status.IncludedVolumes)
			}
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			obj := c.into()
			if err := yaml.UnmarshalStrict([]byte(c.doc), obj); err != nil {
				t.Fatalf("decode: %v", err)
			}
			c.check(t, obj)

			// Encoding and decoding again keeps every field, whichever
			// spelling it came in.
			out, err := yaml.Marshal(obj)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			again := c.into()
			if err := yaml.UnmarshalStrict(out, again); err != nil {
				t.Fatalf("decode again: %v", err)
			}
			if !reflect.DeepEqual(obj, again) {
				t.Errorf("re-encoding changed the object:\n%s", out)
			}
		})
	}
}

// TestBackstopAdditionsOnTheWire checks the JSON names of the fields
// Backstop adds to the upstream types.
func TestBackstopAdditionsOnTheWire(t *testing.T) {
	b := VirtualMachineBackup{
		Spec: VirtualMachineBackupSpec{BackupTracker: strPtr("t")},
		Status: &VirtualMachineBackupStatus{
			Type: Incremental, BackupType: Incremental,
			Progress: &BackupProgress{TotalBytes: 100, BytesDone: 40},
		},
	}
	cp := BackupCheckpoint{Name: "cp", Disks: []string{"rootdisk"}, CheckpointXML: "<domaincheckpoint/>"}
	for _, c := range []struct {
		obj  any
		want string
	}{
		// source.apiGroup has no omitempty upstream (corev1), hence the null.
		{b.Spec, `{"source":{"apiGroup":null,"kind":"","name":""},"backupTracker":"t"}`},
		{b.Status, `{"type":"Incremental","backupType":"Incremental","progress":{"totalBytes":100,"bytesDone":40}}`},
		{cp, `{"name":"cp","disks":["rootdisk"],"checkpointXML":"\u003cdomaincheckpoint/\u003e"}`},
	} {
		got, err := json.Marshal(c.obj)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("%T encodes as %s, want %s", c.obj, got, c.want)
		}
	}
}
