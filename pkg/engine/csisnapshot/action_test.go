package csisnapshot

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapshotfake "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/fake"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/backup"
	"github.com/backstop-io/backstop/pkg/engine/resourcepolicy"
	"github.com/backstop-io/backstop/pkg/volumeinfo"
)

const driver = "hostpath.csi.k8s.io"

func claim(ns, name, volume string, phase corev1.PersistentVolumeClaimPhase, class *string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "db"}},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: volume, StorageClassName: class},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: phase},
	}
}

func csiVolume(name string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"zone": "a"}},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "vol-" + name}},
		},
	}
}

func snapshotClass(name, drv string, labels, annotations map[string]string) *snapshotv1.VolumeSnapshotClass {
	return &snapshotv1.VolumeSnapshotClass{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Driver:         drv,
		DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete,
	}
}

// fixture is a source cluster: a CSI claim "data", a claim of a volume
// that is not CSI, one Pending, one without a storage class.
type fixture struct {
	kube   *kubefake.Clientset
	snaps  *snapshotfake.Clientset
	clock  *clocktesting.FakeClock
	action Action
	backup *velerov1.Backup
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	sc := ptr.To("csi-hostpath-sc")
	nfsVolume := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-nfs"},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/x"}}}}
	kube := kubefake.NewClientset(
		claim("shop", "data", "pv-data", corev1.ClaimBound, sc), csiVolume("pv-data"),
		claim("shop", "shared", "pv-nfs", corev1.ClaimBound, sc), nfsVolume,
		claim("shop", "pending", "", corev1.ClaimPending, sc),
		claim("shop", "classless", "pv-data", corev1.ClaimBound, nil),
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: *sc}, Provisioner: driver},
	)
	snaps := snapshotfake.NewSimpleClientset(snapshotClass("csi-hostpath-snapclass", driver, map[string]string{ClassSelector: "true"}, nil))
	// The fake tracker does not generate names.
	n := 0
	snaps.PrependReactor("create", "volumesnapshots", func(a clienttesting.Action) (bool, runtime.Object, error) {
		vs := a.(clienttesting.CreateAction).GetObject().(*snapshotv1.VolumeSnapshot)
		if vs.Name == "" {
			n++
			vs.Name = fmt.Sprintf("%s%05d", vs.GenerateName, n)
			vs.UID = "vs-uid"
		}
		return false, nil, nil
	})
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC))
	b := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "nightly", UID: "backup-uid"},
		Spec: velerov1.BackupSpec{CSISnapshotTimeout: metav1.Duration{Duration: 10 * time.Minute}}}
	return &fixture{kube: kube, snaps: snaps, clock: clk, action: Action{Kube: kube, Snapshots: snaps, Clock: clk}, backup: b}
}

