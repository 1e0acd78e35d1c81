package validation

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/backstop-io/backstop/pkg/apis/kubevirtbackup"
	kubevirtbackupv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/rootdir/rootdirtest"
)

var vm = corev1.TypedLocalObjectReference{APIGroup: ptr.To("kubevirt.io"), Kind: "VirtualMachine", Name: "vm1"}

func TestNormalizeAndValidateBackupSpec(t *testing.T) {
	tracker := corev1.TypedLocalObjectReference{APIGroup: ptr.To("backup.kubevirt.io"), Kind: "VirtualMachineBackupTracker", Name: "t1"}
	mode := func(m string) *kubevirtbackup.BackupMode { b := kubevirtbackup.BackupMode(m); return &b }
	cases := []struct {
		name       string
		spec       kubevirtbackup.VirtualMachineBackupSpec
		wantSource corev1.TypedLocalObjectReference
		wantMode   *kubevirtbackup.BackupMode
		wantErrs   []string
	}{
		{name: "VM source, default mode", spec: kubevirtbackup.VirtualMachineBackupSpec{Source: vm, PvcName: ptr.To("out")}, wantSource: vm},
		{name: "seed spelling: backupTracker and lowercase push",
			spec:       kubevirtbackup.VirtualMachineBackupSpec{BackupTracker: ptr.To("t1"), Mode: mode("push"), PvcName: ptr.To("out")},
			wantSource: tracker, wantMode: mode("Push")},
		{name: "backupTracker naming another tracker than source",
			spec:       kubevirtbackup.VirtualMachineBackupSpec{Source: tracker, BackupTracker: ptr.To("t2"), PvcName: ptr.To("out")},
			wantSource: tracker, wantErrs: []string{"spec.backupTracker"}},
		{name: "no source", spec: kubevirtbackup.VirtualMachineBackupSpec{PvcName: ptr.To("out")}, wantErrs: []string{"spec.source"}},
		{name: "source without apiGroup",
			spec:       kubevirtbackup.VirtualMachineBackupSpec{Source: corev1.TypedLocalObjectReference{Kind: "VirtualMachine", Name: "vm1"}, PvcName: ptr.To("out")},
			wantSource: corev1.TypedLocalObjectReference{Kind: "VirtualMachine", Name: "vm1"}, wantErrs: []string{"spec.source.apiGroup"}},
		{name: "wrong kind for the group",
			spec:       kubevirtbackup.VirtualMachineBackupSpec{Source: corev1.TypedLocalObjectReference{APIGroup: ptr.To("kubevirt.io"), Kind: "VirtualMachineBackupTracker", Name: "x"}, PvcName: ptr.To("out")},
			wantSource: corev1.TypedLocalObjectReference{APIGroup: ptr.To("kubevirt.io"), Kind: "VirtualMachineBackupTracker", Name: "x"}, wantErrs: []string{"spec.source.kind"}},
		{name: "push without pvcName", spec: kubevirtbackup.VirtualMachineBackupSpec{Source: vm}, wantSource: vm, wantErrs: []string{"spec.pvcName"}},
		{name: "pull is refused for now", spec: kubevirtbackup.VirtualMachineBackupSpec{Source: vm, Mode: mode("pull")},
			wantSource: vm, wantMode: mode("Pull"), wantErrs: []string{"spec.mode"}},
		{name: "unknown mode", spec: kubevirtbackup.VirtualMachineBackupSpec{Source: vm, Mode: mode("sideways"), PvcName: ptr.To("out")},
			wantSource: vm, wantMode: mode("sideways"), wantErrs: []string{"spec.mode"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := c.spec
			NormalizeBackupSpec(&spec)
			if !reflect.DeepEqual(spec.Source, c.wantSource) {
				t.Errorf("source %+v, want %+v", spec.Source, c.wantSource)
			}
			if c.wantMode != nil && (spec.Mode == nil || *spec.Mode != *c.wantMode) {
				t.Errorf("mode %v, want %v", spec.Mode, *c.wantMode)
			}
			var got []string
			for _, e := range ValidateBackupSpec(&spec, field.NewPath("spec")) {
				got = append(got, e.Field)
			}
			if strings.Join(got, ",") != strings.Join(c.wantErrs, ",") {
				t.Errorf("errors at %v, want %v", got, c.wantErrs)
			}
		})
	}
}

func TestNormalizeBackupStatus(t *testing.T) {
	for _, c := range []struct{ typ, backupType, want kubevirtbackup.BackupType }{
		{"Full", "", "Full"},
		{"", "full", "Full"},
		{"", "Incremental", "Incremental"},
		{"incremental", "", "Incremental"},
		{"", "", ""},
	} {
		st := &kubevirtbackup.VirtualMachineBackupStatus{Type: c.typ, BackupType: c.backupType}
		NormalizeBackupStatus(st)
		if st.Type != c.want || st.BackupType != c.want {
			t.Errorf("type %q backupType %q → %q/%q, want %q", c.typ, c.backupType, st.Type, st.BackupType, c.want)
		}
	}
}

