package datamover

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapshotfake "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/fake"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/datamover/csivolume"
	"github.com/backstop-io/backstop/pkg/engine/vmhost"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned/fake"
	"github.com/backstop-io/backstop/pkg/generated/informers/externalversions"
)

const (
	adminNS  = "velero"
	driver   = "hostpath.csi.k8s.io"
	thisNode = "node-a"
)

// decision is what one sync of a DataUpload decided on this node.
type decision struct {
	phase    velerov2alpha1.DataUploadPhase
	accepted string
	message  string
	started  bool
	requeued bool
}

func TestSync(t *testing.T) {
	du := func(mutate func(*velerov2alpha1.DataUpload)) *velerov2alpha1.DataUpload {
		d := &velerov2alpha1.DataUpload{ObjectMeta: metav1.ObjectMeta{Namespace: adminNS, Name: "nightly-1", UID: "du-uid"},
			Spec: velerov2alpha1.DataUploadSpec{SourceNamespace: "shop", SourcePVC: "db", BackupStorageLocation: "default",
				CSISnapshot: &velerov2alpha1.CSISnapshotSpec{VolumeSnapshot: "velero-db-1", Driver: driver}}}
		if mutate != nil {
			mutate(d)
		}
		return d
	}
	accepted := func(node string, phase velerov2alpha1.DataUploadPhase) func(*velerov2alpha1.DataUpload) {
		return func(d *velerov2alpha1.DataUpload) { d.Status.AcceptedByNode, d.Status.Phase = node, phase }
	}
	for _, tc := range []struct {
		name string
		du   *velerov2alpha1.DataUpload
		// busy: every slot taken; live: the live nodes.
		busy bool
		live []string
		want decision
	}{
		{name: "new, of this node's driver: taken and run", du: du(nil),
			want: decision{phase: velerov2alpha1.DataUploadPhaseAccepted, accepted: thisNode, started: true}},
		{name: "new, every slot taken: left for later (or another node)", du: du(nil), busy: true,
			want: decision{requeued: true}},
		{name: "new, of a driver this node has not: left to another node", du: du(func(d *velerov2alpha1.DataUpload) { d.Spec.CSISnapshot.Driver = "ebs.csi.aws.com" }),
			want: decision{}},
		{name: "another data mover's: left to it", du: du(func(d *velerov2alpha1.DataUpload) { d.Spec.DataMover = "acme" }),
			want: decision{}},
		{name: "cancelled before any node took it: Canceled at once", du: du(func(d *velerov2alpha1.DataUpload) { d.Spec.Cancel = true }),
			want: decision{phase: velerov2alpha1.DataUploadPhaseCanceled}},
		{name: "cancelled, taken by this node, running nowhere: cleaned up, Canceled",
			du: du(func(d *velerov2alpha1.DataUpload) {
				accepted(thisNode, velerov2alpha1.DataUploadPhasePrepared)(d)
				d.Spec.Cancel = true
			}),
			want: decision{phase: velerov2alpha1.DataUploadPhaseCanceled, accepted: thisNode}},
		{name: "this node's, running nowhere (the replica stopped): run again", du: du(accepted(thisNode, velerov2alpha1.DataUploadPhaseInProgress)),
			want: decision{phase: velerov2alpha1.DataUploadPhaseInProgress, accepted: thisNode, started: true}},
		{name: "another live node's: left to it", du: du(accepted("node-b", velerov2alpha1.DataUploadPhaseInProgress)), live: []string{thisNode, "node-b"},
			want: decision{phase: velerov2alpha1.DataUploadPhaseInProgress, accepted: "node-b", requeued: true}},
		{name: "a node that is no longer live: Failed with the reason", du: du(accepted("node-b", velerov2alpha1.DataUploadPhaseInProgress)), live: []string{thisNode},
			want: decision{phase: velerov2alpha1.DataUploadPhaseFailed, accepted: "node-b", message: "the data mover of node node-b, which took it, no longer runs"}},
		{name: "ended: nothing", du: du(accepted(thisNode, velerov2alpha1.DataUploadPhaseCompleted)),
			want: decision{phase: velerov2alpha1.DataUploadPhaseCompleted, accepted: thisNode}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			client := fake.NewSimpleClientset(tc.du)
			factory := externalversions.NewSharedInformerFactoryWithOptions(client, 0, externalversions.WithNamespace(adminNS))
			live := tc.live
			if live == nil {
				live = []string{thisNode}
			}
			c, err := New(Config{Client: client, DataUploads: factory.Velero().V2alpha1().DataUploads(), DataDownloads: factory.Velero().V2alpha1().DataDownloads(), Kube: kubefake.NewClientset(),
				Snapshots: snapshotfake.NewSimpleClientset(), Namespace: adminNS, Node: thisNode,
				Hosts:   &vmhost.Hosts{Self: thisNode, Live: func(context.Context) ([]string, error) { return live, nil }},
				Drivers: map[string]*csivolume.Node{driver: {}}, WorkDir: t.TempDir(), Clock: clocktesting.NewFakeClock(time.Now())})
			if err != nil {
				t.Fatal(err)
			}
			var got decision
			c.begin = func(context.Context, *velerov2alpha1.DataUpload) { got.started = true }
			c.requeue = func(cache.ObjectName, time.Duration) { got.requeued = true }
			if tc.busy {
				c.runs.reserve()
			}
			factory.Start(ctx.Done())
			factory.WaitForCacheSync(ctx.Done())
			if err := c.sync(ctx, cache.MetaObjectToName(tc.du)); err != nil {
				t.Fatal(err)
			}
			stored, err := client.VeleroV2alpha1().DataUploads(adminNS).Get(ctx, tc.du.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got.phase, got.accepted = stored.Status.Phase, stored.Status.AcceptedByNode
			if !strings.Contains(stored.Status.Message, tc.want.message) {
				t.Errorf("message %q, want it to say %q", stored.Status.Message, tc.want.message)
			}
			got.message = tc.want.message
			if got != tc.want {
				t.Errorf("decided %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestSyncDownload(t *testing.T) {
	dd := func(mutate func(*velerov2alpha1.DataDownload)) *velerov2alpha1.DataDownload {
		d := &velerov2alpha1.DataDownload{ObjectMeta: metav1.ObjectMeta{Namespace: adminNS, Name: "restore-1", UID: "dd-uid"},
			Spec: velerov2alpha1.DataDownloadSpec{TargetVolume: velerov2alpha1.TargetVolumeSpec{PVC: "db", Namespace: "shop"},
				SourceNamespace: "shop", SnapshotID: "k1", BackupStorageLocation: "default"}}
		if mutate != nil {
			mutate(d)
		}
		return d
	}
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "csi"}, Provisioner: driver}
	otherClass := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "ebs"}, Provisioner: "ebs.csi.aws.com"}
	claim := func(class string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class}}
	}
	for _, tc := range []struct {
		name  string
		dd    *velerov2alpha1.DataDownload
		claim *corev1.PersistentVolumeClaim
		want  decision
	}{
		{name: "its claim's class is of this node's driver: taken and run", dd: dd(nil), claim: claim("csi"),
			want: decision{phase: velerov2alpha1.DataUploadPhase(velerov2alpha1.DataDownloadPhaseAccepted), accepted: thisNode, started: true}},
		{name: "its claim's class is another driver's: left to another node", dd: dd(nil), claim: claim("ebs"), want: decision{}},
		{name: "no claim yet: left (the restore gives it up after its timeout)", dd: dd(nil), want: decision{}},
		{name: "cancelled before any node took it: Canceled at once", dd: dd(func(d *velerov2alpha1.DataDownload) { d.Spec.Cancel = true }), claim: claim("csi"),
			want: decision{phase: velerov2alpha1.DataUploadPhase(velerov2alpha1.DataDownloadPhaseCanceled)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			client := fake.NewSimpleClientset(tc.dd)
			kube := kubefake.NewClientset(class, otherClass)
			if tc.claim != nil {
				if _, err := kube.CoreV1().PersistentVolumeClaims("shop").Create(ctx, tc.claim, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			factory := externalversions.NewSharedInformerFactoryWithOptions(client, 0, externalversions.WithNamespace(adminNS))
			c, err := New(Config{Client: client, DataUploads: factory.Velero().V2alpha1().DataUploads(), DataDownloads: factory.Velero().V2alpha1().DataDownloads(),
				Kube: kube, Snapshots: snapshotfake.NewSimpleClientset(), Namespace: adminNS, Node: thisNode,
				Drivers: map[string]*csivolume.Node{driver: {}}, WorkDir: t.TempDir(), Clock: clocktesting.NewFakeClock(time.Now())})
			if err != nil {
				t.Fatal(err)
			}
			var got decision
			c.beginDownload = func(context.Context, *velerov2alpha1.DataDownload) { got.started = true }
			c.requeueDownload = func(cache.ObjectName, time.Duration) { got.requeued = true }
			factory.Start(ctx.Done())
			factory.WaitForCacheSync(ctx.Done())
			if err := c.syncDownload(ctx, cache.MetaObjectToName(tc.dd)); err != nil {
				t.Fatal(err)
			}
			stored, err := client.VeleroV2alpha1().DataDownloads(adminNS).Get(ctx, tc.dd.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got.phase, got.accepted = velerov2alpha1.DataUploadPhase(stored.Status.Phase), stored.Status.AcceptedByNode
			if got != tc.want {
				t.Errorf("decided %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestDropBase: a VolumeSnapshot kept as a changed-block base goes once
// its DataUpload is gone (at start too); any other stays.
func TestDropBase(t *testing.T) {
	vs := func(name string, labels map[string]string) *snapshotv1.VolumeSnapshot {
		return &snapshotv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: adminNS, Name: name, UID: types.UID(name + "-uid"), Labels: labels}}
	}
	base := map[string]string{changedBlockBaseLabel: claimKey("shop/db")}
	for _, tc := range []struct {
		name string
		// uploads are the DataUploads there are.
		uploads []string
		snaps   []*snapshotv1.VolumeSnapshot
		want    []string
	}{
		{name: "the base of a deleted DataUpload goes", snaps: []*snapshotv1.VolumeSnapshot{vs("nightly-1", base)}},
		{name: "the base of a DataUpload there is stays", uploads: []string{"nightly-1"},
			snaps: []*snapshotv1.VolumeSnapshot{vs("nightly-1", base)}, want: []string{"nightly-1"}},
		{name: "a snapshot no base stays (a running upload's, another tool's)",
			snaps: []*snapshotv1.VolumeSnapshot{vs("nightly-1", nil), vs("nightly-2", map[string]string{"app": "db"})}, want: []string{"nightly-1", "nightly-2"}},
		{name: "only the gone DataUpload's base goes", uploads: []string{"nightly-2"},
			snaps: []*snapshotv1.VolumeSnapshot{vs("nightly-1", base), vs("nightly-2", base)}, want: []string{"nightly-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var objects []runtime.Object
			for _, name := range tc.uploads {
				objects = append(objects, &velerov2alpha1.DataUpload{ObjectMeta: metav1.ObjectMeta{Namespace: adminNS, Name: name}})
			}
			client := fake.NewSimpleClientset(objects...)
			var snapObjects []runtime.Object
			for _, s := range tc.snaps {
				snapObjects = append(snapObjects, s)
			}
			snaps := snapshotfake.NewSimpleClientset(snapObjects...)
			factory := externalversions.NewSharedInformerFactoryWithOptions(client, 0, externalversions.WithNamespace(adminNS))
			c, err := New(Config{Client: client, DataUploads: factory.Velero().V2alpha1().DataUploads(), DataDownloads: factory.Velero().V2alpha1().DataDownloads(),
				Kube: kubefake.NewClientset(), Snapshots: snaps, Namespace: adminNS, Node: thisNode, WorkDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			factory.Start(ctx.Done())
			factory.WaitForCacheSync(ctx.Done())
			// What a start queues, synced.
			for _, key := range c.keptBases(ctx) {
				if err := c.sync(ctx, key); err != nil {
					t.Fatal(err)
				}
			}
			list, err := snaps.SnapshotV1().VolumeSnapshots(adminNS).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range list.Items {
				got = append(got, s.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("VolumeSnapshots left %v, want %v", got, tc.want)
			}
		})
	}
}