func (f *fixture) item(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	pvc, err := f.kube.CoreV1().PersistentVolumeClaims("shop").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pvc)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func TestSnapshotStart(t *testing.T) {
	ctx := context.Background()
	t.Run("a Bound claim of a CSI volume gets a VolumeSnapshot, and names it", func(t *testing.T) {
		f := newFixture(t)
		item := f.item(t, "data")
		started, err := f.action.Start(ctx, f.backup, item)
		if err != nil {
			t.Fatal(err)
		}
		list, _ := f.snaps.SnapshotV1().VolumeSnapshots("shop").List(ctx, metav1.ListOptions{})
		if len(list.Items) != 1 {
			t.Fatalf("%d VolumeSnapshots, want 1", len(list.Items))
		}
		vs := list.Items[0]
		if !strings.HasPrefix(vs.Name, "velero-data-") || *vs.Spec.Source.PersistentVolumeClaimName != "data" ||
			*vs.Spec.VolumeSnapshotClassName != "csi-hostpath-snapclass" {
			t.Errorf("VolumeSnapshot %s: source %v, class %v", vs.Name, *vs.Spec.Source.PersistentVolumeClaimName, *vs.Spec.VolumeSnapshotClassName)
		}
		for k, want := range map[string]string{"app": "db", velerov1.BackupNameLabel: "nightly", velerov1.BackupUIDLabel: "backup-uid"} {
			if vs.Labels[k] != want {
				t.Errorf("VolumeSnapshot label %s = %q, want %q", k, vs.Labels[k], want)
			}
		}
		if !started.Modified || item.GetLabels()[VolumeSnapshotLabel] != vs.Name || item.GetAnnotations()[VolumeSnapshotLabel] != vs.Name {
			t.Errorf("the claim in the tarball does not name its snapshot: %v %v", item.GetLabels(), item.GetAnnotations())
		}
		want := "shop/" + vs.Name + "/2026-11-26T08:00:00Z"
		if started.OperationID != want || started.Resource == nil || started.Resource.Resource != VolumeSnapshots || started.Resource.Name != vs.Name {
			t.Errorf("started %+v, want operation %s on the VolumeSnapshot", started, want)
		}
	})
	for _, tc := range []struct {
		name, claim       string
		snapshotVolumes   *bool
		wantErr, wantSkip string
	}{
		{name: "snapshotVolumes false", claim: "data", snapshotVolumes: ptr.To(false), wantSkip: "snapshotVolumes is false"},
		{name: "a volume that is not CSI", claim: "shared", wantSkip: "is not a CSI volume"},
		{name: "a claim not bound", claim: "pending", wantSkip: "is in phase Pending and is not bound to a volume"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.backup.Spec.SnapshotVolumes = tc.snapshotVolumes
			item := f.item(t, tc.claim)
			started, err := f.action.Start(ctx, f.backup, item)
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			}
			if !strings.Contains(started.Skipped, tc.wantSkip) || (tc.wantSkip == "") != (started.Skipped == "") {
				t.Errorf("skipped %q, want %q", started.Skipped, tc.wantSkip)
			}
			if started.OperationID != "" {
				t.Errorf("an operation %s was started", started.OperationID)
			}
			if started.Modified {
				t.Errorf("the claim was changed: %v %v", item.GetLabels(), item.GetAnnotations())
			}
			if list, _ := f.snaps.SnapshotV1().VolumeSnapshots("").List(ctx, metav1.ListOptions{}); len(list.Items) != 0 {
				t.Errorf("%d VolumeSnapshots made", len(list.Items))
			}
		})
	}
	t.Run("a claim without a storage class: the driver is its volume's", func(t *testing.T) {
		f := newFixture(t)
		started, err := f.action.Start(ctx, f.backup, f.item(t, "classless"))
		if err != nil || started.OperationID == "" {
			t.Errorf("started %+v, %v; want a snapshot", started, err)
		}
	})
	t.Run("a driver without a VolumeSnapshotClass", func(t *testing.T) {
		f := newFixture(t)
		pv, _ := f.kube.CoreV1().PersistentVolumes().Get(ctx, "pv-data", metav1.GetOptions{})
		pv.Spec.CSI.Driver = "other.csi"
		if _, err := f.kube.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.action.Start(ctx, f.backup, f.item(t, "data")); err == nil || !strings.Contains(err.Error(), "failed to get VolumeSnapshotClass for provisioner other.csi") {
			t.Errorf("error %v, want Velero's about the missing class", err)
		}
	})
	t.Run("a claim deleted during the backup", func(t *testing.T) {
		f := newFixture(t)
		item := f.item(t, "data")
		if err := f.kube.CoreV1().PersistentVolumeClaims("shop").Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		started, err := f.action.Start(ctx, f.backup, item)
		if err != nil || started.OperationID != "" || !strings.Contains(started.Skipped, "deleted during the backup") {
			t.Errorf("started %+v, %v; want skipped as deleted", started, err)
		}
	})
}