func TestNormalizeCheckpoint(t *testing.T) {
	seed := &kubevirtbackup.BackupCheckpoint{Disks: []string{"rootdisk", "data"}}
	NormalizeCheckpoint(seed)
	if len(seed.Volumes) != 2 || seed.Volumes[1].VolumeName != "data" {
		t.Errorf("volumes from disks: %+v", seed.Volumes)
	}
	upstream := &kubevirtbackup.BackupCheckpoint{Volumes: []kubevirtbackup.BackupVolumeInfo{{VolumeName: "rootdisk", DiskTarget: "vda"}}}
	NormalizeCheckpoint(upstream)
	if !reflect.DeepEqual(upstream.Disks, []string{"rootdisk"}) {
		t.Errorf("disks from volumes: %v", upstream.Disks)
	}
}

func TestValidateTrackerSpec(t *testing.T) {
	if errs := ValidateTrackerSpec(&kubevirtbackup.VirtualMachineBackupTrackerSpec{Source: vm}, field.NewPath("spec")); len(errs) != 0 {
		t.Errorf("valid tracker: %v", errs)
	}
	errs := ValidateTrackerSpec(&kubevirtbackup.VirtualMachineBackupTrackerSpec{}, field.NewPath("spec"))
	var got []string
	for _, e := range errs {
		got = append(got, e.Field)
	}
	if want := "spec.source.apiGroup,spec.source.kind,spec.source.name"; strings.Join(got, ",") != want {
		t.Errorf("empty tracker: errors at %v, want %s", got, want)
	}
}

func TestValidateTrackerAnnotations(t *testing.T) {
	path := field.NewPath("metadata", "annotations")
	for _, tc := range []struct {
		annotations map[string]string
		wantField   string
	}{
		{annotations: nil},
		{annotations: map[string]string{"other": "x"}},
		{annotations: map[string]string{kubevirtbackupv1alpha1.ChangedBlockTrackingAnnotation: "true"}},
		{annotations: map[string]string{kubevirtbackupv1alpha1.ChangedBlockTrackingAnnotation: "false"}},
		{annotations: map[string]string{kubevirtbackupv1alpha1.ChangedBlockTrackingAnnotation: "no"}, wantField: "metadata.annotations[backstop.io/changed-block-tracking]"},
		{annotations: map[string]string{kubevirtbackupv1alpha1.ChangedBlockTrackingAnnotation: ""}, wantField: "metadata.annotations[backstop.io/changed-block-tracking]"},
	} {
		errs := ValidateTrackerAnnotations(tc.annotations, path)
		switch {
		case tc.wantField == "" && len(errs) != 0:
			t.Errorf("%v: unexpected errors %v", tc.annotations, errs)
		case tc.wantField != "" && (len(errs) != 1 || errs[0].Field != tc.wantField || errs[0].Type != field.ErrorTypeNotSupported):
			t.Errorf("%v: errors %v, want one NotSupported at %s", tc.annotations, errs, tc.wantField)
		}
	}
}

// TestNamesThatBecomePaths: every field and annotation whose value the
// server turns into a directory or a libvirt domain name refuses each
// hostile name (traversal, absolute, NUL, lookalikes, too long) with its
// field path, and takes a plain one.
func TestNamesThatBecomePaths(t *testing.T) {
	spec := field.NewPath("spec")
	annotations := field.NewPath("metadata", "annotations")
	pvcKey := "metadata.annotations[" + kubevirtbackupv1alpha1.VMBackupPVCAnnotation + "]"
	fields := []struct {
		field string
		errs  func(name string) field.ErrorList
	}{
		{"spec.pvcName", func(n string) field.ErrorList {
			return ValidateBackupSpec(&kubevirtbackup.VirtualMachineBackupSpec{Source: vm, PvcName: &n}, spec)
		}},
		{"spec.source.name", func(n string) field.ErrorList {
			src := vm
			src.Name = n
			return ValidateBackupSpec(&kubevirtbackup.VirtualMachineBackupSpec{Source: src, PvcName: ptr.To("out")}, spec)
		}},
		{"spec.source.name", func(n string) field.ErrorList {
			src := vm
			src.Name = n
			return ValidateTrackerSpec(&kubevirtbackup.VirtualMachineBackupTrackerSpec{Source: src}, spec)
		}},
		{pvcKey, func(n string) field.ErrorList {
			return ValidateTrackerAnnotations(map[string]string{kubevirtbackupv1alpha1.VMBackupPVCAnnotation: n}, annotations)
		}},
		{pvcKey, func(n string) field.ErrorList {
			return ValidatePVCAnnotation(map[string]string{kubevirtbackupv1alpha1.VMBackupPVCAnnotation: n}, annotations)
		}},
	}
	for _, f := range fields {
		t.Run(f.field, func(t *testing.T) {
			if errs := f.errs("vm-backups.a1"); len(errs) != 0 {
				t.Errorf("a plain name refused: %v", errs)
			}
			for _, name := range append(append([]string{}, rootdirtest.Hostile...), rootdirtest.Lookalikes...) {
				errs := f.errs(name)
				if len(errs) == 0 {
					t.Errorf("%q accepted", name)
					continue
				}
				for _, e := range errs {
					if e.Field != f.field || e.Type != field.ErrorTypeInvalid {
						t.Errorf("%q: error %v, want Invalid at %s", name, e, f.field)
					}
				}
			}
		})
	}
}
