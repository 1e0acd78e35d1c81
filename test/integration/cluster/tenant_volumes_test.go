package cluster

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	kopiasnapshot "github.com/kopia/kopia/snapshot"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerov2alpha1 "github.com/backstop-io/backstop/pkg/apis/velero/v2alpha1"
	"github.com/backstop-io/backstop/pkg/archive"
	"github.com/backstop-io/backstop/pkg/datamover/kopiarepo"
	"github.com/backstop-io/backstop/pkg/datamover/kopiarepo/kopiarepotest"
	"github.com/backstop-io/backstop/test/integration/conformance"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestTenantVolumeSnapshots: a tenant's NonAdminBackup snapshots its
// claims and its NonAdminRestore brings them back from the snapshots,
// though the restore runs with the tenant's rights and a
// VolumeSnapshotContent is cluster-scoped: the server writes the content,
// once the backup vouches for its snapshot. A tarball whose content names
// another tenant's snapshot (a tenant can rewrite what its bucket holds)
// restores no content of it.
func TestTenantVolumeSnapshots(t *testing.T) {
	t.Parallel()
	c, snaps := csiCluster(t)
	ctx := context.Background()
	step := inOrder(t)
	// Tenants take VolumeSnapshots in their namespaces, as distributions
	// give namespace editors (aggregated into edit).
	if _, err := c.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "volume-snapshots-edit", Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{snapshotv1.GroupName}, Resources: []string{"volumesnapshots"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	alice := tenantOf(t, c, "alice", "tenant-a")
	bob := tenantOf(t, c, "bob", "tenant-b")
	aliceFiles := map[string][]byte{"notes.txt": []byte("alice's notes\n"), "db/rows.bin": bytes.Repeat([]byte("a"), 1<<20)}
	bobFiles := map[string][]byte{"secret.txt": []byte("bob's secret\n")}

	// backup makes a NonAdminBackup of tn's namespace and returns its
	// Backup once Completed with snapshots of its claims (0 or 1), and the
	// content the backup kept.
	backup := func(t *testing.T, tn conformance.Tenant, name string, snapshots int) (*velerov1.Backup, *snapshotv1.VolumeSnapshotContent) {
		t.Helper()
		if _, err := tn.Client.OadpV1alpha1().NonAdminBackups(tn.Namespace).Create(ctx, &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var b *velerov1.Backup
		poll(t, "NonAdminBackup "+tn.Namespace+"/"+name+" finished", 3*time.Minute, func(ctx context.Context) (bool, error) {
			nab, err := c.Backstop.OadpV1alpha1().NonAdminBackups(tn.Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil || nab.Status.VeleroBackup == nil || nab.Status.VeleroBackup.Name == "" {
				return false, nil
			}
			b, err = c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, nab.Status.VeleroBackup.Name, metav1.GetOptions{})
			return err == nil && b.Status.Phase.Terminal(), nil
		})
		if b.Status.Phase != velerov1.BackupPhaseCompleted || b.Status.CSIVolumeSnapshotsAttempted != snapshots || b.Status.CSIVolumeSnapshotsCompleted != snapshots {
			t.Fatalf("backup %s: %s, %d of %d snapshots, want %d", b.Name, b.Status.Phase, b.Status.CSIVolumeSnapshotsCompleted, b.Status.CSIVolumeSnapshotsAttempted, snapshots)
		}
		kept, err := snaps.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{LabelSelector: velerov1.BackupUIDLabel + "=" + string(b.UID)})
		if err != nil || len(kept.Items) != snapshots {
			t.Fatalf("the contents backup %s kept: %v (%v), want %d", b.Name, kept, err, snapshots)
		}
		if snapshots == 0 {
			return b, nil
		}
		if kept.Items[0].Status == nil || kept.Items[0].Status.SnapshotHandle == nil {
			t.Fatalf("the content backup %s kept has no handle: %v", b.Name, kept.Items[0])
		}
		return b, &kept.Items[0]
	}
	// restore makes a NonAdminRestore of tn with spec and returns its
	// Restore once finished.
	restore := func(t *testing.T, tn conformance.Tenant, name string, spec velerov1.RestoreSpec) *velerov1.Restore {
		t.Helper()
		if _, err := tn.Client.OadpV1alpha1().NonAdminRestores(tn.Namespace).Create(ctx, &oadpv1alpha1.NonAdminRestore{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: oadpv1alpha1.NonAdminRestoreSpec{RestoreSpec: &spec}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var r *velerov1.Restore
		poll(t, "NonAdminRestore "+tn.Namespace+"/"+name+" finished", 3*time.Minute, func(ctx context.Context) (bool, error) {
			nar, err := c.Backstop.OadpV1alpha1().NonAdminRestores(tn.Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil || nar.Status.VeleroRestore == nil || nar.Status.VeleroRestore.Name == "" {
				return false, nil
			}
			r, err = c.Backstop.VeleroV1().Restores(adminNamespace).Get(ctx, nar.Status.VeleroRestore.Name, metav1.GetOptions{})
			return err == nil && r.Status.Phase.Terminal(), nil
		})
		return r
	}
	// deleteClaim deletes a claim and waits until it is gone.
	deleteClaim := func(t *testing.T, ns, name string) {
		t.Helper()
		if err := c.Kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "claim "+ns+"/"+name+" gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
			_, err := c.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}

	// A snapshot's class is the admin's (the one labelled for Velero):
	// a tenant's claim naming another is not followed.
	var bobHandle string
	var nab1 *velerov1.Backup
	step("each tenant's backup snapshots its claim, of the admin's class", func(t *testing.T) {
		if _, err := snaps.SnapshotV1().VolumeSnapshotClasses().Create(ctx, &snapshotv1.VolumeSnapshotClass{
			ObjectMeta: metav1.ObjectMeta{Name: "tenant-pick"}, Driver: framework.CSIDriver, DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.CSI.CreateClaim(alice.Namespace, "data", "1Gi", nil)
		if _, err := alice.Kube.CoreV1().PersistentVolumeClaims(alice.Namespace).Patch(ctx, "data", types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"velero.io/csi-volumesnapshot-class":"tenant-pick"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		c.CSI.WriteFiles(alice.Namespace, "data", aliceFiles)
		c.CSI.CreateClaim(bob.Namespace, "vault", "1Gi", nil)
		c.CSI.WriteFiles(bob.Namespace, "vault", bobFiles)
		var kept *snapshotv1.VolumeSnapshotContent
		nab1, kept = backup(t, alice, "nab1", 1)
		if class := kept.Spec.VolumeSnapshotClassName; class == nil || *class != framework.CSISnapshotClass {
			t.Errorf("alice's snapshot is of class %v, want the admin's %s", class, framework.CSISnapshotClass)
		}
		_, bobKept := backup(t, bob, "nab-bob", 1)
		bobHandle = *bobKept.Status.SnapshotHandle
	})

	// The content is made from the one the server kept: what the tarball
	// adds (an annotation snapshot.storage.kubernetes.io acts on, a
	// finalizer) is not written with the server's rights.
	step("a tenant's restore brings its claim back from its snapshot", func(t *testing.T) {
		rewriteTarball(t, tarballOf(c, nab1), func(it *archive.Item) {
			if it.GroupResource != "volumesnapshotcontents.snapshot.storage.k8s.io" {
				return
			}
			var obj map[string]any
			if err := json.Unmarshal(it.Data, &obj); err != nil {
				t.Fatal(err)
			}
			meta, _ := obj["metadata"].(map[string]any)
			meta["annotations"] = map[string]any{"snapshot.storage.kubernetes.io/allow-volume-mode-change": "true"}
			meta["finalizers"] = []any{"tenant.example.com/keep"}
			data, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			it.Data = data
		})
		deleteClaim(t, alice.Namespace, "data")
		r := restore(t, alice, "nar1", velerov1.RestoreSpec{BackupName: "nab1"})
		if r.Status.Phase != velerov1.RestorePhaseCompleted {
			t.Fatalf("restore %s: %s, %d errors, %d warnings", r.Name, r.Status.Phase, r.Status.Errors, r.Status.Warnings)
		}
		c.CSI.WaitBound(alice.Namespace, "data")
		if diff := framework.DiffFiles(aliceFiles, c.CSI.ReadFiles(alice.Namespace, "data")); diff != "" {
			t.Fatalf("the restored claim: %s", diff)
		}
		// The content the server wrote for it: the snapshot the backup
		// kept, Retain, the restore's (not labelled with the backup's UID).
		contents, err := snaps.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{LabelSelector: velerov1.RestoreNameLabel + "=" + velerov1.LabelValue(r.Name)})
		if err != nil || len(contents.Items) != 1 {
			t.Fatalf("the restore's contents: %v (%v)", contents, err)
		}
		vsc := contents.Items[0]
		if vsc.Spec.DeletionPolicy != snapshotv1.VolumeSnapshotContentRetain || vsc.Labels[velerov1.BackupUIDLabel] != "" ||
			vsc.Spec.VolumeSnapshotRef.Namespace != alice.Namespace || len(vsc.Annotations) != 0 || slices.Contains(vsc.Finalizers, "tenant.example.com/keep") {
			t.Errorf("restored content %s: policy %s, labels %v, annotations %v, finalizers %v, for %s/%s", vsc.Name, vsc.Spec.DeletionPolicy, vsc.Labels,
				vsc.Annotations, vsc.Finalizers, vsc.Spec.VolumeSnapshotRef.Namespace, vsc.Spec.VolumeSnapshotRef.Name)
		}
	})

	// A restore that excludes the contents gets none.
	step("a tenant's restore excluding volumesnapshotcontents writes none", func(t *testing.T) {
		r := restore(t, alice, "nar-excluding", velerov1.RestoreSpec{BackupName: "nab1", ExcludedResources: []string{"volumesnapshotcontents"}})
		contents, err := snaps.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{LabelSelector: velerov1.RestoreNameLabel + "=" + velerov1.LabelValue(r.Name)})
		if err != nil || len(contents.Items) != 0 {
			t.Errorf("restore %s (%s) excluding volumesnapshotcontents made %v (%v)", r.Name, r.Status.Phase, contents, err)
		}
	})

	step("a tarball naming another tenant's snapshot restores no content of it", func(t *testing.T) {
		b, kept := backup(t, alice, "nab2", 1)
		aliceHandle := *kept.Status.SnapshotHandle
		// Alice rewrites her backup's tarball: every mention of her
		// snapshot's handle now names bob's.
		rewriteTarball(t, tarballOf(c, b), func(it *archive.Item) {
			it.Data = bytes.ReplaceAll(it.Data, []byte(aliceHandle), []byte(bobHandle))
		})
		deleteClaim(t, alice.Namespace, "data")
		r := restore(t, alice, "nar2", velerov1.RestoreSpec{BackupName: "nab2"})
		if r.Status.Phase != velerov1.RestorePhasePartiallyFailed || r.Status.Errors == 0 {
			t.Errorf("restore %s: %s, %d errors: want PartiallyFailed for the content refused", r.Name, r.Status.Phase, r.Status.Errors)
		}
		contents, err := snaps.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, vsc := range contents.Items {
			handle := vsc.Spec.Source.SnapshotHandle
			if vsc.Status != nil && vsc.Status.SnapshotHandle != nil {
				handle = vsc.Status.SnapshotHandle
			}
			if handle != nil && *handle == bobHandle && vsc.Spec.VolumeSnapshotRef.Namespace != bob.Namespace {
				t.Errorf("content %s of bob's snapshot, for %s/%s", vsc.Name, vsc.Spec.VolumeSnapshotRef.Namespace, vsc.Spec.VolumeSnapshotRef.Name)
			}
		}
		if claim, err := c.Kube.CoreV1().PersistentVolumeClaims(alice.Namespace).Get(ctx, "data", metav1.GetOptions{}); err == nil && claim.Status.Phase == corev1.ClaimBound {
			if files := c.CSI.ReadFiles(alice.Namespace, "data"); files["secret.txt"] != nil {
				t.Errorf("alice's restored claim holds bob's files")
			}
		}
	})

	// A tenant's backup that moves its snapshots' data: the data mover
	// uploads into the repository of the tenant's namespace (one per
	// namespace and location), and the tenant's restore writes it back.
	step("a tenant's backup moves its claim's data, and its restore writes it back", func(t *testing.T) {
		ledger := map[string][]byte{"ledger.csv": []byte("1,2,3\n"), "archive/2025.csv": bytes.Repeat([]byte("x"), 256<<10)}
		c.CSI.CreateClaim(alice.Namespace, "ledger", "64Mi", nil)
		c.CSI.WriteFiles(alice.Namespace, "ledger", ledger)
		yes := true
		if _, err := alice.Client.OadpV1alpha1().NonAdminBackups(alice.Namespace).Create(ctx, &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: "nab-moved"},
			Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{SnapshotMoveData: &yes}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var b *velerov1.Backup
		poll(t, "NonAdminBackup nab-moved finished", 3*time.Minute, func(ctx context.Context) (bool, error) {
			nab, err := c.Backstop.OadpV1alpha1().NonAdminBackups(alice.Namespace).Get(ctx, "nab-moved", metav1.GetOptions{})
			if err != nil || nab.Status.VeleroBackup == nil || nab.Status.VeleroBackup.Name == "" {
				return false, nil
			}
			b, err = c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, nab.Status.VeleroBackup.Name, metav1.GetOptions{})
			return err == nil && b.Status.Phase.Terminal(), nil
		})
		if b.Status.Phase != velerov1.BackupPhaseCompleted {
			t.Fatalf("backup %s: %s (%s)", b.Name, b.Status.Phase, b.Status.FailureReason)
		}
		dus, err := c.Backstop.VeleroV2alpha1().DataUploads(adminNamespace).List(ctx, metav1.ListOptions{LabelSelector: velerov1.BackupUIDSelector(b.UID)})
		if err != nil || len(dus.Items) == 0 {
			t.Fatalf("the backup's DataUploads: %v (%v)", dus, err)
		}
		for _, du := range dus.Items {
			if du.Spec.SourceNamespace != alice.Namespace || du.Status.Phase != velerov2alpha1.DataUploadPhaseCompleted {
				t.Errorf("DataUpload %s of %s/%s: %s (%s)", du.Name, du.Spec.SourceNamespace, du.Spec.SourcePVC, du.Status.Phase, du.Status.Message)
			}
		}
		repos, err := c.Backstop.VeleroV1().BackupRepositories(adminNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range repos.Items {
			if r.Spec.VolumeNamespace != alice.Namespace || r.Status.Phase != velerov1.BackupRepositoryPhaseReady {
				t.Errorf("BackupRepository %s: namespace %s, %s; want only alice's, Ready", r.Name, r.Spec.VolumeNamespace, r.Status.Phase)
			}
		}
		if len(repos.Items) != 1 {
			t.Errorf("%d BackupRepositories, want alice's namespace's only", len(repos.Items))
		}
		deleteClaim(t, alice.Namespace, "ledger")
		r := restore(t, alice, "nar-moved", velerov1.RestoreSpec{BackupName: "nab-moved", IncludedResources: []string{"persistentvolumeclaims"}})
		if r.Status.Phase != velerov1.RestorePhaseCompleted || r.Status.RestoreItemOperationsCompleted == 0 {
			t.Fatalf("restore %s: %s, %d errors, %d item operations completed", r.Name, r.Status.Phase, r.Status.Errors, r.Status.RestoreItemOperationsCompleted)
		}
		c.CSI.WaitBound(alice.Namespace, "ledger")
		if diff := framework.DiffFiles(ledger, c.CSI.ReadFiles(alice.Namespace, "ledger")); diff != "" {
			t.Errorf("alice's claim restored from the moved data: %s", diff)
		}
	})

	// A kopia snapshot forged in the repository of the tenant's namespace,
	// as whoever writes the bucket and holds the repository's password
	// could make it, with entries no volume holds, and the backup's volume
	// info rewritten to name it: the tenant's restore writes nothing
	// outside the claim's volume, and says why.
	step("a forged kopia snapshot restores nothing outside the claim", func(t *testing.T) {
		b, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, veleroBackupOf(t, c, alice, "nab-moved"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		marker := fmt.Sprintf("forged-%d", time.Now().UnixNano())
		st, err := kopiarepo.FilesystemStorage(ctx, filepath.Join(c.BackstopDataDir(), "backups", filepath.FromSlash(kopiarepo.Prefix("", alice.Namespace))))
		if err != nil {
			t.Fatal(err)
		}
		rep, closeRep, err := kopiarepotest.Open(ctx, st, repositoryPassword(t, c, alice.Namespace, b.Spec.StorageLocation))
		if err != nil {
			t.Fatal(err)
		}
		defer closeRep()
		forged, err := kopiarepotest.Forge(ctx, rep, kopiasnapshot.SourceInfo{Host: "default", UserName: "default", Path: kopiarepo.SourcePath(alice.Namespace, "ledger")},
			map[string]string{kopiarepo.RequesterTag: kopiarepo.Requester, kopiarepo.UploaderTag: kopiarepo.Uploader},
			kopiarepotest.Dir("", kopiarepotest.File(strings.Repeat("../", 12)+"tmp/"+marker, "pwned"),
				kopiarepotest.File(filepath.Join(c.Dir, marker), "pwned"), kopiarepotest.Dir("..", kopiarepotest.File(marker, "pwned"))))
		if err != nil {
			t.Fatal(err)
		}
		rewriteVolumeInfo(t, c, b, func(data []byte) []byte {
			var infos []map[string]any
			if err := json.Unmarshal(data, &infos); err != nil {
				t.Fatal(err)
			}
			for _, v := range infos {
				if m, ok := v["snapshotDataMovementInfo"].(map[string]any); ok {
					m["snapshotHandle"] = forged
				}
			}
			out, err := json.Marshal(infos)
			if err != nil {
				t.Fatal(err)
			}
			return out
		})
		deleteClaim(t, alice.Namespace, "ledger")
		r := restore(t, alice, "nar-forged", velerov1.RestoreSpec{BackupName: "nab-moved", IncludedResources: []string{"persistentvolumeclaims"}})
		if r.Status.Phase != velerov1.RestorePhasePartiallyFailed {
			t.Errorf("restore %s: %s, want PartiallyFailed", r.Name, r.Status.Phase)
		}
		dds, err := c.Backstop.VeleroV2alpha1().DataDownloads(adminNamespace).List(ctx, metav1.ListOptions{LabelSelector: velerov1.RestoreNameLabel + "=" + velerov1.LabelValue(r.Name)})
		if err != nil || len(dds.Items) != 1 {
			t.Fatalf("the restore's DataDownloads: %v (%v), want one", dds, err)
		}
		if dd := dds.Items[0]; dd.Status.Phase != velerov2alpha1.DataDownloadPhaseFailed || !strings.Contains(dd.Status.Message, kopiarepo.ErrUnsafeEntry.Error()) {
			t.Errorf("DataDownload %s: %s %q, want Failed saying %q", dd.Name, dd.Status.Phase, dd.Status.Message, kopiarepo.ErrUnsafeEntry)
		}
		// The tenant reads why in its restore's log.
		log, err := alice.Client.OadpV1alpha1().RESTClient().Get().Namespace(alice.Namespace).Resource("nonadminrestores").Name("nar-forged").SubResource("log").DoRaw(ctx)
		if err != nil || !strings.Contains(string(log), kopiarepo.ErrUnsafeEntry.Error()) {
			t.Errorf("the tenant's restore log (%v) does not say why:\n%s", err, log)
		}
		// Nothing named marker anywhere the restore's process could
		// reach from the volume: the cluster's directory (the server's
		// data, the driver's volumes), /tmp, the file system's root.
		for _, root := range []string{c.Dir, os.TempDir(), "/"} {
			if _, err := os.Lstat(filepath.Join(root, marker)); err == nil {
				t.Errorf("the forged snapshot wrote %s", filepath.Join(root, marker))
			}
		}
		_ = filepath.WalkDir(c.Dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Name() == marker {
				t.Errorf("the forged snapshot wrote %s", p)
			}
			return nil
		})
	})

	// The admin's policy enforces snapshotVolumes: false on tenants'
	// backups.
	step("the admin's policy turns snapshots off for tenants", func(t *testing.T) {
		no := false
		if _, err := c.Backstop.OadpV1alpha1().DataProtectionApplications(adminNamespace).Create(ctx, &oadpv1alpha1.DataProtectionApplication{
			ObjectMeta: metav1.ObjectMeta{Name: "dpa"},
			Spec:       oadpv1alpha1.DataProtectionApplicationSpec{NonAdmin: &oadpv1alpha1.NonAdmin{EnforceBackupSpec: &velerov1.BackupSpec{SnapshotVolumes: &no}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		b, _ := backup(t, bob, "nab-no-snapshots", 0)
		if b.Spec.SnapshotVolumes == nil || *b.Spec.SnapshotVolumes {
			t.Errorf("backup %s: snapshotVolumes %v, want the policy's false", b.Name, b.Spec.SnapshotVolumes)
		}
	})
}

// tarballOf is the path of a backup's tarball in the default location
// (a directory of the server's data directory).
func tarballOf(c *framework.Cluster, b *velerov1.Backup) string {
	return filepath.Join(c.BackstopDataDir(), "backups", "backups", b.Name, b.Name+".tar.gz")
}

// rewriteTarball rewrites a backup's tarball in place, each item through
// edit.
func rewriteTarball(t *testing.T, path string, edit func(*archive.Item)) {
	t.Helper()
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	r, err := archive.NewReader(in)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w, err := archive.NewWriter(&out, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for {
		it, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		edit(it)
		if err := w.Copy(it); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// veleroBackupOf is the Velero backup of tn's NonAdminBackup name.
func veleroBackupOf(t *testing.T, c *framework.Cluster, tn conformance.Tenant, name string) string {
	t.Helper()
	nab, err := c.Backstop.OadpV1alpha1().NonAdminBackups(tn.Namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil || nab.Status.VeleroBackup == nil {
		t.Fatalf("NonAdminBackup %s/%s: %v (%v)", tn.Namespace, name, nab, err)
	}
	return nab.Status.VeleroBackup.Name
}

// rewriteVolumeInfo rewrites a backup's volume info file (in the server's
// default location) through edit, as whoever writes the bucket can.
func rewriteVolumeInfo(t *testing.T, c *framework.Cluster, b *velerov1.Backup, edit func([]byte) []byte) {
	t.Helper()
	path := filepath.Join(c.BackstopDataDir(), "backups", "backups", b.Name, b.Name+"-volumeinfo.json.gz")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	if _, err := zw.Write(edit(data)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}