// TestClaimClass: a claim's annotation chooses its class, but for a
// tenant's backup, whose classes are the admin's.
func TestClaimClass(t *testing.T) {
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{ClassSelector: "fast"}}}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        string
	}{
		{"an admin's backup", nil, "fast"},
		{"a NonAdminBackup's", map[string]string{oadpv1alpha1.NabOriginNamespaceAnnotation: "tenant-a"}, ""},
		{"a NonAdminSchedule's", map[string]string{oadpv1alpha1.NasOriginNamespaceAnnotation: "tenant-a"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}
			if got := claimClass(b, claim); got != tc.want {
				t.Errorf("claimClass = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSnapshotClassChoice(t *testing.T) {
	labelled := snapshotClass("labelled", driver, map[string]string{ClassSelector: "true"}, nil)
	defaulted := snapshotClass("default", driver, nil, map[string]string{DefaultClassAnnotation: "true"})
	plain := snapshotClass("plain", driver, nil, nil)
	other := snapshotClass("other", "other.csi", map[string]string{ClassSelector: "true"}, nil)
	for _, tc := range []struct {
		name                string
		classes             []*snapshotv1.VolumeSnapshotClass
		forClaim, forBackup string
		want, wantErr       string
	}{
		{name: "the claim's annotation first", classes: []*snapshotv1.VolumeSnapshotClass{labelled, plain}, forClaim: "plain", forBackup: "labelled", want: "plain"},
		{name: "then the backup's, whatever its case", classes: []*snapshotv1.VolumeSnapshotClass{labelled, plain}, forBackup: "PLAIN", want: "plain"},
		{name: "a named class of another driver is passed over", classes: []*snapshotv1.VolumeSnapshotClass{labelled, other}, forClaim: "other", want: "labelled"},
		{name: "a named class that does not exist is passed over", classes: []*snapshotv1.VolumeSnapshotClass{labelled}, forClaim: "gone", want: "labelled"},
		{name: "the labelled class before the default", classes: []*snapshotv1.VolumeSnapshotClass{defaulted, labelled}, want: "labelled"},
		{name: "the default class", classes: []*snapshotv1.VolumeSnapshotClass{plain, defaulted}, want: "default"},
		{name: "the driver's only class", classes: []*snapshotv1.VolumeSnapshotClass{plain, other}, want: "plain"},
		{name: "two unmarked classes", classes: []*snapshotv1.VolumeSnapshotClass{plain, snapshotClass("plain2", driver, nil, nil)}, wantErr: "ensure that the desired VolumeSnapshotClass"},
		{name: "no class of the driver", classes: []*snapshotv1.VolumeSnapshotClass{other}, wantErr: "failed to get VolumeSnapshotClass for provisioner " + driver},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var classes []snapshotv1.VolumeSnapshotClass
			for _, c := range tc.classes {
				classes = append(classes, *c)
			}
			got, err := chooseClass(classes, tc.forClaim, tc.forBackup, driver)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %q, %v; want an error saying %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// started starts the snapshot of "data" and returns its operation.
func (f *fixture) started(t *testing.T) *backup.BackupOperation {
	t.Helper()
	s, err := f.action.Start(context.Background(), f.backup, f.item(t, "data"))
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(f.clock.Now())
	return &backup.BackupOperation{
		Spec:   backup.BackupOperationSpec{BackupItemAction: Name, OperationID: s.OperationID, ResourceIdentifier: *s.Resource},
		Status: backup.OperationStatus{Phase: backup.OperationPhaseInProgress, Created: &now, Updated: &now},
	}
}

// cut plays the snapshot controller and the driver: the content of the
// snapshot, ready or with an error.
// completed is a snapshot operation that completed, its content, and what
// FinalItems leaves the backup.
func (f *fixture) completed(t *testing.T) (*backup.BackupOperation, *snapshotv1.VolumeSnapshotContent, backup.FinalItems) {
	t.Helper()
	op := f.started(t)
	content := f.cut(t, op, true, "")
	op.Status.Phase = backup.OperationPhaseCompleted
	got, err := f.action.FinalItems(context.Background(), f.backup, op)
	if err != nil {
		t.Fatal(err)
	}
	return op, content, got
}

func (f *fixture) cut(t *testing.T, op *backup.BackupOperation, ready bool, driverErr string) *snapshotv1.VolumeSnapshotContent {
	t.Helper()
	ctx := context.Background()
	id := op.Spec.ResourceIdentifier
	vs, err := f.snaps.SnapshotV1().VolumeSnapshots(id.Namespace).Get(ctx, id.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	content := &snapshotv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: "snapcontent-" + id.Name},
		Spec: snapshotv1.VolumeSnapshotContentSpec{Driver: driver, DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete,
			Source:            snapshotv1.VolumeSnapshotContentSource{VolumeHandle: ptr.To("vol-pv-data")},
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: id.Namespace, Name: id.Name}},
		Status: &snapshotv1.VolumeSnapshotContentStatus{SnapshotHandle: ptr.To("snap-1"), ReadyToUse: ptr.To(ready), RestoreSize: ptr.To(int64(1 << 30))},
	}
	if driverErr != "" {
		content.Status.Error = &snapshotv1.VolumeSnapshotError{Message: ptr.To(driverErr)}
	}
	if _, err := f.snaps.SnapshotV1().VolumeSnapshotContents().Create(ctx, content, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	size := resource.MustParse("1Gi")
	created := metav1.NewTime(f.clock.Now())
	vs.Status = &snapshotv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &content.Name, ReadyToUse: ptr.To(ready), RestoreSize: &size, CreationTime: &created}
	if _, err := f.snaps.SnapshotV1().VolumeSnapshots(id.Namespace).Update(ctx, vs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return content
}

func TestSnapshotProgress(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name            string
		cut, ready      bool
		driverErr       string
		wait            time.Duration
		deleted         bool
		wantDone        bool
		wantErr, wantIn string
	}{
		{name: "no content yet", wantIn: "waiting for the snapshot controller"},
		{name: "being cut", cut: true, wantIn: "waiting for the CSI driver"},
		{name: "ready to use", cut: true, ready: true, wantDone: true},
		{name: "an error is waited out", cut: true, driverErr: "driver busy", wantIn: "the CSI driver reports: driver busy"},
		{name: "past csiSnapshotTimeout", cut: true, driverErr: "driver gone", wait: 11 * time.Minute, wantDone: true,
			wantErr: "not ready to use within csiSnapshotTimeout 10m0s: the CSI driver reports: driver gone"},
		{name: "deleted", deleted: true, wantDone: true, wantErr: "was deleted before it was ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			op := f.started(t)
			if tc.cut {
				f.cut(t, op, tc.ready, tc.driverErr)
			}
			if tc.deleted {
				id := op.Spec.ResourceIdentifier
				if err := f.snaps.SnapshotV1().VolumeSnapshots(id.Namespace).Delete(ctx, id.Name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			f.clock.Step(tc.wait)
			p, err := f.action.Progress(ctx, f.backup, op.Spec.OperationID)
			if err != nil {
				t.Fatal(err)
			}
			if p.Completed != tc.wantDone || !strings.Contains(p.Err, tc.wantErr) || (tc.wantErr == "") != (p.Err == "") ||
				!strings.Contains(p.Description, tc.wantIn) {
				t.Errorf("progress %+v; want completed %v, error %q, description with %q", p, tc.wantDone, tc.wantErr, tc.wantIn)
			}
		})
	}
}

func TestSnapshotFinalItemsThenRelease(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	op, content, got := f.completed(t)
	t.Run("the volume info", func(t *testing.T) {
		v := got.Volume
		if v == nil || v.PVCName != "data" || v.PVCNamespace != "shop" || v.PVName != "pv-data" || v.BackupMethod != volumeinfo.MethodCSISnapshot ||
			v.Result != volumeinfo.ResultSucceeded || !v.PreserveLocalSnapshot || v.StartTimestamp == nil {
			t.Fatalf("volume %+v", v)
		}
		s := v.CSISnapshotInfo
		if s.SnapshotHandle != "snap-1" || s.Driver != driver || s.VSCName != content.Name || s.Size != 1<<30 || s.OperationID != op.Spec.OperationID ||
			s.ReadyToUse == nil || !*s.ReadyToUse {
			t.Errorf("snapshot info %+v", s)
		}
		if v.PVInfo == nil || v.PVInfo.ReclaimPolicy != "Delete" || v.PVInfo.Labels["zone"] != "a" {
			t.Errorf("pv info %+v", v.PVInfo)
		}
	})
	t.Run("the items: snapshot, content, class", func(t *testing.T) {
		if len(got.Items) != 3 {
			t.Fatalf("%d items, want 3", len(got.Items))
		}
		vs, vsc, class := got.Items[0].Object, got.Items[1].Object, got.Items[2].Object
		if vs.GetKind() != "VolumeSnapshot" || vs.GetAPIVersion() != "snapshot.storage.k8s.io/v1" {
			t.Errorf("snapshot item %s %s", vs.GetAPIVersion(), vs.GetKind())
		}
		for k, want := range map[string]string{HandleAnnotation: "snap-1", DriverAnnotation: driver, RestoreSizeAnnotation: "1Gi",
			DeletionPolicyAnnotation: "Delete", MustIncludeAnnotation: "true"} {
			if got := vs.GetAnnotations()[k]; got != want {
				t.Errorf("snapshot annotation %s = %q, want %q", k, got, want)
			}
		}
		if vsc.GetKind() != "VolumeSnapshotContent" || vsc.GetLabels()[velerov1.BackupNameLabel] != "nightly" || vsc.GetLabels()[velerov1.BackupUIDLabel] != "backup-uid" {
			t.Errorf("content item %s labels %v", vsc.GetKind(), vsc.GetLabels())
		}
		if class.GetKind() != "VolumeSnapshotClass" || class.GetName() != "csi-hostpath-snapclass" {
			t.Errorf("class item %s %s", class.GetKind(), class.GetName())
		}
		if live, _ := f.snaps.SnapshotV1().VolumeSnapshotContents().Get(ctx, content.Name, metav1.GetOptions{}); live.Labels[velerov1.BackupUIDLabel] != "backup-uid" {
			t.Errorf("the content in the cluster is not labelled with its backup: %v", live.Labels)
		}
		if len(op.Spec.PostOperationItems) != 2 || op.Spec.PostOperationItems[1].Name != content.Name {
			t.Errorf("post-operation items %+v", op.Spec.PostOperationItems)
		}
	})
	t.Run("release: the content kept with Retain, the VolumeSnapshot gone", func(t *testing.T) {
		if err := f.action.Release(ctx, f.backup, op); err != nil {
			t.Fatal(err)
		}
		id := op.Spec.ResourceIdentifier
		if _, err := f.snaps.SnapshotV1().VolumeSnapshots(id.Namespace).Get(ctx, id.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the VolumeSnapshot is still there: %v", err)
		}
		live, err := f.snaps.SnapshotV1().VolumeSnapshotContents().Get(ctx, content.Name, metav1.GetOptions{})
		if err != nil || live.Spec.DeletionPolicy != snapshotv1.VolumeSnapshotContentRetain {
			t.Errorf("content %v, %v; want it kept with deletion policy Retain (the driver would delete the snapshot)", live, err)
		}
		if err := f.action.Release(ctx, f.backup, op); err != nil {
			t.Errorf("release again (after a restart): %v", err)
		}
	})
	t.Run("the backup deleted: its contents Delete, then deleted; another backup's kept", func(t *testing.T) {
		other := &snapshotv1.VolumeSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: "another", UID: "c2",
			Labels: map[string]string{velerov1.BackupUIDLabel: "another-uid"}}, Spec: snapshotv1.VolumeSnapshotContentSpec{DeletionPolicy: snapshotv1.VolumeSnapshotContentRetain}}
		if _, err := f.snaps.SnapshotV1().VolumeSnapshotContents().Create(ctx, other, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var deletedWith snapshotv1.DeletionPolicy
		f.snaps.PrependReactor("delete", "volumesnapshotcontents", func(a clienttesting.Action) (bool, runtime.Object, error) {
			name := a.(clienttesting.DeleteAction).GetName()
			if live, err := f.snaps.Tracker().Get(snapshotv1.SchemeGroupVersion.WithResource(VolumeSnapshotContents), "", name); err == nil {
				deletedWith = live.(*snapshotv1.VolumeSnapshotContent).Spec.DeletionPolicy
			}
			return false, nil, nil
		})
		n, err := f.action.DeleteBackupSnapshots(ctx, f.backup)
		if err != nil || n != 1 {
			t.Fatalf("deleted %d, %v; want 1", n, err)
		}
		if deletedWith != snapshotv1.VolumeSnapshotContentDelete {
			t.Errorf("the content was deleted with policy %q: the driver keeps the snapshot", deletedWith)
		}
		if _, err := f.snaps.SnapshotV1().VolumeSnapshotContents().Get(ctx, content.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the backup's content is still there: %v", err)
		}
		if _, err := f.snaps.SnapshotV1().VolumeSnapshotContents().Get(ctx, "another", metav1.GetOptions{}); err != nil {
			t.Errorf("another backup's content: %v", err)
		}
	})
}

func TestSnapshotDiscard(t *testing.T) {
	ctx := context.Background()
	t.Run("the content's policy Delete, the snapshot deleted", func(t *testing.T) {
		f := newFixture(t)
		op := f.started(t)
		content := f.cut(t, op, true, "")
		if _, err := f.snaps.SnapshotV1().VolumeSnapshotContents().Patch(ctx, content.Name, "application/merge-patch+json",
			[]byte(`{"spec":{"deletionPolicy":"Retain"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := f.action.Cancel(ctx, f.backup, op.Spec.OperationID); err != nil {
			t.Fatal(err)
		}
		live, err := f.snaps.SnapshotV1().VolumeSnapshotContents().Get(ctx, content.Name, metav1.GetOptions{})
		if err != nil || live.Spec.DeletionPolicy != snapshotv1.VolumeSnapshotContentDelete {
			t.Errorf("content %v, %v; want its deletion policy Delete", live, err)
		}
		id := op.Spec.ResourceIdentifier
		if _, err := f.snaps.SnapshotV1().VolumeSnapshots(id.Namespace).Get(ctx, id.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the VolumeSnapshot is still there: %v", err)
		}
		if err := f.action.Discard(ctx, f.backup, op); err != nil {
			t.Errorf("discard again: %v", err)
		}
	})
	t.Run("another backup's snapshot is left alone", func(t *testing.T) {
		f := newFixture(t)
		op := f.started(t)
		other := f.backup.DeepCopy()
		other.UID = "another-uid"
		if err := f.action.Discard(ctx, other, op); err == nil || !strings.Contains(err.Error(), "was not taken by backup") {
			t.Errorf("discard by another backup: %v", err)
		}
		id := op.Spec.ResourceIdentifier
		if _, err := f.snaps.SnapshotV1().VolumeSnapshots(id.Namespace).Get(ctx, id.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("the VolumeSnapshot is gone: %v", err)
		}
	})
}

// TestSnapshotFailed: a snapshot that failed leaves no item, a volume
// entry saying so, and a Warning Event on the backup.
func TestSnapshotFailed(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	events := record.NewFakeRecorder(10)
	f.action.Recorder = events
	op := f.started(t)
	op.Status.Phase, op.Status.Error = backup.OperationPhaseFailed, "VolumeSnapshot shop/x was not ready to use within csiSnapshotTimeout 10m0s"
	got, err := f.action.FinalItems(ctx, f.backup, op)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != 0 || got.Volume == nil || got.Volume.Result != volumeinfo.ResultFailed || got.Volume.PVCName != "data" {
		t.Errorf("items %d, volume %+v; want none and a failed volume of PVC data", len(got.Items), got.Volume)
	}
	select {
	case e := <-events.Events:
		if !strings.HasPrefix(e, "Warning "+FailedReason+" ") || !strings.Contains(e, "csiSnapshotTimeout") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no Event for the failed snapshot")
	}
}

// TestSnapshotVolumePolicies: the backup's volume policies decide before
// snapshotVolumes does.
func TestSnapshotVolumePolicies(t *testing.T) {
	for _, tc := range []struct {
		name, policy       string
		snapshotVolumes    *bool
		wantSnapshot       bool
		wantSkip, wantWarn string
	}{
		{name: "skip by storage class", policy: "{conditions: {storageClass: [csi-hostpath-sc]}, action: {type: skip}}", wantSkip: "a volume policy says skip"},
		{name: "skip by capacity", policy: "{conditions: {capacity: '0,1Gi'}, action: {type: skip}}", wantSkip: "a volume policy says skip"},
		{name: "a capacity that does not hold", policy: "{conditions: {capacity: '5Gi,'}, action: {type: skip}}", wantSnapshot: true},
		{name: "snapshot though snapshotVolumes is false", policy: "{conditions: {csi: {driver: hostpath.csi.k8s.io}}, action: {type: snapshot}}",
			snapshotVolumes: ptr.To(false), wantSnapshot: true},
		{name: "fs-backup: no snapshot, a warning", policy: "{conditions: {}, action: {type: fs-backup}}", wantWarn: "fs-backup, which this server does not do"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.backup.Spec.SnapshotVolumes = tc.snapshotVolumes
			pv, _ := f.kube.CoreV1().PersistentVolumes().Get(context.Background(), "pv-data", metav1.GetOptions{})
			pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
			pv.Spec.StorageClassName = "csi-hostpath-sc"
			if _, err := f.kube.CoreV1().PersistentVolumes().Update(context.Background(), pv, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			policies, err := resourcepolicy.Parse("version: v1\nvolumePolicies: [" + tc.policy + "]")
			if err != nil {
				t.Fatal(err)
			}
			started, err := f.action.Start(resourcepolicy.NewContext(context.Background(), policies), f.backup, f.item(t, "data"))
			if err != nil {
				t.Fatal(err)
			}
			if (started.OperationID != "") != tc.wantSnapshot || !strings.Contains(started.Skipped, tc.wantSkip) || !strings.Contains(started.Warning, tc.wantWarn) {
				t.Errorf("started %+v; want a snapshot %v, skipped %q, warning %q", started, tc.wantSnapshot, tc.wantSkip, tc.wantWarn)
			}
		})
	}
}

// TestSnapshotStartedOperations: the snapshots a backup took are found by
// its UID, name label and name prefix (a restart finds those it had not
// recorded), each as an operation that cancels it; another backup's are
// not, nor one a user labelled as the backup's. Deleting the backup
// discards such a snapshot left in the claim's namespace too.
func TestSnapshotStartedOperations(t *testing.T) {
	ctx := context.Background()
	setUp := func(t *testing.T) (*fixture, backup.ResourceIdentifier) {
		f := newFixture(t)
		op := f.started(t)
		f.cut(t, op, false, "")
		for _, vs := range []*snapshotv1.VolumeSnapshot{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "velero-x-1", Labels: map[string]string{velerov1.BackupUIDLabel: "another-uid"}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "mine", Labels: map[string]string{velerov1.BackupUIDLabel: string(f.backup.UID), velerov1.BackupNameLabel: f.backup.Name}}},
		} {
			if _, err := f.snaps.SnapshotV1().VolumeSnapshots(vs.Namespace).Create(ctx, vs, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return f, op.Spec.ResourceIdentifier
	}
	untouched := func(t *testing.T, f *fixture) {
		t.Helper()
		for _, id := range [][2]string{{"elsewhere", "velero-x-1"}, {"shop", "mine"}} {
			if _, err := f.snaps.SnapshotV1().VolumeSnapshots(id[0]).Get(ctx, id[1], metav1.GetOptions{}); err != nil {
				t.Errorf("VolumeSnapshot %s/%s the backup did not take: %v", id[0], id[1], err)
			}
		}
	}
	t.Run("found and cancelled", func(t *testing.T) {
		f, id := setUp(t)
		found, err := f.action.StartedOperations(ctx, f.backup)
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != 1 || found[0].Resource == nil || *found[0].Resource != id {
			t.Fatalf("found %+v, want the operation of %s/%s only", found, id.Namespace, id.Name)
		}
		if err := f.action.Cancel(ctx, f.backup, found[0].OperationID); err != nil {
			t.Fatalf("cancelling the found operation %q: %v", found[0].OperationID, err)
		}
		if _, err := f.snaps.SnapshotV1().VolumeSnapshots(id.Namespace).Get(ctx, id.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the VolumeSnapshot is still there: %v", err)
		}
		untouched(t, f)
	})
	t.Run("discarded when the backup is deleted", func(t *testing.T) {
		f, id := setUp(t)
		if _, err := f.action.DeleteBackupSnapshots(ctx, f.backup); err != nil {
			t.Fatal(err)
		}
		if _, err := f.snaps.SnapshotV1().VolumeSnapshots(id.Namespace).Get(ctx, id.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the backup's VolumeSnapshot is still there: %v", err)
		}
		content, err := f.snaps.SnapshotV1().VolumeSnapshotContents().Get(ctx, "snapcontent-"+id.Name, metav1.GetOptions{})
		if err != nil || content.Spec.DeletionPolicy != snapshotv1.VolumeSnapshotContentDelete {
			t.Errorf("its content %v, %v; want deletion policy Delete", content, err)
		}
		untouched(t, f)
	})
}

// TestSnapshotReleaseKeepsContent: a snapshot-controller whose copy of the
// content still says Delete deletes the content with its VolumeSnapshot;
// Release then makes the content again, pre-provisioned from the
// snapshot's handle, with Retain and the backup's labels.
func TestSnapshotReleaseKeepsContent(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	op, content, _ := f.completed(t)
	// The stale controller: deleting the VolumeSnapshot deletes its content.
	f.snaps.PrependReactor("delete", "volumesnapshots", func(clienttesting.Action) (bool, runtime.Object, error) {
		if err := f.snaps.Tracker().Delete(snapshotv1.SchemeGroupVersion.WithResource(VolumeSnapshotContents), "", content.Name); err != nil {
			t.Errorf("deleting the content as the controller would: %v", err)
		}
		return false, nil, nil
	})
	if err := f.action.Release(ctx, f.backup, op); err != nil {
		t.Fatal(err)
	}
	kept, err := f.snaps.SnapshotV1().VolumeSnapshotContents().Get(ctx, content.Name+"-kept", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no content made again for the snapshot: %v", err)
	}
	if h := kept.Spec.Source.SnapshotHandle; h == nil || *h != "snap-1" || kept.Spec.DeletionPolicy != snapshotv1.VolumeSnapshotContentRetain ||
		kept.Spec.Driver != driver || kept.Labels[velerov1.BackupUIDLabel] != "backup-uid" || kept.Spec.VolumeSnapshotRef.UID != "" {
		t.Errorf("content made again: %+v", kept)
	}
	if n, err := f.action.DeleteBackupSnapshots(ctx, f.backup); err != nil || n != 1 {
		t.Errorf("the backup's deletion deleted %d contents (%v), want the one made again", n, err)
	}
}
