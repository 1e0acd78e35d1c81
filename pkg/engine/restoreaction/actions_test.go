package restoreaction

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/volumeinfo"
)

func object(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	obj := map[string]any{}
	if err := yaml.Unmarshal([]byte(y), &obj); err != nil {
		t.Fatalf("test object: %v", err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// checkResult checks what the actions made of an item: skipped (with a
// reason), or the want object.
func checkResult(t *testing.T, res Result, item *unstructured.Unstructured, skip bool, want string) {
	t.Helper()
	if res.Skip != skip || skip && res.Reason == "" {
		t.Fatalf("skip %v (%q), want %v", res.Skip, res.Reason, skip)
	}
	if skip {
		return
	}
	if w := object(t, want); !equality.Semantic.DeepEqual(item.Object, w.Object) {
		got, _ := yaml.Marshal(item.Object)
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestActions(t *testing.T) {
	preserve := true
	mapped := &velerov1.Restore{Spec: velerov1.RestoreSpec{NamespaceMapping: map[string]string{"shop": "shop-copy"}}}
	for _, c := range []struct {
		name, resource string
		restore        *velerov1.Restore
		in, want       string
		skip           bool
	}{
		{name: "clusterIP service", resource: "services",
			in:   `{spec: {type: NodePort, clusterIP: 10.96.0.7, clusterIPs: [10.96.0.7], ports: [{port: 80, nodePort: 30080}, {port: 81}]}}`,
			want: `{spec: {type: NodePort, ports: [{port: 80}, {port: 81}]}}`},
		{name: "headless service keeps None", resource: "services",
			in:   `{spec: {clusterIP: None, clusterIPs: [None], ports: [{port: 80}]}}`,
			want: `{spec: {clusterIP: None, clusterIPs: [None], ports: [{port: 80}]}}`},
		{name: "node ports preserved by the restore", resource: "services", restore: &velerov1.Restore{Spec: velerov1.RestoreSpec{PreserveNodePorts: &preserve}},
			in:   `{spec: {type: NodePort, clusterIP: 10.96.0.7, ports: [{port: 80, nodePort: 30080}]}}`,
			want: `{spec: {type: NodePort, ports: [{port: 80, nodePort: 30080}]}}`},
		{name: "node port the user applied", resource: "services",
			in: `{metadata: {annotations: {kubectl.kubernetes.io/last-applied-configuration: '{"spec":{"ports":[{"port":80,"nodePort":30080}]}}'}},
			      spec: {type: LoadBalancer, healthCheckNodePort: 31000, ports: [{port: 80, nodePort: 30080}, {port: 81, nodePort: 30081}]}}`,
			want: `{metadata: {annotations: {kubectl.kubernetes.io/last-applied-configuration: '{"spec":{"ports":[{"port":80,"nodePort":30080}]}}'}},
			      spec: {type: LoadBalancer, ports: [{port: 80, nodePort: 30080}, {port: 81}]}}`},
		{name: "pod owned by a ReplicaSet", resource: "pods", skip: true,
			in: `{metadata: {ownerReferences: [{kind: ReplicaSet, name: web-1, controller: true}]}, spec: {nodeName: n1}}`},
		{name: "replicaset owned by a Deployment", resource: "replicasets.apps", skip: true,
			in: `{metadata: {ownerReferences: [{kind: Deployment, name: web, controller: true}]}}`},
		{name: "replicaset owned but not controlled", resource: "replicasets.apps",
			in:   `{metadata: {ownerReferences: [{kind: Thing, name: t}]}}`,
			want: `{metadata: {ownerReferences: [{kind: Thing, name: t}]}}`},
		{name: "bare pod", resource: "pods",
			in: `{spec: {nodeName: n1, priority: 7, priorityClassName: high,
			      volumes: [{name: data, emptyDir: {}}, {name: kube-api-access-x1y2z, projected: {}}],
			      containers: [{name: c, volumeMounts: [{name: data, mountPath: /d}, {name: kube-api-access-x1y2z, mountPath: /var/run/secrets}]}]}}`,
			want: `{spec: {priorityClassName: high, volumes: [{name: data, emptyDir: {}}],
			      containers: [{name: c, volumeMounts: [{name: data, mountPath: /d}]}]}}`},
		{name: "job", resource: "jobs.batch",
			in: `{spec: {selector: {matchLabels: {batch.kubernetes.io/controller-uid: u1}},
			      template: {metadata: {labels: {batch.kubernetes.io/controller-uid: u1, controller-uid: u1, job-name: j, app: a}}}}}`,
			want: `{spec: {template: {metadata: {labels: {job-name: j, app: a}}}}}`},
		{name: "job with a manual selector", resource: "jobs.batch",
			in:   `{spec: {manualSelector: true, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a}}}}}`,
			want: `{spec: {manualSelector: true, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a}}}}}`},
		{name: "service account", resource: "serviceaccounts",
			in:   `{metadata: {name: robot}, secrets: [{name: robot-token-abcde}, {name: robot-dockercfg}]}`,
			want: `{metadata: {name: robot}, secrets: [{name: robot-dockercfg}]}`},
		{name: "service account token secret", resource: "secrets", skip: true,
			in: `{type: kubernetes.io/service-account-token, metadata: {name: robot-token-abcde}}`},
		{name: "opaque secret", resource: "secrets",
			in: `{type: Opaque, data: {k: dg==}}`, want: `{type: Opaque, data: {k: dg==}}`},
		{name: "rolebinding under namespaceMapping", resource: "rolebindings.rbac.authorization.k8s.io", restore: mapped,
			in:   `{subjects: [{kind: ServiceAccount, name: robot, namespace: shop}, {kind: ServiceAccount, name: x, namespace: other}, {kind: User, name: alice}]}`,
			want: `{subjects: [{kind: ServiceAccount, name: robot, namespace: shop-copy}, {kind: ServiceAccount, name: x, namespace: other}, {kind: User, name: alice}]}`},
		{name: "bound claim", resource: "persistentvolumeclaims",
			in: `{metadata: {annotations: {pv.kubernetes.io/bind-completed: "yes", pv.kubernetes.io/bound-by-controller: "yes", volume.kubernetes.io/selected-node: n1, team: a}},
			      spec: {volumeName: pv-1}}`,
			want: `{metadata: {annotations: {team: a}}, spec: {volumeName: pv-1}}`},
		{name: "volume of a mapped claim", resource: "persistentvolumes", restore: mapped,
			in:   `{spec: {claimRef: {kind: PersistentVolumeClaim, namespace: shop, name: data, uid: u1, resourceVersion: "5"}}}`,
			want: `{spec: {claimRef: {kind: PersistentVolumeClaim, namespace: shop-copy, name: data}}}`},
		{name: "endpoint slice of a selector service", resource: "endpointslices.discovery.k8s.io", skip: true,
			in: `{metadata: {labels: {endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io}}}`},
		{name: "hand-made endpoints", resource: "endpoints",
			in: `{subsets: [{addresses: [{ip: 10.0.0.1}]}]}`, want: `{subsets: [{addresses: [{ip: 10.0.0.1}]}]}`},
		{name: "a kind no action concerns", resource: "configmaps",
			in: `{data: {a: b}}`, want: `{data: {a: b}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.restore
			if r == nil {
				r = &velerov1.Restore{}
			}
			item := object(t, c.in)
			res, err := Run(Default(), c.resource, Input{Item: item, FromBackup: object(t, c.in), Restore: r})
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, res, item, c.skip, c.want)
		})
	}
}

// TestCSISnapshotRestoreActions: a claim backed up with a CSI snapshot
// comes back from it (Velero's CSI restore actions).
func TestCSISnapshotRestoreActions(t *testing.T) {
	// hex(sha256("r-uid/velero-data-abcde")), Velero's name for the restored
	// snapshot and content.
	const restored = "3ca4f304d01cf46a113797436dce0751a803220a29e681b2c89e46eb5769b2e0"
	if got := RestoredSnapshotName("r-uid", "velero-data-abcde"); got != restored {
		t.Fatalf("RestoredSnapshotName = %s, want %s", got, restored)
	}
	no := false
	mapped := &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{UID: "r-uid"}, Spec: velerov1.RestoreSpec{NamespaceMapping: map[string]string{"shop": "shop-copy"}}}
	withoutVolumes := &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{UID: "r-uid"}, Spec: velerov1.RestoreSpec{RestorePVs: &no}}
	volumes := volumeinfo.NewIndex([]volumeinfo.BackupVolumeInfo{
		{PVName: "pv-snap", BackupMethod: volumeinfo.MethodCSISnapshot, Result: volumeinfo.ResultSucceeded},
		{PVName: "pv-failed", BackupMethod: volumeinfo.MethodCSISnapshot, Result: volumeinfo.ResultFailed},
	})
	for _, c := range []struct {
		name, resource string
		restore        *velerov1.Restore
		in, want       string
		skip           bool
		wantErr        string
	}{
		{name: "content: the driver's snapshot, Retain, bound to the restored snapshot in the mapped namespace",
			resource: "volumesnapshotcontents.snapshot.storage.k8s.io", restore: mapped,
			in: `{metadata: {name: snapcontent-1, labels: {velero.io/backup-name: b1, velero.io/backup-uid: b-uid}},
			      spec: {driver: hostpath.csi.k8s.io, deletionPolicy: Delete, volumeSnapshotClassName: csi-hostpath-snapclass,
			      source: {volumeHandle: vol-1}, volumeSnapshotRef: {kind: VolumeSnapshot, namespace: shop, name: velero-data-abcde, uid: u1}},
			      status: {snapshotHandle: snap-1, readyToUse: true}}`,
			want: `{metadata: {name: ` + restored + `, labels: {velero.io/backup-name: b1}}, spec: {driver: hostpath.csi.k8s.io, deletionPolicy: Retain, source: {snapshotHandle: snap-1},
			      volumeSnapshotRef: {apiVersion: snapshot.storage.k8s.io/v1, kind: VolumeSnapshot, namespace: shop-copy, name: ` + restored + `}},
			      status: {snapshotHandle: snap-1, readyToUse: true}}`},
		{name: "content without a handle", resource: "volumesnapshotcontents.snapshot.storage.k8s.io", restore: mapped,
			in: `{metadata: {name: snapcontent-1}, spec: {volumeSnapshotRef: {namespace: shop, name: velero-data-abcde}}}`, wantErr: "no snapshot handle"},
		{name: "snapshot: bound to the restored content", resource: "volumesnapshots.snapshot.storage.k8s.io", restore: mapped,
			in: `{metadata: {name: velero-data-abcde, annotations: {velero.io/csi-volumesnapshot-handle: snap-1}},
			      spec: {source: {persistentVolumeClaimName: data}, volumeSnapshotClassName: csi-hostpath-snapclass},
			      status: {boundVolumeSnapshotContentName: snapcontent-1}}`,
			want: `{metadata: {name: ` + restored + `, annotations: {velero.io/csi-volumesnapshot-handle: snap-1, velero.io/csi-vsc-deletion-policy: Retain}},
			      spec: {source: {volumeSnapshotContentName: ` + restored + `}}, status: {boundVolumeSnapshotContentName: snapcontent-1}}`},
		{name: "snapshot never bound", resource: "volumesnapshots.snapshot.storage.k8s.io", restore: mapped,
			in: `{metadata: {name: velero-data-abcde}, spec: {source: {persistentVolumeClaimName: data}}}`, wantErr: "no bound VolumeSnapshotContent"},
		{name: "claim: provisioned from the restored snapshot", resource: "persistentvolumeclaims", restore: mapped,
			in: `{metadata: {annotations: {velero.io/volume-snapshot-name: velero-data-abcde, pv.kubernetes.io/bind-completed: "yes"}, labels: {velero.io/volume-snapshot-name: velero-data-abcde}},
			      spec: {volumeName: pv-snap, dataSourceRef: {kind: Other, name: x}}}`,
			want: `{metadata: {labels: {velero.io/volume-snapshot-name: velero-data-abcde}},
			      spec: {dataSource: {apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: ` + restored + `}}}`},
		{name: "claim without a snapshot keeps its volume", resource: "persistentvolumeclaims", restore: mapped,
			in: `{spec: {volumeName: pv-1}}`, want: `{spec: {volumeName: pv-1}}`},
		{name: "restorePVs false: the claim comes back empty", resource: "persistentvolumeclaims", restore: withoutVolumes,
			in:   `{metadata: {annotations: {velero.io/volume-snapshot-name: velero-data-abcde}}, spec: {volumeName: pv-snap, dataSource: {kind: X, name: y}}}`,
			want: `{metadata: {}, spec: {}}`},
		{name: "restorePVs false: no snapshot", resource: "volumesnapshots.snapshot.storage.k8s.io", restore: withoutVolumes,
			in: `{metadata: {name: velero-data-abcde}, status: {boundVolumeSnapshotContentName: snapcontent-1}}`, skip: true},
		{name: "restorePVs false: no content", resource: "volumesnapshotcontents.snapshot.storage.k8s.io", restore: withoutVolumes,
			in: `{metadata: {name: snapcontent-1}, status: {snapshotHandle: snap-1}}`, skip: true},
		{name: "a volume backed up by a snapshot is provisioned anew", resource: "persistentvolumes", restore: mapped,
			in: `{metadata: {name: pv-snap}, spec: {claimRef: {namespace: shop, name: data}}}`, skip: true},
		{name: "a volume whose snapshot failed is restored", resource: "persistentvolumes", restore: mapped,
			in:   `{metadata: {name: pv-failed}, spec: {claimRef: {namespace: shop, name: data}}}`,
			want: `{metadata: {name: pv-failed}, spec: {claimRef: {namespace: shop-copy, name: data}}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			item := object(t, c.in)
			res, err := Run(Default(), c.resource, Input{Item: item, FromBackup: object(t, c.in), Restore: c.restore, Volumes: volumes})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, res, item, c.skip, c.want)
		})
	}
}
