package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	utilptr "k8s.io/utils/ptr"

	kvbackupv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	"github.com/backstop-io/backstop/pkg/apis/restoreas"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/nonadmin"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	"github.com/backstop-io/backstop/test/integration/conformance"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// tenant is a user bound to edit in its own namespace.
type tenant struct {
	name, namespace string
	kubeconfig      string
	client          versioned.Interface
}

// newTenant binds user to the edit ClusterRole in namespace, as a cluster
// admin does for a namespace owner, and returns the user's client (a
// client certificate).
func newTenant(t *testing.T, s *framework.Server, user, namespace string) tenant {
	t.Helper()
	return newUser(t, s, user, namespace, "edit")
}

// newUser binds user to clusterRole in namespace and returns its client.
func newUser(t *testing.T, s *framework.Server, user, namespace, clusterRole string) tenant {
	t.Helper()
	admin := rbacClient(t, s.KubeconfigPath)
	if _, err := admin.RbacV1().RoleBindings(namespace).Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-" + clusterRole, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := s.IssueKubeconfig(user)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tenant{name: user, namespace: namespace, kubeconfig: kubeconfig, client: client}
}

// finishedNAB creates a NonAdminBackup of namespace with client and waits
// until its backup has finished; it returns the Velero backup's name.
func finishedNAB(t *testing.T, s *framework.Server, client versioned.Interface, namespace, name string) string {
	t.Helper()
	if _, err := client.OadpV1alpha1().NonAdminBackups(namespace).Create(context.Background(), &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating NonAdminBackup %s/%s: %v", namespace, name, err)
	}
	return waitNAB(t, s, namespace, name, "its backup to finish", veleroBackupDone).Status.VeleroBackup.Name
}

// waitNAB polls the NonAdminBackup as the admin until ok holds.
func waitNAB(t *testing.T, s *framework.Server, namespace, name, what string, ok func(*oadpv1alpha1.NonAdminBackup) bool) *oadpv1alpha1.NonAdminBackup {
	t.Helper()
	var nab *oadpv1alpha1.NonAdminBackup
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		nab, err = s.Clientset.OadpV1alpha1().NonAdminBackups(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return ok(nab), nil
	})
	if err != nil {
		t.Fatalf("NonAdminBackup %s/%s: waiting for %s: %v; last seen %s", namespace, name, what, err, describeNAB(nab))
	}
	return nab
}

func describeNAB(nab *oadpv1alpha1.NonAdminBackup) string {
	if nab == nil {
		return "nothing"
	}
	out := fmt.Sprintf("phase %q conditions %v", nab.Status.Phase, nab.Status.Conditions)
	if vb := nab.Status.VeleroBackup; vb != nil && vb.Status != nil {
		out += fmt.Sprintf(" backup %s phase %q", vb.Name, vb.Status.Phase)
	}
	if q := nab.Status.QueueInfo; q != nil {
		out += fmt.Sprintf(" queue %d", q.EstimatedQueuePosition)
	}
	return out
}

// waitGone polls until get answers NotFound.
func waitGone(t *testing.T, what string, get func(ctx context.Context) error) {
	t.Helper()
	var last error
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		last = get(ctx)
		return apierrors.IsNotFound(last), nil
	}); err != nil {
		t.Fatalf("%s is still there: %v", what, last)
	}
}

func veleroBackupDone(nab *oadpv1alpha1.NonAdminBackup) bool {
	vb := nab.Status.VeleroBackup
	return nab.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated && vb != nil && vb.Status != nil && vb.Status.Phase.Terminal()
}

