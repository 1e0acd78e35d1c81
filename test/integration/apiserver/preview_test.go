package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	kvbackupv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// previewRestore asks for a restore's preview as a user would: kubectl
// create --dry-run=server -o json.
func previewRestore(t *testing.T, s *framework.Server, name string, spec velerov1.RestoreSpec) *velerov1.RestorePreview {
	t.Helper()
	manifest, err := yaml.Marshal(&velerov1.Restore{TypeMeta: metav1.TypeMeta{APIVersion: "velero.io/v1", Kind: "Restore"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Kubectl(manifest, "create", "-f", "-", "--dry-run=server", "-o", "json")
	if err != nil {
		t.Fatalf("kubectl create --dry-run=server: %v: %s", err, out)
	}
	var r velerov1.Restore
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Status.Preview == nil {
		t.Fatalf("the answer: %v, %s", err, out)
	}
	if _, err := s.Clientset.VeleroV1().Restores(ns).Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the previewed restore %s was stored: %v", name, err)
	}
	return r.Status.Preview
}

// previewed is a preview's items as "<action> <resource> <namespace>/<name>".
func previewed(p *velerov1.RestorePreview) []string {
	var out []string
	for _, it := range p.Items {
		out = append(out, fmt.Sprintf("%s %s %s/%s", it.Action, it.Resource, it.Namespace, it.Name))
	}
	sort.Strings(out)
	return out
}

// trackersState is each tracker of namespace as "<name> <uid> <source>
// <labels>" (what a restore writes; their status is the VM engines').
func trackersState(t *testing.T, s *framework.Server, namespace string) string {
	t.Helper()
	list, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tr := range list.Items {
		out = append(out, fmt.Sprintf("%s %s %s %v", tr.Name, tr.UID, tr.Spec.Source.Name, tr.Labels))
	}
	return strings.Join(out, ",")
}

// TestRestorePreview: kubectl create --dry-run=server of a Restore answers
// with what the restore would do, item by item, and changes nothing (the
// restore is not stored, the target untouched); the restore then does
// what the preview said: an item deleted since the backup is created, one
// whose labels changed is updated (existingResourcePolicy: update), one
// unchanged is skipped, one whose immutable spec changed is refused with
// the target's reason; into a mapped namespace, everything is created. A
// restore with spec.preview runs as a restore, writes nothing, and ends
// with the same preview in its status.
func TestRestorePreview(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	trackers := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers("shop")
	for _, name := range []string{"t1", "t2", "t3", "t4"} {
		createTracker(t, s, "shop", name, map[string]string{"app": "web"})
	}
	createBackup(t, s, "previewed", "shop")
	if b := waitBackup(t, s, "previewed", "finished", finished); b.Status.Phase != velerov1.BackupPhaseCompleted {
		t.Fatalf("backup: %s %q", b.Status.Phase, b.Status.FailureReason)
	}
	// Since the backup: t1 deleted, t2 made again from another VM, t3
	// relabelled, t4 as it was.
	for _, name := range []string{"t1", "t2"} {
		if err := trackers.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	apiGroup := "kubevirt.io"
	if _, err := trackers.Create(ctx, &kvbackupv1alpha1.VirtualMachineBackupTracker{
		ObjectMeta: metav1.ObjectMeta{Name: "t2", Labels: map[string]string{"app": "web"}},
		Spec:       kvbackupv1alpha1.VirtualMachineBackupTrackerSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &apiGroup, Kind: "VirtualMachine", Name: "another-vm"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := trackers.Patch(ctx, "t3", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"shop"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	before := trackersState(t, s, "shop")
	spec := velerov1.RestoreSpec{BackupName: "previewed", ExistingResourcePolicy: velerov1.PolicyTypeUpdate}

	var p *velerov1.RestorePreview
	t.Run("previewed", func(t *testing.T) {
		p = previewRestore(t, s, "preview-1", spec)
		want := []string{
			"Create virtualmachinebackuptrackers.backup.kubevirt.io shop/t1",
			"Refuse virtualmachinebackuptrackers.backup.kubevirt.io shop/t2",
			"Skip virtualmachinebackuptrackers.backup.kubevirt.io shop/t4",
			"Update virtualmachinebackuptrackers.backup.kubevirt.io shop/t3",
		}
		if got := previewed(p); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("preview items\n got %q\nwant %q", got, want)
		}
		for _, it := range p.Items {
			switch it.Name {
			case "t1", "t3":
				var written kvbackupv1alpha1.VirtualMachineBackupTracker
				if it.Object == nil || json.Unmarshal(it.Object.Raw, &written) != nil ||
					written.Labels["velero.io/restore-name"] != "preview-1" || written.Spec.Source.Name != "vm-"+it.Name || len(written.ManagedFields) != 0 {
					t.Errorf("%s: the object as it would be written: %v", it.Name, it.Object)
				}
			case "t2":
				if !strings.Contains(it.Reason, "immutable") {
					t.Errorf("t2 refused for %q, want the target's reason (spec immutable)", it.Reason)
				}
			}
		}
		if len(p.Summary) != 1 || p.Summary[0] != (velerov1.RestorePreviewCount{Resource: "virtualmachinebackuptrackers.backup.kubevirt.io", Namespace: "shop", Create: 1, Update: 1, Skip: 1, Refuse: 1}) {
			t.Errorf("summary %+v", p.Summary)
		}
		if after := trackersState(t, s, "shop"); after != before {
			t.Errorf("the preview changed the target: %s, was %s", after, before)
		}
	})

	t.Run("into a mapped namespace", func(t *testing.T) {
		mapped := spec
		mapped.NamespaceMapping = map[string]string{"shop": "shop-copy"}
		got := previewed(previewRestore(t, s, "preview-2", mapped))
		if len(got) != 4 || !strings.HasPrefix(got[0], "Create ") || !strings.HasPrefix(got[3], "Create ") {
			t.Errorf("preview items %q, want four creates", got)
		}
		if state := trackersState(t, s, "shop-copy"); state != "" {
			t.Errorf("the preview wrote into the mapped namespace: %s", state)
		}
	})

	t.Run("refused as the restore would be", func(t *testing.T) {
		manifest := []byte("apiVersion: velero.io/v1\nkind: Restore\nmetadata: {name: nothing, namespace: " + ns + "}\nspec: {backupName: no-such-backup}\n")
		out, err := s.Kubectl(manifest, "create", "-f", "-", "--dry-run=server", "-o", "json")
		if err == nil || !strings.Contains(err.Error(), `backup "no-such-backup": not found`) || !strings.Contains(err.Error(), "is invalid") {
			t.Errorf("a preview of a restore of no backup: %v: %s", err, out)
		}
	})

	t.Run("run like a restore (spec.preview)", func(t *testing.T) {
		async := spec
		async.Preview = true
		r := createRestore(t, s, "preview-run", async)
		if r.Status.Phase != velerov1.RestorePhaseCompleted || r.Status.Preview == nil {
			t.Fatalf("restore with spec.preview: %s %q, preview %v", r.Status.Phase, r.Status.FailureReason, r.Status.Preview)
		}
		if got, want := previewed(r.Status.Preview), previewed(p); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("the preview run's items\n got %q\nwant %q (the dry-run create's)", got, want)
		}
		if after := trackersState(t, s, "shop"); after != before {
			t.Errorf("the preview run changed the target: %s, was %s", after, before)
		}
		if logs := restoreLogs(t, s, "preview-run"); !strings.Contains(logs, "nothing is written") {
			t.Errorf("the preview run's log does not say it is one:\n%s", logs)
		}
	})

	t.Run("the restore does what the preview said", func(t *testing.T) {
		r := createRestore(t, s, "preview-1", spec)
		if r.Status.Phase != velerov1.RestorePhaseCompleted {
			t.Fatalf("restore: %s %q, warnings %d errors %d", r.Status.Phase, r.Status.FailureReason, r.Status.Warnings, r.Status.Errors)
		}
		for _, it := range p.Items {
			got, err := trackers.Get(ctx, it.Name, metav1.GetOptions{})
			if err != nil {
				t.Errorf("%s: %v", it.Name, err)
				continue
			}
			restoredByIt := got.Labels["velero.io/restore-name"] == "preview-1"
			switch it.Action {
			case velerov1.PreviewCreate, velerov1.PreviewUpdate:
				if !restoredByIt || got.Labels["app"] != "web" {
					t.Errorf("%s (%s in the preview): labels %v", it.Name, it.Action, got.Labels)
				}
			case velerov1.PreviewSkip, velerov1.PreviewRefuse:
				if restoredByIt {
					t.Errorf("%s (%s in the preview) was written: labels %v", it.Name, it.Action, got.Labels)
				}
			}
		}
		if got, err := trackers.Get(ctx, "t2", metav1.GetOptions{}); err != nil || got.Spec.Source.Name != "another-vm" {
			t.Errorf("t2, refused in the preview: %v, source %+v", err, got.Spec.Source)
		}
		// The refused update is the restore's one warning.
		if r.Status.Warnings != 1 {
			t.Errorf("restore warnings %d, want 1 (t2's refused update)", r.Status.Warnings)
		}
	})
}

// TestTenantPreview: a tenant previews a restore of its own backup with
// restoreSpec.preview on its NonAdminRestore: it runs with the tenant's
// rights as its restore would, writes nothing, and the preview is in the
// NonAdminRestore's status.
func TestTenantPreview(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	alice := newTenant(t, s, "alice", "tenant-a")
	createTracker(t, s, "tenant-a", "t1", nil)
	finishedNAB(t, s, alice.client, "tenant-a", "nab1")
	trackers := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers("tenant-a")
	if err := trackers.Delete(ctx, "t1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.client.OadpV1alpha1().NonAdminRestores("tenant-a").Create(ctx, &oadpv1alpha1.NonAdminRestore{ObjectMeta: metav1.ObjectMeta{Name: "try"},
		Spec: oadpv1alpha1.NonAdminRestoreSpec{RestoreSpec: &velerov1.RestoreSpec{BackupName: "nab1", Preview: true}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var preview *velerov1.RestorePreview
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		nar, err := alice.client.OadpV1alpha1().NonAdminRestores("tenant-a").Get(ctx, "try", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if vr := nar.Status.VeleroRestore; vr != nil && vr.Status != nil && vr.Status.Phase.Terminal() {
			preview = vr.Status.Preview
			return true, nil
		}
		return false, nil
	}); err != nil || preview == nil {
		t.Fatalf("the NonAdminRestore's preview: %v, %v", err, preview)
	}
	if !hasPreviewItem(preview, velerov1.PreviewCreate, "virtualmachinebackuptrackers.backup.kubevirt.io", "tenant-a", "t1") {
		t.Errorf("preview items %q, want t1 created", previewed(preview))
	}
	if _, err := trackers.Get(ctx, "t1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("t1 after the tenant's preview: %v, want not found", err)
	}

	// Every reader of the NonAdminRestore reads its status: it carries no
	// object. The preview subresource shows each object to those who may
	// get it: alice (edit) sees t1's, a user who may read the
	// NonAdminRestore and not trackers does not.
	t.Run("the status carries no objects", func(t *testing.T) {
		for _, it := range preview.Items {
			if it.Object != nil {
				t.Errorf("the NonAdminRestore's status carries the object of %s %s/%s", it.Resource, it.Namespace, it.Name)
			}
		}
	})
	admin := rbacClient(t, s.KubeconfigPath)
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "restore-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{oadpv1alpha1.GroupName}, Resources: []string{"nonadminrestores", "nonadminrestores/preview"}, Verbs: []string{"get"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	victor := newUser(t, s, "victor", "tenant-a", "restore-reader")
	previewAs := func(t *testing.T, client versioned.Interface) *velerov1.RestorePreview {
		t.Helper()
		var nar oadpv1alpha1.NonAdminRestore
		if err := client.OadpV1alpha1().RESTClient().Get().Namespace("tenant-a").Resource("nonadminrestores").Name("try").SubResource("preview").Do(ctx).Into(&nar); err != nil {
			t.Fatalf("nonadminrestores/try/preview: %v", err)
		}
		if nar.Status.VeleroRestore == nil || nar.Status.VeleroRestore.Status == nil || nar.Status.VeleroRestore.Status.Preview == nil {
			t.Fatalf("nonadminrestores/try/preview holds no preview: %+v", nar.Status)
		}
		return nar.Status.VeleroRestore.Status.Preview
	}
	objectOf := func(p *velerov1.RestorePreview) *velerov1.RestorePreviewItem {
		for i, it := range p.Items {
			if it.Resource == "virtualmachinebackuptrackers.backup.kubevirt.io" && it.Name == "t1" {
				return &p.Items[i]
			}
		}
		return nil
	}
	t.Run("the preview subresource shows alice the tracker she may get", func(t *testing.T) {
		it := objectOf(previewAs(t, alice.client))
		if it == nil || it.Object == nil || !strings.Contains(string(it.Object.Raw), `"t1"`) {
			t.Errorf("alice's preview of t1: %+v, want its object", it)
		}
	})
	t.Run("and not a reader who may not get trackers", func(t *testing.T) {
		p := previewAs(t, victor.client)
		if it := objectOf(p); it == nil || it.Object != nil || it.Action != velerov1.PreviewCreate {
			t.Errorf("victor's preview of t1: %+v, want its action without its object", it)
		}
		if _, err := victor.client.BackupV1alpha1().VirtualMachineBackupTrackers("tenant-a").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("victor lists trackers: %v, want forbidden (the test's premise)", err)
		}
	})
}

func hasPreviewItem(p *velerov1.RestorePreview, action, resource, namespace, name string) bool {
	for _, it := range p.Items {
		if it.Action == action && it.Resource == resource && it.Namespace == namespace && it.Name == name {
			return true
		}
	}
	return false
}