func condition(conds []metav1.Condition, t oadpv1alpha1.NonAdminCondition) metav1.Condition {
	if c := meta.FindStatusCondition(conds, string(t)); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// TestNonAdminBackupAndRestore is a tenant's whole path through the real
// server: a NonAdminBackup runs as a Velero Backup in the admin namespace
// and its status reads like the design's example, field by field; its
// log; a NonAdminRestore from it; the three delete flows and a finalizer
// removed by hand; what admission refuses.
func TestNonAdminBackupAndRestore(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	alice := newTenant(t, s, "alice", "tenant-a")
	nabs := alice.client.OadpV1alpha1().NonAdminBackups("tenant-a")
	nars := alice.client.OadpV1alpha1().NonAdminRestores("tenant-a")
	// The tenant's RoleBinding is in the namespace: the backup takes it.

	if _, err := nabs.Create(ctx, &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: "nab1"},
		Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nab := waitNAB(t, s, "tenant-a", "nab1", "its backup to finish", veleroBackupDone)

	t.Run("status as the design gives it", func(t *testing.T) {
		vb := nab.Status.VeleroBackup
		checks := []struct {
			field     string
			got, want any
		}{
			{"phase", nab.Status.Phase, oadpv1alpha1.NonAdminPhaseCreated},
			{"Accepted", condition(nab.Status.Conditions, "Accepted").Status, metav1.ConditionTrue},
			{"Accepted reason", condition(nab.Status.Conditions, "Accepted").Reason, "BackupAccepted"},
			{"Accepted message", condition(nab.Status.Conditions, "Accepted").Message, "backup accepted"},
			{"Queued", condition(nab.Status.Conditions, "Queued").Status, metav1.ConditionTrue},
			{"Queued reason", condition(nab.Status.Conditions, "Queued").Reason, "BackupScheduled"},
			{"Queued message", condition(nab.Status.Conditions, "Queued").Message, "Created Velero Backup object"},
			{"veleroBackup.name is the nacuuid", vb.Name, vb.NACUUID},
			{"veleroBackup.nacuuid prefix", strings.HasPrefix(vb.NACUUID, "tenant-a-nab1-"), true},
			{"veleroBackup.nacuuid length", len(vb.NACUUID), len("tenant-a-nab1-") + 36},
			{"veleroBackup.namespace", vb.Namespace, ns},
			{"veleroBackup.status.phase", vb.Status.Phase, velerov1.BackupPhaseCompleted},
			{"veleroBackup.spec.includedNamespaces", vb.Spec.IncludedNamespaces, []string{"tenant-a"}},
			{"queueInfo.estimatedQueuePosition", nab.Status.QueueInfo != nil && nab.Status.QueueInfo.EstimatedQueuePosition == 0, true},
			{"finalizers", nab.Finalizers, []string{oadpv1alpha1.NonAdminBackupFinalizer}},
		}
		for _, c := range checks {
			if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
				t.Errorf("%s = %v, want %v", c.field, c.got, c.want)
			}
		}
		if vb.Status.CompletionTimestamp == nil || vb.Status.StartTimestamp == nil || vb.Status.Progress == nil || vb.Status.Progress.ItemsBackedUp == 0 {
			t.Errorf("veleroBackup.status is not the backup's: %+v", vb.Status)
		}

		// The Velero Backup, as the admin sees it.
		b, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, vb.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wantLabels := map[string]string{"openshift.io/oadp": "True", "app.kubernetes.io/managed-by": "oadp-nac-controller",
			"openshift.io/oadp-nab-origin-nacuuid": vb.NACUUID}
		for k, v := range wantLabels {
			if b.Labels[k] != v {
				t.Errorf("backup label %s = %q, want %q", k, b.Labels[k], v)
			}
		}
		if b.Annotations["openshift.io/oadp-nab-origin-name"] != "nab1" || b.Annotations["openshift.io/oadp-nab-origin-namespace"] != "tenant-a" {
			t.Errorf("backup annotations %v", b.Annotations)
		}
		if b.Spec.IncludeClusterResources == nil || *b.Spec.IncludeClusterResources {
			t.Errorf("backup includeClusterResources %v, want false", b.Spec.IncludeClusterResources)
		}
		for _, r := range []string{"nonadminbackups", "nonadminrestores", "nonadminbackupstoragelocations", "clusterroles", "customresourcedefinitions"} {
			if !slices.Contains(b.Spec.ExcludedResources, r) {
				t.Errorf("backup excludedResources %v lacks %s", b.Spec.ExcludedResources, r)
			}
		}
	})

	t.Run("logs", func(t *testing.T) {
		body, err := alice.client.OadpV1alpha1().RESTClient().Get().Namespace("tenant-a").Resource("nonadminbackups").Name("nab1").SubResource("logs").DoRaw(ctx)
		if err != nil || len(body) == 0 {
			t.Errorf("nonadminbackups/nab1/logs: %v %.300q", err, body)
		}
		// As docs/tenants.md has the tenant type it.
		if out := kubectlOK(t, s, alice.kubeconfig, nil, "get", "--raw", "/apis/oadp.openshift.io/v1alpha1/namespaces/tenant-a/nonadminbackups/nab1/logs"); out != string(body) {
			t.Errorf("kubectl get --raw .../nab1/logs: %.300q, want the subresource's %.300q", out, body)
		}
		// The same as log (her role has it too), from an offset.
		rest, err := alice.client.OadpV1alpha1().RESTClient().Get().Namespace("tenant-a").Resource("nonadminbackups").Name("nab1").SubResource("log").
			Param("offset", "10").Param("follow", "true").DoRaw(ctx)
		if err != nil || len(body) <= 10 || string(rest) != string(body[10:]) {
			t.Errorf("nonadminbackups/nab1/log?offset=10&follow=true: %v %.300q, want the log from its 11th byte", err, rest)
		}
	})

	t.Run("restore", func(t *testing.T) {
		if _, err := nars.Create(ctx, &oadpv1alpha1.NonAdminRestore{ObjectMeta: metav1.ObjectMeta{Name: "nar1"},
			Spec: oadpv1alpha1.NonAdminRestoreSpec{RestoreSpec: &velerov1.RestoreSpec{BackupName: "nab1"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var nar *oadpv1alpha1.NonAdminRestore
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			nar, err = nars.Get(ctx, "nar1", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			vr := nar.Status.VeleroRestore
			return nar.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated && vr != nil && vr.Status != nil && vr.Status.Phase.Terminal(), nil
		}); err != nil {
			t.Fatalf("NonAdminRestore nar1: %v; last %+v", err, nar.Status)
		}
		if c := condition(nar.Status.Conditions, "Queued"); c.Reason != "RestoreScheduled" || c.Status != metav1.ConditionTrue {
			t.Errorf("NonAdminRestore condition Queued %+v", c)
		}
		r, err := s.Clientset.VeleroV1().Restores(ns).Get(ctx, nar.Status.VeleroRestore.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Spec.BackupName != nab.Status.VeleroBackup.Name || fmt.Sprint(r.Spec.IncludedNamespaces) != "[tenant-a]" ||
			r.Spec.IncludeClusterResources == nil || *r.Spec.IncludeClusterResources || r.Spec.NamespaceMapping != nil ||
			!slices.Contains(r.Spec.ExcludedResources, "volumesnapshotclasses") {
			t.Errorf("Velero restore spec %+v", r.Spec)
		}
		if r.Status.Phase != velerov1.RestorePhaseCompleted {
			t.Errorf("Velero restore %s: %s %v", r.Name, r.Status.Phase, r.Status.ValidationErrors)
		}
		body, err := alice.client.OadpV1alpha1().RESTClient().Get().Namespace("tenant-a").Resource("nonadminrestores").Name("nar1").SubResource("logs").DoRaw(ctx)
		if err != nil || len(body) == 0 {
			t.Errorf("nonadminrestores/nar1/logs: %v %.300q", err, body)
		}
	})

	t.Run("plain delete waits, deleteBackup deletes", func(t *testing.T) {
		if err := nabs.Delete(ctx, "nab1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waiting := waitNAB(t, s, "tenant-a", "nab1", "DeletionPending", func(n *oadpv1alpha1.NonAdminBackup) bool {
			return condition(n.Status.Conditions, "Deleting").Reason == "DeletionPending"
		})
		if c := condition(waiting.Status.Conditions, "Deleting"); waiting.Status.Phase != oadpv1alpha1.NonAdminPhaseDeleting || c.Status != metav1.ConditionTrue ||
			c.Message != "backup deletion requires setting spec.deleteBackup or spec.forceDeleteBackup to true or finalizer removal" {
			t.Errorf("after a plain delete: %s", describeNAB(waiting))
		}
		backupName := waiting.Status.VeleroBackup.Name
		if _, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, backupName, metav1.GetOptions{}); err != nil {
			t.Errorf("the backup of a NonAdminBackup waiting for its owner: %v", err)
		}
		if _, err := nabs.Patch(ctx, "nab1", types.MergePatchType, []byte(`{"spec":{"deleteBackup":true}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitGone(t, "NonAdminBackup nab1", func(ctx context.Context) error { _, err := nabs.Get(ctx, "nab1", metav1.GetOptions{}); return err })
		waitGone(t, "its Backup", func(ctx context.Context) error {
			_, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, backupName, metav1.GetOptions{})
			return err
		})
		waitGone(t, "its NonAdminRestore", func(ctx context.Context) error { _, err := nars.Get(ctx, "nar1", metav1.GetOptions{}); return err })
		reqs, err := s.Clientset.VeleroV1().DeleteBackupRequests(ns).List(ctx, metav1.ListOptions{LabelSelector: velerov1.BackupNameLabel + "=" + backupName})
		if err != nil || len(reqs.Items) != 1 || reqs.Items[0].Labels["openshift.io/oadp-nab-origin-nacuuid"] != backupName {
			t.Errorf("the DeleteBackupRequest: %v %+v", err, reqs)
		}
	})

	t.Run("forceDeleteBackup", func(t *testing.T) {
		if _, err := nabs.Create(ctx, &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: "nab2"},
			Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		created := waitNAB(t, s, "tenant-a", "nab2", "Created", func(n *oadpv1alpha1.NonAdminBackup) bool { return n.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated })
		if _, err := nabs.Patch(ctx, "nab2", types.MergePatchType, []byte(`{"spec":{"forceDeleteBackup":true}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitGone(t, "NonAdminBackup nab2", func(ctx context.Context) error { _, err := nabs.Get(ctx, "nab2", metav1.GetOptions{}); return err })
		waitGone(t, "its Backup", func(ctx context.Context) error {
			_, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, created.Status.VeleroBackup.Name, metav1.GetOptions{})
			return err
		})
	})

	t.Run("finalizer removed by hand", func(t *testing.T) {
		if _, err := nabs.Create(ctx, &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: "nab3"},
			Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		created := waitNAB(t, s, "tenant-a", "nab3", "its backup to finish", veleroBackupDone)
		if err := nabs.Delete(ctx, "nab3", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := nabs.Patch(ctx, "nab3", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitGone(t, "the Backup left by NonAdminBackup nab3", func(ctx context.Context) error {
			_, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, created.Status.VeleroBackup.Name, metav1.GetOptions{})
			return err
		})
	})

	t.Run("admission", func(t *testing.T) {
		backup := func(mutate func(*velerov1.BackupSpec)) *oadpv1alpha1.NonAdminBackup {
			spec := &velerov1.BackupSpec{}
			mutate(spec)
			return &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{GenerateName: "bad-"}, Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: spec}}
		}
		restore := func(mutate func(*velerov1.RestoreSpec)) *oadpv1alpha1.NonAdminRestore {
			spec := &velerov1.RestoreSpec{BackupName: "nab3"}
			mutate(spec)
			return &oadpv1alpha1.NonAdminRestore{ObjectMeta: metav1.ObjectMeta{GenerateName: "bad-"}, Spec: oadpv1alpha1.NonAdminRestoreSpec{RestoreSpec: spec}}
		}
		// nab3's backup is gone, but the NonAdminBackup names are what
		// admission checks: one that exists.
		if _, err := nabs.Create(ctx, &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: "nab3"},
			Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		hook := velerov1.BackupResourceHookSpec{Name: "h", IncludedNamespaces: []string{"tenant-b"}}
		cases := []struct {
			name   string
			create func() error
			field  string
			detail string
		}{
			{"backup of another namespace", func() error {
				_, err := nabs.Create(ctx, backup(func(s *velerov1.BackupSpec) { s.IncludedNamespaces = []string{"tenant-a", "tenant-b"} }), metav1.CreateOptions{})
				return err
			}, "spec.backupSpec.includedNamespaces[1]", "NonAdminBackup spec.backupSpec.includedNamespaces is restricted, can not contain namespaces other than: tenant-a"},
			{"excludedNamespaces", func() error {
				_, err := nabs.Create(ctx, backup(func(s *velerov1.BackupSpec) { s.ExcludedNamespaces = []string{"x"} }), metav1.CreateOptions{})
				return err
			}, "spec.backupSpec.excludedNamespaces", "NonAdminBackup spec.backupSpec.excludedNamespaces is restricted"},
			{"cluster resources", func() error {
				_, err := nabs.Create(ctx, backup(func(s *velerov1.BackupSpec) { s.IncludeClusterResources = ptr.To(true) }), metav1.CreateOptions{})
				return err
			}, "spec.backupSpec.includeClusterResources", "can only be set to false"},
			{"cluster-scoped resources", func() error {
				_, err := nabs.Create(ctx, backup(func(s *velerov1.BackupSpec) { s.IncludedClusterScopedResources = []string{"clusterroles"} }), metav1.CreateOptions{})
				return err
			}, "spec.backupSpec.includedClusterScopedResources", "must remain empty"},
			{"volume snapshot locations", func() error {
				_, err := nabs.Create(ctx, backup(func(s *velerov1.BackupSpec) { s.VolumeSnapshotLocations = []string{"x"} }), metav1.CreateOptions{})
				return err
			}, "spec.backupSpec.volumeSnapshotLocations", "is restricted"},
			{"resource policy of the admin namespace", func() error {
				_, err := nabs.Create(ctx, backup(func(s *velerov1.BackupSpec) {
					s.ResourcePolicy = &corev1.TypedLocalObjectReference{Kind: "configmap", Name: "policy"}
				}), metav1.CreateOptions{})
				return err
			}, "spec.backupSpec.resourcePolicy", "admin namespace"},
			{"hook in another namespace", func() error {
				_, err := nabs.Create(ctx, backup(func(s *velerov1.BackupSpec) { s.Hooks.Resources = []velerov1.BackupResourceHookSpec{hook} }), metav1.CreateOptions{})
				return err
			}, "spec.backupSpec.hooks.resources[0].includedNamespaces[0]", "can not contain namespaces other than: tenant-a"},
			{"a storage location that is no NonAdminBackupStorageLocation", func() error {
				_, err := nabs.Create(ctx, backup(func(s *velerov1.BackupSpec) { s.StorageLocation = "default" }), metav1.CreateOptions{})
				return err
			}, "spec.backupSpec.storageLocation", "NonAdminBackupStorageLocation default"},
			{"restore of an unknown NonAdminBackup", func() error {
				_, err := nars.Create(ctx, restore(func(s *velerov1.RestoreSpec) { s.BackupName = "nope" }), metav1.CreateOptions{})
				return err
			}, "spec.restoreSpec.backupName", "NonAdminBackup nope of namespace tenant-a"},
			{"restore from a schedule", func() error {
				_, err := nars.Create(ctx, restore(func(s *velerov1.RestoreSpec) { s.ScheduleName = "x" }), metav1.CreateOptions{})
				return err
			}, "spec.restoreSpec.scheduleName", "is restricted"},
			{"restore into other namespaces", func() error {
				_, err := nars.Create(ctx, restore(func(s *velerov1.RestoreSpec) { s.NamespaceMapping = map[string]string{"tenant-a": "tenant-b"} }), metav1.CreateOptions{})
				return err
			}, "spec.restoreSpec.namespaceMapping", "is restricted"},
			{"restore of included namespaces", func() error {
				_, err := nars.Create(ctx, restore(func(s *velerov1.RestoreSpec) { s.IncludedNamespaces = []string{"tenant-a"} }), metav1.CreateOptions{})
				return err
			}, "spec.restoreSpec.includedNamespaces", "is restricted"},
			{"restore of cluster resources", func() error {
				_, err := nars.Create(ctx, restore(func(s *velerov1.RestoreSpec) { s.IncludeClusterResources = ptr.To(true) }), metav1.CreateOptions{})
				return err
			}, "spec.restoreSpec.includeClusterResources", "can only be set to false"},
			{"resource modifiers of another kind than a ConfigMap", func() error {
				_, err := nars.Create(ctx, restore(func(s *velerov1.RestoreSpec) {
					s.ResourceModifier = &corev1.TypedLocalObjectReference{Kind: "Secret", Name: "m"}
				}), metav1.CreateOptions{})
				return err
			}, "spec.restoreSpec.resourceModifier.kind", `supported values: "ConfigMap"`},
			{"restore hook in another namespace", func() error {
				_, err := nars.Create(ctx, restore(func(s *velerov1.RestoreSpec) {
					s.Hooks.Resources = []velerov1.RestoreResourceHookSpec{{Name: "h", IncludedNamespaces: []string{"tenant-b"}}}
				}), metav1.CreateOptions{})
				return err
			}, "spec.restoreSpec.hooks.resources[0].includedNamespaces[0]", "can not contain namespaces other than: tenant-a"},
		}
		for _, c := range cases {
			if err := c.create(); !invalidAt(err, c.field, c.detail) {
				t.Errorf("%s: got %v, want 422 at %s saying %q", c.name, err, c.field, c.detail)
			}
		}
		list, err := s.Clientset.OadpV1alpha1().NonAdminBackups("tenant-a").List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			t.Errorf("NonAdminBackups after the refused creates: %v %d, want nab3 only", err, len(list.Items))
		}
	})
}

// waitQueueInfo polls the tenant objects' queue positions (by name; -1
// for none) until they are want.
func waitQueueInfo(t *testing.T, queue string, want map[string]int, read func() (map[string]*oadpv1alpha1.QueueInfo, error)) {
	t.Helper()
	var got map[string]int
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		infos, err := read()
		if err != nil {
			return false, err
		}
		got = map[string]int{}
		for name, q := range infos {
			got[name] = -1
			if q != nil {
				got[name] = q.EstimatedQueuePosition
			}
		}
		return fmt.Sprint(got) == fmt.Sprint(want), nil
	}); err != nil {
		t.Fatalf("%s queue positions %v, want %v (%v)", queue, got, want, err)
	}
}

// TestNonAdminQueueCancelAndRecovery: a NonAdminBackup's queue position is
// its Backup's, exact, with admin and tenant backups mixed, and follows the
// queue without the NonAdminBackups being rewritten; its owner cancels it
// through nonadminbackups/cancel, another tenant cannot; a NonAdminRestore
// of a backup not finished yet backs off and goes on by itself once it is.
// The backup engine is off: the test makes its transitions.
func TestNonAdminQueueCancelAndRecovery(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{Args: append([]string{"--concurrent-backups=1"}, withoutBackupEngine...)})
	ctx := context.Background()
	alice := newTenant(t, s, "alice", "tenant-a")
	bob := newTenant(t, s, "bob", "tenant-b")
	nabs := alice.client.OadpV1alpha1().NonAdminBackups("tenant-a")
	createNAB := func(name string) string {
		t.Helper()
		if _, err := nabs.Create(ctx, &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return waitNAB(t, s, "tenant-a", name, "its backup queued", func(n *oadpv1alpha1.NonAdminBackup) bool {
			vb := n.Status.VeleroBackup
			return n.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated && vb != nil && vb.Status != nil && vb.Status.Phase != ""
		}).Status.VeleroBackup.Name
	}
	waitPositions := func(want map[string]int) {
		t.Helper()
		waitQueueInfo(t, "backup", want, func() (map[string]*oadpv1alpha1.QueueInfo, error) {
			list, err := alice.client.OadpV1alpha1().NonAdminBackups("tenant-a").List(ctx, metav1.ListOptions{})
			out := map[string]*oadpv1alpha1.QueueInfo{}
			if err == nil {
				for _, n := range list.Items {
					out[n.Name] = n.Status.QueueInfo
				}
			}
			return out, err
		})
	}

	// admin1 runs; then q1, admin2 and q2 queue up behind it.
	createBackup(t, s, "admin1", "x")
	waitQueue(t, s, map[string]string{"admin1": "ReadyToStart/0"})
	q1 := createNAB("q1")
	createBackup(t, s, "admin2", "y")
	q2 := createNAB("q2")
	waitQueue(t, s, map[string]string{q1: "Queued/1", "admin2": "Queued/2", q2: "Queued/3"})
	waitPositions(map[string]int{"q1": 1, "q2": 3})
	// q2 as it stays while queued: its Backup's status mirrored as the
	// Backup has it now (its engine writes it once more after Created, and
	// again for each change of the Backup's status until it is Queued).
	before := waitNAB(t, s, "tenant-a", "q2", "its backup's Queued status mirrored", func(n *oadpv1alpha1.NonAdminBackup) bool {
		b, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, q2, metav1.GetOptions{})
		if err != nil || b.Status.Phase != velerov1.BackupPhaseQueued {
			return false
		}
		mirrored := n.Status.VeleroBackup.Status.DeepCopy()
		mirrored.QueuePosition, b.Status.QueuePosition = 0, 0
		return equality.Semantic.DeepEqual(*mirrored, b.Status)
	})
	if before.Status.VeleroBackup.Status.QueuePosition != 3 {
		t.Errorf("q2 status.veleroBackup.status.queuePosition = %d, want 3", before.Status.VeleroBackup.Status.QueuePosition)
	}

	// admin1 finishes: everyone moves up; q2 is not rewritten for that.
	setBackupPhase(t, s, "admin1", velerov1.BackupPhaseCompleted)
	waitQueue(t, s, map[string]string{q1: "ReadyToStart/0", "admin2": "Queued/1", q2: "Queued/2"})
	waitPositions(map[string]int{"q1": 0, "q2": 2})
	after, err := nabs.Get(ctx, "q2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("q2 was rewritten when the queue moved (resourceVersion %s → %s)", before.ResourceVersion, after.ResourceVersion)
	}

	t.Run("cancel", func(t *testing.T) {
		post := func(c versioned.Interface, namespace, name string) error {
			return c.OadpV1alpha1().RESTClient().Post().Namespace(namespace).Resource("nonadminbackups").Name(name).SubResource("cancel").Do(ctx).Error()
		}
		if err := post(bob.client, "tenant-a", "q2"); !apierrors.IsForbidden(err) {
			t.Errorf("bob cancelling alice's q2: %v, want 403", err)
		}
		if b, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, q2, metav1.GetOptions{}); err != nil || b.Spec.Cancel {
			t.Fatalf("q2's backup after bob's attempt: cancel=%v %v", b.Spec.Cancel, err)
		}
		// As docs/tenants.md has the tenant type it.
		kubectlOK(t, s, alice.kubeconfig, nil, "create", "--raw", "/apis/oadp.openshift.io/v1alpha1/namespaces/tenant-a/nonadminbackups/q2/cancel", "-f", "/dev/null")
		waitNAB(t, s, "tenant-a", "q2", "its backup cancelled", func(n *oadpv1alpha1.NonAdminBackup) bool {
			vb := n.Status.VeleroBackup
			return vb.Spec.Cancel && vb.Status.Phase != velerov1.BackupPhaseQueued
		})
		// A finished backup is not cancelled: 409, as for a Backup.
		setBackupPhase(t, s, q1, velerov1.BackupPhaseCompleted)
		if err := post(alice.client, "tenant-a", "q1"); !apierrors.IsConflict(err) {
			t.Errorf("cancelling finished q1: %v, want 409", err)
		}
	})

	t.Run("a restore waits for its backup", func(t *testing.T) {
		createNAB("q3")
		q3 := waitNAB(t, s, "tenant-a", "q3", "queued", func(n *oadpv1alpha1.NonAdminBackup) bool {
			return n.Status.VeleroBackup.Status.Phase.Pending()
		})
		nars := alice.client.OadpV1alpha1().NonAdminRestores("tenant-a")
		if _, err := nars.Create(ctx, &oadpv1alpha1.NonAdminRestore{ObjectMeta: metav1.ObjectMeta{Name: "r3"},
			Spec: oadpv1alpha1.NonAdminRestoreSpec{RestoreSpec: &velerov1.RestoreSpec{BackupName: "q3"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitNAR := func(what string, ok func(*oadpv1alpha1.NonAdminRestore) bool) *oadpv1alpha1.NonAdminRestore {
			t.Helper()
			var nar *oadpv1alpha1.NonAdminRestore
			if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
				var err error
				nar, err = nars.Get(ctx, "r3", metav1.GetOptions{})
				return err == nil && ok(nar), err
			}); err != nil {
				t.Fatalf("NonAdminRestore r3: waiting for %s: %v; last %+v", what, err, nar.Status)
			}
			return nar
		}
		off := waitNAR("BackingOff", func(n *oadpv1alpha1.NonAdminRestore) bool {
			return n.Status.Phase == oadpv1alpha1.NonAdminPhaseBackingOff
		})
		if c := condition(off.Status.Conditions, "Accepted"); c.Status != metav1.ConditionFalse || c.Reason != "InvalidRestoreSpec" ||
			!strings.Contains(c.Message, "NonAdminBackup is not ready to be restored") {
			t.Errorf("r3 Accepted %+v", c)
		}
		setBackupPhase(t, s, q3.Status.VeleroBackup.Name, velerov1.BackupPhaseCompleted)
		created := waitNAR("Created", func(n *oadpv1alpha1.NonAdminRestore) bool { return n.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated })
		if c := condition(created.Status.Conditions, "Accepted"); c.Status != metav1.ConditionTrue || c.Reason != "RestoreAccepted" {
			t.Errorf("r3 Accepted after recovery %+v", c)
		}
	})
}

// TestNonAdminRestoreQueue: restores wait in one queue, admin and tenant
// restores mixed, in the order they were made; a Restore's
// status.queuePosition and a NonAdminRestore's
// queueInfo.estimatedQueuePosition are the Restore's exact place, follows
// the queue without the NonAdminRestore being rewritten, and is 0 once the
// restore has run. The restore engine is off while the queue is read.
func TestNonAdminRestoreQueue(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{Args: []string{"--disable-controllers=restore"}})
	ctx := context.Background()
	alice := newTenant(t, s, "alice", "tenant-a")
	if _, err := alice.client.OadpV1alpha1().NonAdminBackups("tenant-a").Create(ctx, &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: "src"},
		Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	src := waitNAB(t, s, "tenant-a", "src", "its backup completed", func(n *oadpv1alpha1.NonAdminBackup) bool {
		vb := n.Status.VeleroBackup
		return vb != nil && vb.Status != nil && vb.Status.Phase == velerov1.BackupPhaseCompleted
	})
	nars := alice.client.OadpV1alpha1().NonAdminRestores("tenant-a")
	adminRestore := func(name string) {
		t.Helper()
		if _, err := s.Clientset.VeleroV1().Restores(ns).Create(ctx, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: velerov1.RestoreSpec{BackupName: src.Status.VeleroBackup.Name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tenantRestore := func(name string) {
		t.Helper()
		if _, err := nars.Create(ctx, &oadpv1alpha1.NonAdminRestore{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: oadpv1alpha1.NonAdminRestoreSpec{RestoreSpec: &velerov1.RestoreSpec{BackupName: "src"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Its Restore made before the next one is, so that the order is
		// known.
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			nar, err := nars.Get(ctx, name, metav1.GetOptions{})
			return err == nil && nar.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated, err
		}); err != nil {
			t.Fatalf("NonAdminRestore %s never Created: %v", name, err)
		}
	}
	waitPositions := func(want map[string]int) {
		t.Helper()
		waitQueueInfo(t, "restore", want, func() (map[string]*oadpv1alpha1.QueueInfo, error) {
			list, err := nars.List(ctx, metav1.ListOptions{})
			out := map[string]*oadpv1alpha1.QueueInfo{}
			if err == nil {
				for _, n := range list.Items {
					out[n.Name] = n.Status.QueueInfo
				}
			}
			return out, err
		})
	}

	adminRestore("admin1")
	tenantRestore("r1")
	adminRestore("admin2")
	tenantRestore("r2")
	waitPositions(map[string]int{"r1": 2, "r2": 4})
	// The admin's Restores say their places too.
	for name, want := range map[string]int{"admin1": 1, "admin2": 3} {
		r, err := s.Clientset.VeleroV1().Restores(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.QueuePosition != want {
			t.Errorf("restore %s: status.queuePosition %d, want %d", name, r.Status.QueuePosition, want)
		}
	}
	before, err := nars.Get(ctx, "r2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The first one leaves the queue: everyone behind moves up, and r2 is
	// not rewritten for that.
	if err := s.Clientset.VeleroV1().Restores(ns).Delete(ctx, "admin1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPositions(map[string]int{"r1": 1, "r2": 3})
	if after, err := nars.Get(ctx, "r2", metav1.GetOptions{}); err != nil || after.ResourceVersion != before.ResourceVersion {
		t.Errorf("r2 rewritten when the queue moved: resourceVersion %s → %s (%v)", before.ResourceVersion, after.ResourceVersion, err)
	}
	// The engine on: all run, and none waits.
	s.RestartWith(nil)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := s.Clientset.VeleroV1().Restores(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, r := range list.Items {
			if !r.Status.Phase.Terminal() {
				return false, nil
			}
		}
		return len(list.Items) == 3, nil
	}); err != nil {
		t.Fatalf("the queued restores never all ran: %v", err)
	}
	waitPositions(map[string]int{"r1": 0, "r2": 0})
}

// TestTenantAttackMatrix runs the tenant attack matrix against the
// standalone server, tenants authenticated by client certificates and
// authorized by the server's own RBAC.
func TestTenantAttackMatrix(t *testing.T) {
	t.Parallel()
	framework.StorageIndependent(t, "tenant isolation (admission, authorization, the engines' mirrors and the data directory)")
	s := framework.Start(t, framework.Options{})
	alice := newTenant(t, s, "alice", "tenant-a")
	bob := newTenant(t, s, "bob", "tenant-b")
	conformance.TenantAttacks(t, conformance.TenantTarget{
		Admin: s.Clientset, AdminKube: rbacClient(t, s.KubeconfigPath), AdminNamespace: ns,
		A:       conformance.Tenant{Namespace: alice.namespace, Client: alice.client, Kube: rbacClient(t, alice.kubeconfig), HTTP: httpClient(t, alice.kubeconfig)},
		B:       conformance.Tenant{Namespace: bob.namespace, Client: bob.client, Kube: rbacClient(t, bob.kubeconfig), HTTP: httpClient(t, bob.kubeconfig)},
		DataDir: s.DataDir,
	})
}

// TestNonAdminPolicy: the admin's policy in a DataProtectionApplication is
// acted on as soon as it is written: enforced values fill a tenant's spec,
// a conflicting one is refused with the enforced value, a NonAdminBackup
// admitted before the policy backs off and recovers when the policy
// changes, enable false turns tenants off; the DPAs' statuses say which is
// in effect and which fields Backstop does not act on.
func TestNonAdminPolicy(t *testing.T) {
	t.Parallel()
	off := []string{"--disable-controllers=backup,backup-sync,nonadmin-backup"}
	s := framework.Start(t, framework.Options{Args: off})
	ctx := context.Background()
	alice := newTenant(t, s, "alice", "tenant-a")
	nabs := alice.client.OadpV1alpha1().NonAdminBackups("tenant-a")
	create := func(name string, ttl time.Duration) error {
		_, err := nabs.Create(ctx, &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{TTL: metav1.Duration{Duration: ttl}}}}, metav1.CreateOptions{})
		return err
	}
	// Admitted while there is no policy; not taken yet (engine off).
	if err := create("early", time.Hour); err != nil {
		t.Fatal(err)
	}
	dpas := s.Clientset.OadpV1alpha1().DataProtectionApplications(ns)
	if _, err := dpas.Create(ctx, &oadpv1alpha1.DataProtectionApplication{ObjectMeta: metav1.ObjectMeta{Name: "dpa"},
		Spec: oadpv1alpha1.DataProtectionApplicationSpec{
			Configuration: &runtime.RawExtension{Raw: []byte(`{"velero":{"defaultPlugins":["aws"]}}`)},
			NonAdmin: &oadpv1alpha1.NonAdmin{EnforceBackupSpec: &velerov1.BackupSpec{
				TTL: metav1.Duration{Duration: 3 * time.Hour}, SnapshotVolumes: ptr.To(false)}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := create("conflicting", time.Hour); !invalidAt(err, "spec.backupSpec.ttl", `the administrator has restricted spec.backupSpec.ttl field value to "3h0m0s"`) {
		t.Errorf("a NonAdminBackup against the policy: %v, want 422 naming the enforced value", err)
	}
	s.RestartWith(withoutBackupEngine)

	// The early one backs off: the policy refuses its ttl.
	early := waitNAB(t, s, "tenant-a", "early", "BackingOff", func(n *oadpv1alpha1.NonAdminBackup) bool {
		return n.Status.Phase == oadpv1alpha1.NonAdminPhaseBackingOff
	})
	if c := condition(early.Status.Conditions, "Accepted"); c.Reason != "InvalidBackupSpec" || !strings.Contains(c.Message, "the administrator has restricted spec.backupSpec.ttl") {
		t.Errorf("early: Accepted %+v", c)
	}
	// One without a ttl gets the enforced values.
	if err := create("filled", 0); err != nil {
		t.Fatal(err)
	}
	filled := waitNAB(t, s, "tenant-a", "filled", "Created", func(n *oadpv1alpha1.NonAdminBackup) bool { return n.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated })
	b, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, filled.Status.VeleroBackup.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Spec.TTL.Duration != 3*time.Hour || b.Spec.SnapshotVolumes == nil || *b.Spec.SnapshotVolumes {
		t.Errorf("the Velero backup of filled: ttl %s snapshotVolumes %v, want the enforced 3h and false", b.Spec.TTL.Duration, b.Spec.SnapshotVolumes)
	}

	// The DPA's status.
	waitDPA := func(name, what string, ok func(*oadpv1alpha1.DataProtectionApplication) bool) *oadpv1alpha1.DataProtectionApplication {
		t.Helper()
		var d *oadpv1alpha1.DataProtectionApplication
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			d, err = dpas.Get(ctx, name, metav1.GetOptions{})
			return err == nil && ok(d), err
		}); err != nil {
			t.Fatalf("DataProtectionApplication %s: waiting for %s: %v; last %+v", name, what, err, d.Status)
		}
		return d
	}
	d := waitDPA("dpa", "Reconciled", func(d *oadpv1alpha1.DataProtectionApplication) bool {
		return condition(d.Status.Conditions, "Reconciled").Status == metav1.ConditionTrue
	})
	if c := condition(d.Status.Conditions, "NotActedOn"); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "spec.configuration") {
		t.Errorf("dpa NotActedOn %+v, want spec.configuration named", c)
	}
	if _, err := dpas.Create(ctx, &oadpv1alpha1.DataProtectionApplication{ObjectMeta: metav1.ObjectMeta{Name: "dpa2"},
		Spec: oadpv1alpha1.DataProtectionApplicationSpec{NonAdmin: &oadpv1alpha1.NonAdmin{}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDPA("dpa2", "NotInEffect", func(d *oadpv1alpha1.DataProtectionApplication) bool {
		c := condition(d.Status.Conditions, "Reconciled")
		return c.Status == metav1.ConditionFalse && c.Reason == "NotInEffect" && strings.Contains(c.Message, "dpa")
	})

	// The policy relaxed: early goes on by itself, with its own ttl.
	if _, err := dpas.Patch(ctx, "dpa", types.MergePatchType, []byte(`{"spec":{"nonAdmin":{"enforceBackupSpec":{"ttl":null}}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	early = waitNAB(t, s, "tenant-a", "early", "Created", func(n *oadpv1alpha1.NonAdminBackup) bool { return n.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated })
	if early.Status.VeleroBackup.Spec.TTL.Duration != time.Hour {
		t.Errorf("early's backup ttl %s, want its own 1h", early.Status.VeleroBackup.Spec.TTL.Duration)
	}

	// Tenants turned off: refused at once.
	if _, err := dpas.Patch(ctx, "dpa", types.MergePatchType, []byte(`{"spec":{"nonAdmin":{"enable":false}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := create("late", 0); !invalidAt(err, "spec.backupSpec", "disabled by the administrator") {
		t.Errorf("a NonAdminBackup with tenants turned off: %v, want 422", err)
	}
}

// TestNonAdminStorageLocationStandalone: a standalone server serves no
// Secrets, so a tenant's storage location cannot get its credentials: it
// is accepted and approved (approval not required), then backs off with
// SecretSynced False saying why, and nothing is made in the admin
// namespace. The whole flow runs in a cluster
// (test/integration/cluster TestTenantStorageLocations).
func TestNonAdminStorageLocationStandalone(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{Args: withoutBackupEngine})
	ctx := context.Background()
	alice := newTenant(t, s, "alice", "tenant-a")
	if _, err := alice.client.OadpV1alpha1().NonAdminBackupStorageLocations("tenant-a").Create(ctx, &oadpv1alpha1.NonAdminBackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Name: "mine"},
		Spec: oadpv1alpha1.NonAdminBackupStorageLocationSpec{BackupStorageLocationSpec: &velerov1.BackupStorageLocationSpec{
			Provider: "aws", Credential: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "cloud"},
			StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: "team"}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var l *oadpv1alpha1.NonAdminBackupStorageLocation
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		l, err = s.Clientset.OadpV1alpha1().NonAdminBackupStorageLocations("tenant-a").Get(ctx, "mine", metav1.GetOptions{})
		return err == nil && l.Status.Phase == oadpv1alpha1.NonAdminPhaseBackingOff, err
	}); err != nil {
		t.Fatalf("the location did not back off: %v (%+v)", err, l)
	}
	if c := condition(l.Status.Conditions, oadpv1alpha1.NonAdminBSLConditionSecretSynced); c.Status != metav1.ConditionFalse || c.Message != nonadmin.MessageNoSecrets {
		t.Errorf("SecretSynced %+v, want False: %s", c, nonadmin.MessageNoSecrets)
	}
	if c := condition(l.Status.Conditions, oadpv1alpha1.NonAdminBSLConditionApproved); c.Status != metav1.ConditionTrue {
		t.Errorf("ClusterAdminApproved %+v, want True (approval not required)", c)
	}
	id := l.Status.VeleroBackupStorageLocation.NACUUID
	req, err := s.Clientset.OadpV1alpha1().NonAdminBackupStorageLocationRequests(ns).Get(ctx, id, metav1.GetOptions{})
	if err != nil || req.Status.Phase != oadpv1alpha1.NonAdminBSLRequestPhaseApproved {
		t.Errorf("request %s: %v %+v", id, err, req)
	}
	if _, err := s.Clientset.VeleroV1().BackupStorageLocations(ns).Get(ctx, id, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Velero location was made: %v", err)
	}
	// A backup there is refused at admission: the location is not ready.
	_, err = alice.client.OadpV1alpha1().NonAdminBackups("tenant-a").Create(ctx, &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: "there"},
		Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{StorageLocation: "mine"}}}, metav1.CreateOptions{})
	if !invalidAt(err, "spec.backupSpec.storageLocation", "not ready") {
		t.Errorf("a backup to a location that backs off: %v, want 422", err)
	}
}

// TestNonAdminRestoreRights: a NonAdminRestore restores with the rights of
// the user admission recorded as its creator, and with nothing else: one
// made by the server's own identities records no one and restores
// nothing (it backs off, saying why); one made by a cluster admin records
// the admin without system:masters; a tenant's records the tenant, whatever
// annotation it sent.
func TestNonAdminRestoreRights(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	alice := newTenant(t, s, "alice", "tenant-a")
	finishedNAB(t, s, alice.client, "tenant-a", "nab1")
	narOf := func(name string) *oadpv1alpha1.NonAdminRestore {
		return &oadpv1alpha1.NonAdminRestore{ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{oadpv1alpha1.CreatedByAnnotation: `{"username":"system:apiserver","groups":["system:masters"]}`}},
			Spec: oadpv1alpha1.NonAdminRestoreSpec{RestoreSpec: &velerov1.RestoreSpec{BackupName: "nab1"}}}
	}
	// restoreAs waits for the Velero Restore of a NonAdminRestore and
	// returns whom it restores as.
	restoreAs := func(t *testing.T, name string) restoreas.User {
		t.Helper()
		var as restoreas.User
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			nar, err := s.Clientset.OadpV1alpha1().NonAdminRestores("tenant-a").Get(ctx, name, metav1.GetOptions{})
			if err != nil || nar.Status.VeleroRestore == nil || nar.Status.Phase != oadpv1alpha1.NonAdminPhaseCreated {
				return false, err
			}
			r, err := s.Clientset.VeleroV1().Restores(ns).Get(ctx, nar.Status.VeleroRestore.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			as, _, err = restoreas.Of(r.Annotations)
			return true, err
		}); err != nil {
			t.Fatalf("the restore of NonAdminRestore %s: %v", name, err)
		}
		return as
	}

	t.Run("made by the server's engines: no creator, nothing restored", func(t *testing.T) {
		nars := s.EngineClientset().OadpV1alpha1().NonAdminRestores("tenant-a")
		if _, err := nars.Create(ctx, narOf("by-engine"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var nar *oadpv1alpha1.NonAdminRestore
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			nar, err = nars.Get(ctx, "by-engine", metav1.GetOptions{})
			return err == nil && nar.Status.Phase == oadpv1alpha1.NonAdminPhaseBackingOff, err
		}); err != nil {
			t.Fatalf("NonAdminRestore by-engine did not back off: %v; last %+v", err, nar.Status)
		}
		if _, ok := nar.Annotations[oadpv1alpha1.CreatedByAnnotation]; ok {
			t.Errorf("a creator recorded for the server's own request: %s", nar.Annotations[oadpv1alpha1.CreatedByAnnotation])
		}
		if c := condition(nar.Status.Conditions, oadpv1alpha1.NonAdminConditionAccepted); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "no record of the user who created it") {
			t.Errorf("condition Accepted %+v", c)
		}
		if nar.Status.VeleroRestore != nil && nar.Status.VeleroRestore.Name != "" {
			if _, err := s.Clientset.VeleroV1().Restores(ns).Get(ctx, nar.Status.VeleroRestore.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("a Velero Restore was made for it: %v", err)
			}
		}
	})
	t.Run("made by a cluster admin: without system:masters", func(t *testing.T) {
		if _, err := s.Clientset.OadpV1alpha1().NonAdminRestores("tenant-a").Create(ctx, narOf("by-admin"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		as := restoreAs(t, "by-admin")
		if as.Username == "system:apiserver" || slices.Contains(as.Groups, "system:masters") {
			t.Errorf("the admin's NonAdminRestore restores as %+v", as)
		}
	})
	t.Run("made by the tenant: the tenant, whatever it sent", func(t *testing.T) {
		if _, err := alice.client.OadpV1alpha1().NonAdminRestores("tenant-a").Create(ctx, narOf("by-alice"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if as := restoreAs(t, "by-alice"); as.Username != "alice" || slices.Contains(as.Groups, "system:masters") {
			t.Errorf("alice's NonAdminRestore restores as %+v", as)
		}
	})
}

// httpClient fetches URLs with a kubeconfig's credentials and CA.
func httpClient(t *testing.T, kubeconfig string) *http.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAdminRestoreOfTenantBackup: a backup made for a tenant holds what the
// tenant controls, so an admin's restore of it runs as the tenant would:
// its namespace only, no cluster-scoped items, with the rights of the user
// who made it (recorded at admission); mapped elsewhere, it writes nothing
// there. The annotation backstop.io/restore-with-full-rights=true restores
// it with the server's rights, and the log warns of it; a tenant's backup
// that records no user who made it is not restored without it.
func TestAdminRestoreOfTenantBackup(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	alice := newTenant(t, s, "alice", "tenant-a")
	createTracker(t, s, "tenant-a", "t1", nil)
	byAlice := finishedNAB(t, s, alice.client, "tenant-a", "by-alice")
	byServer := finishedNAB(t, s, s.EngineClientset(), "tenant-a", "by-server")
	b, err := s.Clientset.VeleroV1().Backups(ns).Get(ctx, byAlice, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if as, _, err := restoreas.Of(map[string]string{restoreas.Annotation: b.Annotations[oadpv1alpha1.CreatedByAnnotation]}); err != nil || as.Username != "alice" {
		t.Fatalf("the backup records its maker as %q (%v), want alice", b.Annotations[oadpv1alpha1.CreatedByAnnotation], err)
	}
	restore := func(name, backup string, fullRights bool) *velerov1.Restore {
		t.Helper()
		r := &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: velerov1.RestoreSpec{BackupName: backup, NamespaceMapping: map[string]string{"tenant-a": "elsewhere-" + name}}}
		if fullRights {
			r.Annotations = map[string]string{oadpv1alpha1.FullRightsAnnotation: "true"}
		}
		if _, err := s.Clientset.VeleroV1().Restores(ns).Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return waitRestore(t, s, name)
	}
	tracker := func(namespace string) error {
		_, err := s.Clientset.BackupV1alpha1().VirtualMachineBackupTrackers(namespace).Get(ctx, "t1", metav1.GetOptions{})
		return err
	}

	t.Run("as the tenant", func(t *testing.T) {
		r := restore("as-tenant", byAlice, false)
		if err := tracker("elsewhere-as-tenant"); !apierrors.IsNotFound(err) {
			t.Errorf("the tenant's backup restored into another namespace: %v (restore %s %q)", err, r.Status.Phase, r.Status.FailureReason)
		}
		if logs := restoreLogs(t, s, "as-tenant"); !strings.Contains(logs, "as the tenant would") || !strings.Contains(logs, "alice") {
			t.Errorf("the restore log does not say it ran as alice:\n%s", logs)
		}
	})
	t.Run("with full rights", func(t *testing.T) {
		r := restore("full-rights", byAlice, true)
		if err := tracker("elsewhere-full-rights"); err != nil {
			t.Errorf("restored with full rights: %v (restore %s %q)", err, r.Status.Phase, r.Status.FailureReason)
		}
		if logs := restoreLogs(t, s, "full-rights"); !strings.Contains(logs, "full rights") {
			t.Errorf("the restore log does not warn of full rights:\n%s", logs)
		}
	})
	t.Run("no maker recorded", func(t *testing.T) {
		r := restore("no-maker", byServer, false)
		if r.Status.Phase != velerov1.RestorePhaseFailed || !strings.Contains(r.Status.FailureReason, "records no user") {
			t.Errorf("restore of a tenant backup without a maker: %s %q, want Failed", r.Status.Phase, r.Status.FailureReason)
		}
		if err := tracker("elsewhere-no-maker"); !apierrors.IsNotFound(err) {
			t.Errorf("restored: %v", err)
		}
	})
}

// TestTenantLimits: what one tenant may ask of the server is bounded, by
// default and by the DataProtectionApplication's spec.nonAdmin.tenantLimits:
// a schedule running more often than minScheduleInterval, a location
// validated more often than minValidationFrequency, one NonAdminBackup,
// NonAdminSchedule, NonAdminBackupStorageLocation, NonAdminDownloadRequest,
// VirtualMachineBackup or VirtualMachineBackupTracker past the namespace's
// maximum are refused at admission (422) with the field path and the
// limit.
func TestTenantLimits(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{Args: []string{"--disable-controllers=backup"}})
	ctx := context.Background()
	alice := newTenant(t, s, "alice", "tenant-a")
	oadp := alice.client.OadpV1alpha1()
	schedule := func(name, cron string) error {
		_, err := oadp.NonAdminSchedules("tenant-a").Create(ctx, &oadpv1alpha1.NonAdminSchedule{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: oadpv1alpha1.NonAdminScheduleSpec{Schedule: cron, Template: oadpv1alpha1.NonAdminScheduleTemplate{BackupSpec: &velerov1.BackupSpec{}}}}, metav1.CreateOptions{})
		return err
	}
	backup := func(name string) error {
		_, err := oadp.NonAdminBackups("tenant-a").Create(ctx, &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{}}}, metav1.CreateOptions{})
		return err
	}

	t.Run("defaults", func(t *testing.T) {
		if err := schedule("every-5m", "*/5 * * * *"); !invalidAt(err, "spec.schedule", "minScheduleInterval") {
			t.Errorf("a schedule every 5 minutes: %v, want 422 at spec.schedule", err)
		}
		_, err := oadp.NonAdminBackupStorageLocations("tenant-a").Create(ctx, &oadpv1alpha1.NonAdminBackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: "busy"},
			Spec: oadpv1alpha1.NonAdminBackupStorageLocationSpec{BackupStorageLocationSpec: &velerov1.BackupStorageLocationSpec{Provider: "aws",
				StorageType:         velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: "b"}},
				Credential:          &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "cloud"},
				ValidationFrequency: &metav1.Duration{Duration: time.Second}}}}, metav1.CreateOptions{})
		if !invalidAt(err, "spec.backupStorageLocationSpec.validationFrequency", "minValidationFrequency") {
			t.Errorf("a location validated every second: %v, want 422 at its validationFrequency", err)
		}
	})
	t.Run("the admin's limits", func(t *testing.T) {
		if _, err := s.Clientset.OadpV1alpha1().DataProtectionApplications(ns).Create(ctx, &oadpv1alpha1.DataProtectionApplication{ObjectMeta: metav1.ObjectMeta{Name: "dpa"},
			Spec: oadpv1alpha1.DataProtectionApplicationSpec{NonAdmin: &oadpv1alpha1.NonAdmin{TenantLimits: &oadpv1alpha1.TenantLimits{
				MinScheduleInterval: &metav1.Duration{Duration: 2 * time.Hour}, MaxBackupsPerNamespace: utilptr.To[int32](2), MaxSchedulesPerNamespace: utilptr.To[int32](1),
				MaxLocationsPerNamespace: utilptr.To[int32](1), MaxDownloadRequestsPerNamespace: utilptr.To[int32](1),
				MaxVirtualMachineBackupsPerNamespace: utilptr.To[int32](1), MaxVirtualMachineBackupTrackersPerNamespace: utilptr.To[int32](1)}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := schedule("hourly", "@hourly"); !invalidAt(err, "spec.schedule", "2h0m0s") {
			t.Errorf("an hourly schedule under a 2h minimum: %v, want 422", err)
		}
		if err := schedule("daily", "@daily"); err != nil {
			t.Fatalf("a daily schedule: %v", err)
		}
		if err := schedule("daily-2", "@daily"); !invalidAt(err, "metadata.namespace", "holds 1 NonAdminSchedules") {
			t.Errorf("a second schedule past maxSchedulesPerNamespace 1: %v, want 422 at metadata.namespace", err)
		}
		for _, name := range []string{"b1", "b2"} {
			if err := backup(name); err != nil {
				t.Fatalf("backup %s: %v", name, err)
			}
		}
		if err := backup("b3"); !invalidAt(err, "metadata.namespace", "holds 2 NonAdminBackups") {
			t.Errorf("a third backup past maxBackupsPerNamespace 2: %v, want 422 at metadata.namespace", err)
		}
		location := func(name string) error {
			_, err := oadp.NonAdminBackupStorageLocations("tenant-a").Create(ctx, &oadpv1alpha1.NonAdminBackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: oadpv1alpha1.NonAdminBackupStorageLocationSpec{BackupStorageLocationSpec: &velerov1.BackupStorageLocationSpec{Provider: "aws",
					StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: "b"}},
					Credential:  &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "cloud"}}}}, metav1.CreateOptions{})
			return err
		}
		if err := location("l1"); err != nil {
			t.Fatalf("a location: %v", err)
		}
		if err := location("l2"); !invalidAt(err, "metadata.namespace", "holds 1 NonAdminBackupStorageLocations") {
			t.Errorf("a second location past maxLocationsPerNamespace 1: %v, want 422 at metadata.namespace", err)
		}
		download := func(name string) error {
			_, err := oadp.NonAdminDownloadRequests("tenant-a").Create(ctx, &oadpv1alpha1.NonAdminDownloadRequest{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: oadpv1alpha1.NonAdminDownloadRequestSpec{Target: velerov1.DownloadTarget{Kind: velerov1.DownloadTargetKindBackupLog, Name: "b1"}}}, metav1.CreateOptions{})
			return err
		}
		if err := download("d1"); err != nil {
			t.Fatalf("a download request: %v", err)
		}
		if err := download("d2"); !invalidAt(err, "metadata.namespace", "holds 1 NonAdminDownloadRequests") {
			t.Errorf("a second download request past maxDownloadRequestsPerNamespace 1: %v, want 422 at metadata.namespace", err)
		}
		// VM backups and trackers are made by the namespace's users
		// directly (edit), and count the same way.
		vms := alice.client.BackupV1alpha1()
		tracker := func(name string) error {
			_, err := vms.VirtualMachineBackupTrackers("tenant-a").Create(ctx, &kvbackupv1alpha1.VirtualMachineBackupTracker{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: kvbackupv1alpha1.VirtualMachineBackupTrackerSpec{Source: corev1.TypedLocalObjectReference{APIGroup: utilptr.To("kubevirt.io"), Kind: "VirtualMachine", Name: "vm-" + name}}},
				metav1.CreateOptions{})
			return err
		}
		if err := tracker("t1"); err != nil {
			t.Fatalf("a tracker: %v", err)
		}
		if err := tracker("t2"); !invalidAt(err, "metadata.namespace", "holds 1 VirtualMachineBackupTrackers") {
			t.Errorf("a second tracker past maxVirtualMachineBackupTrackersPerNamespace 1: %v, want 422 at metadata.namespace", err)
		}
		vmBackup := func(name string) error {
			_, err := vms.VirtualMachineBackups("tenant-a").Create(ctx, &kvbackupv1alpha1.VirtualMachineBackup{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: kvbackupv1alpha1.VirtualMachineBackupSpec{Source: corev1.TypedLocalObjectReference{APIGroup: utilptr.To("kubevirt.io"), Kind: "VirtualMachine", Name: "vm"},
					Mode: utilptr.To(kvbackupv1alpha1.PushMode), PvcName: utilptr.To("backups")}}, metav1.CreateOptions{})
			return err
		}
		if err := vmBackup("vb1"); err != nil {
			t.Fatalf("a VM backup: %v", err)
		}
		if err := vmBackup("vb2"); !invalidAt(err, "metadata.namespace", "holds 1 VirtualMachineBackups") {
			t.Errorf("a second VM backup past maxVirtualMachineBackupsPerNamespace 1: %v, want 422 at metadata.namespace", err)
		}
	})
}
