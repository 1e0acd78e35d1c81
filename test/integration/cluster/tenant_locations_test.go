package cluster

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	"github.com/backstop-io/backstop/pkg/apis/restoreas"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/archive/archivetest"
	"github.com/backstop-io/backstop/pkg/encryption"
	"github.com/backstop-io/backstop/test/integration/conformance"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestTenantStorageLocations: a tenant's own object storage, as the OADP
// non-admin design has it, through kube-apiserver with a real S3 server.
// With approval required, a NonAdminBackupStorageLocation waits for the
// admin's decision on its request; approved, the tenant's credential
// Secret is copied into the admin namespace and a Velero location made
// that stores under the tenant's own prefix; a backup goes there; the
// admin withdrawing approval removes the location and the copy, rejecting
// says so, deleting the location removes its request.
func TestTenantStorageLocations(t *testing.T) {
	t.Parallel()
	c := framework.StartCluster(t)
	srv := framework.StartS3(t)
	srv.MakeBucket(t, "team")
	ctx := context.Background()
	alice := tenantOf(t, c, "alice", "tenant-a")
	ns := alice.Namespace
	if _, err := c.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	oadp := c.Backstop.OadpV1alpha1()
	if _, err := oadp.DataProtectionApplications(adminNamespace).Create(ctx, &oadpv1alpha1.DataProtectionApplication{
		ObjectMeta: metav1.ObjectMeta{Name: "dpa"},
		Spec: oadpv1alpha1.DataProtectionApplicationSpec{NonAdmin: &oadpv1alpha1.NonAdmin{Enable: ptr(true), RequireApprovalForBSL: ptr(true),
			BackupSyncPeriod: &metav1.Duration{Duration: 2 * time.Second}, GarbageCollectionPeriod: &metav1.Duration{Duration: 5 * time.Second},
			// The S3 server listens on loopback, which tenants' locations
			// reach only where the admin allows it.
			AllowedLocationEndpoints: []string{"127.0.0.1"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The tenant's Secret and location, as the tenant.
	creds := fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", srv.AccessKey, srv.SecretKey)
	if _, err := alice.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		Data: map[string][]byte{"cloud": []byte(creds)}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the tenant's Secret: %v", err)
	}
	tenantLocations := alice.Client.OadpV1alpha1().NonAdminBackupStorageLocations(ns)
	newLocation := func(t *testing.T, name string) {
		t.Helper()
		if _, err := tenantLocations.Create(ctx, &oadpv1alpha1.NonAdminBackupStorageLocation{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: oadpv1alpha1.NonAdminBackupStorageLocationSpec{BackupStorageLocationSpec: &velerov1.BackupStorageLocationSpec{
				Provider: "aws", Config: map[string]string{"s3Url": srv.Endpoint, "region": "us-east-1", "s3ForcePathStyle": "true"},
				Credential:  &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "cloud"},
				StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: "team", Prefix: "apps"}},
			}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("the tenant's location %s: %v", name, err)
		}
	}
	newLocation(t, "mine")
	locationNamed := func(t *testing.T, ctx context.Context, name string) *oadpv1alpha1.NonAdminBackupStorageLocation {
		l, err := oadp.NonAdminBackupStorageLocations(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	location := func(t *testing.T, ctx context.Context) *oadpv1alpha1.NonAdminBackupStorageLocation {
		return locationNamed(t, ctx, "mine")
	}
	approval := func(l *oadpv1alpha1.NonAdminBackupStorageLocation) string {
		if c := meta.FindStatusCondition(l.Status.Conditions, string(oadpv1alpha1.NonAdminBSLConditionApproved)); c != nil {
			return string(c.Status) + "/" + c.Reason
		}
		return ""
	}
	waitApprovalOf := func(t *testing.T, name, want string) *oadpv1alpha1.NonAdminBackupStorageLocation {
		t.Helper()
		var l *oadpv1alpha1.NonAdminBackupStorageLocation
		poll(t, name+" ClusterAdminApproved "+want, 2*time.Minute, func(ctx context.Context) (bool, error) {
			l = locationNamed(t, ctx, name)
			return approval(l) == want, nil
		})
		return l
	}
	waitApproval := func(t *testing.T, want string) *oadpv1alpha1.NonAdminBackupStorageLocation {
		t.Helper()
		return waitApprovalOf(t, "mine", want)
	}
	requests := oadp.NonAdminBackupStorageLocationRequests(adminNamespace)
	assertNoAdminSide := func(t *testing.T, when, id string) {
		t.Helper()
		if _, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Get(ctx, id, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: Velero location %s: %v, want NotFound", when, id, err)
		}
		if _, err := c.Kube.CoreV1().Secrets(adminNamespace).Get(ctx, id, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: Secret copy %s: %v, want NotFound", when, id, err)
		}
	}
	nab := func(name string) error {
		_, err := alice.Client.OadpV1alpha1().NonAdminBackups(ns).Create(ctx, &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{StorageLocation: "mine"}}}, metav1.CreateOptions{})
		return err
	}
	decideOn := func(t *testing.T, id string, d oadpv1alpha1.NonAdminBSLRequest) {
		t.Helper()
		if _, err := requests.Patch(ctx, id, types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"approvalDecision":%q}}`, d)), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// What the steps share: the location's NACUUID, the backup made on it
	// and its directory in the bucket, a backup planted there, the second
	// tenant.
	var (
		id, made, planted, backupsDir string
		bob                           conformance.Tenant
	)
	decide := func(t *testing.T, d oadpv1alpha1.NonAdminBSLRequest) { t.Helper(); decideOn(t, id, d) }
	step := inOrder(t)

	step("pending: a request in the admin namespace, nothing made", func(t *testing.T) {
		l := waitApproval(t, "False/"+oadpv1alpha1.ReasonBslSpecApprovalPending)
		if l.Status.Phase != oadpv1alpha1.NonAdminPhaseNew || l.Status.VeleroBackupStorageLocation == nil {
			t.Fatalf("pending location: phase %q, %+v", l.Status.Phase, l.Status.VeleroBackupStorageLocation)
		}
		id = l.Status.VeleroBackupStorageLocation.NACUUID
		var req *oadpv1alpha1.NonAdminBackupStorageLocationRequest
		poll(t, "the request's status", time.Minute, func(ctx context.Context) (bool, error) {
			var err error
			req, err = requests.Get(ctx, id, metav1.GetOptions{})
			return err == nil && req.Status.Phase == oadpv1alpha1.NonAdminBSLRequestPhasePending && req.Status.SourceNonAdminBSL != nil, nil
		})
		if src := req.Status.SourceNonAdminBSL; src.Name != "mine" || src.Namespace != ns || src.RequestedSpec == nil || src.RequestedSpec.ObjectStorage.Bucket != "team" {
			t.Errorf("the request says %+v", src)
		}
		assertNoAdminSide(t, "pending", id)
		if err := nab("too-early"); !conformance.InvalidAt(err, "spec.backupSpec.storageLocation", "not approved") {
			t.Errorf("a backup to a location not approved: %v, want 422 at spec.backupSpec.storageLocation", err)
		}
		// Only the server makes requests; tenants never see them.
		if _, err := requests.Create(ctx, &oadpv1alpha1.NonAdminBackupStorageLocationRequest{ObjectMeta: metav1.ObjectMeta{Name: "by-hand"}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("the admin making a request: %v, want 422", err)
		}
		if _, err := alice.Client.OadpV1alpha1().NonAdminBackupStorageLocationRequests(adminNamespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the tenant listing requests: %v, want 403", err)
		}
	})

	step("approved: the Secret copied, the location made under the tenant's prefix, Available, mirrored", func(t *testing.T) {
		decide(t, oadpv1alpha1.NonAdminBSLRequestApproved)
		var l *oadpv1alpha1.NonAdminBackupStorageLocation
		poll(t, "the location Created and Available", 2*time.Minute, func(ctx context.Context) (bool, error) {
			l = location(t, ctx)
			v := l.Status.VeleroBackupStorageLocation
			return l.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated && v.Status != nil && v.Status.Phase == velerov1.BackupStorageLocationPhaseAvailable, nil
		})
		for _, ct := range []oadpv1alpha1.NonAdminCondition{oadpv1alpha1.NonAdminConditionAccepted, oadpv1alpha1.NonAdminBSLConditionApproved,
			oadpv1alpha1.NonAdminBSLConditionSecretSynced, oadpv1alpha1.NonAdminBSLConditionBSLSynced} {
			if !meta.IsStatusConditionTrue(l.Status.Conditions, string(ct)) {
				t.Errorf("condition %s not True: %+v", ct, l.Status.Conditions)
			}
		}
		bsl, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Get(ctx, id, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if bsl.Spec.ObjectStorage.Prefix != ns+"/apps" || bsl.Spec.Credential.Name != id || bsl.Spec.Credential.Key != "cloud" || bsl.Spec.Default {
			t.Errorf("Velero location: prefix %q credential %+v default %v", bsl.Spec.ObjectStorage.Prefix, bsl.Spec.Credential, bsl.Spec.Default)
		}
		secret, err := c.Kube.CoreV1().Secrets(adminNamespace).Get(ctx, id, metav1.GetOptions{})
		if err != nil || string(secret.Data["cloud"]) != creds {
			t.Fatalf("the Secret copy: %v", err)
		}
		if r, _ := requests.Get(ctx, id, metav1.GetOptions{}); r.Status.Phase != oadpv1alpha1.NonAdminBSLRequestPhaseApproved {
			t.Errorf("request phase %q after approval", r.Status.Phase)
		}
	})

	step("a backup there lands under the tenant's prefix; its log opens through a link; the tenant's restore has the tenant's rights", func(t *testing.T) {
		// A RoleBinding the admin made in the namespace (the tenant could not
		// have): in the backup, it must not come back through the tenant's
		// restore once the admin removed it.
		if _, err := c.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "extra-admin"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// A backup there lands under the tenant's prefix.
		if err := nab("to-mine"); err != nil {
			t.Fatalf("a backup to the approved location: %v", err)
		}
		var backup *oadpv1alpha1.NonAdminBackup
		defer func() {
			if backup != nil && backup.Status.VeleroBackup != nil {
				made = backup.Status.VeleroBackup.Name
			}
		}()
		poll(t, "the backup to the tenant's location", 3*time.Minute, func(ctx context.Context) (bool, error) {
			var err error
			backup, err = oadp.NonAdminBackups(ns).Get(ctx, "to-mine", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			vb := backup.Status.VeleroBackup
			return vb != nil && vb.Status != nil && vb.Status.Phase.Terminal(), nil
		})
		if vb := backup.Status.VeleroBackup; vb.Status.Phase != velerov1.BackupPhaseCompleted || vb.Spec.StorageLocation != id {
			t.Fatalf("backup to the tenant's location: %s on %q (%s)", vb.Status.Phase, vb.Spec.StorageLocation, vb.Status.FailureReason)
		}
		dir := filepath.Join(srv.Root, "team", ns, "apps", "backups", backup.Status.VeleroBackup.Name)
		if entries, err := os.ReadDir(dir); err != nil || len(entries) == 0 {
			t.Errorf("nothing under the tenant's prefix %s: %v", dir, err)
		}
		// A download link to the log of a backup on the tenant's location.
		if _, err := alice.Client.OadpV1alpha1().NonAdminDownloadRequests(ns).Create(ctx, &oadpv1alpha1.NonAdminDownloadRequest{ObjectMeta: metav1.ObjectMeta{Name: "mine-log"},
			Spec: oadpv1alpha1.NonAdminDownloadRequestSpec{Target: velerov1.DownloadTarget{Kind: velerov1.DownloadTargetKindBackupLog, Name: "to-mine"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var link string
		poll(t, "the link to the log on the tenant's location", time.Minute, func(ctx context.Context) (bool, error) {
			nadr, err := alice.Client.OadpV1alpha1().NonAdminDownloadRequests(ns).Get(ctx, "mine-log", metav1.GetOptions{})
			if err != nil || nadr.Status.Phase != oadpv1alpha1.NonAdminPhaseCreated {
				return false, err
			}
			link = nadr.Status.VeleroDownloadRequest.Status.DownloadURL
			return link != "", nil
		})
		resp, err := anonymousClient(t, c).Get(link)
		if err != nil {
			t.Fatal(err)
		}
		logs, err := readGzip(resp)
		if err != nil || !strings.Contains(logs, "Backup completed") {
			t.Errorf("the log of the backup on the tenant's location, through its link: %v\n%.300s", err, logs)
		}

		// The tenant's restore writes with the tenant's rights: what the admin
		// removed and the tenant may not write stays removed (a warning); the
		// rest comes back.
		if err := c.Kube.RbacV1().RoleBindings(ns).Delete(ctx, "extra-admin", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := alice.Client.OadpV1alpha1().NonAdminRestores(ns).Create(ctx, &oadpv1alpha1.NonAdminRestore{ObjectMeta: metav1.ObjectMeta{Name: "from-mine"},
			Spec: oadpv1alpha1.NonAdminRestoreSpec{RestoreSpec: &velerov1.RestoreSpec{BackupName: "to-mine"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var restore *velerov1.Restore
		poll(t, "the restore to finish", 2*time.Minute, func(ctx context.Context) (bool, error) {
			nar, err := oadp.NonAdminRestores(ns).Get(ctx, "from-mine", metav1.GetOptions{})
			if err != nil || nar.Status.VeleroRestore == nil || nar.Status.VeleroRestore.Name == "" {
				return false, err
			}
			restore, err = c.Backstop.VeleroV1().Restores(adminNamespace).Get(ctx, nar.Status.VeleroRestore.Name, metav1.GetOptions{})
			return err == nil && restore.Status.Phase.Terminal(), nil
		})
		if as, _, err := restoreas.Of(restore.Annotations); err != nil || as.Username != "alice" {
			t.Errorf("the restore acts as %+v (%v), want alice", as, err)
		}
		if restore.Status.Phase != velerov1.RestorePhaseCompleted || restore.Status.Warnings == 0 {
			t.Errorf("the tenant's restore: %s, %d warnings, %d errors; want Completed with a warning for the RoleBinding", restore.Status.Phase, restore.Status.Warnings, restore.Status.Errors)
		}
		if _, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{}); err != nil {
			t.Errorf("the ConfigMap the tenant may write: %v", err)
		}
		if _, err := c.Kube.RbacV1().RoleBindings(ns).Get(ctx, "extra-admin", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the RoleBinding the tenant may not write came back through its restore: %v", err)
		}

	})

	// Resource modifiers of the tenant's own (a ConfigMap of its namespace,
	// read with its rights) reshape its restore, within its namespace: a
	// rule that moves an item elsewhere moves nothing; the admin
	// namespace's modifiers are never the tenant's.
	step("the tenant's restore reshaped by its own resource modifiers, in its namespace only", func(t *testing.T) {
		if _, err := c.Kube.CoreV1().ConfigMaps(adminNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "admin-rules"},
			Data: map[string]string{"rules.yaml": "version: v1\nresourceModifierRules:\n- conditions: {groupResource: configmaps}\n  mergePatches:\n  - patchData: '{\"data\":{\"a\":\"admin\"}}'\n"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rules := `version: v1
resourceModifierRules:
- conditions: {groupResource: configmaps, resourceNameRegex: "^settings$"}
  mergePatches:
  - patchData: 'data: {a: tenant}'
- conditions: {groupResource: configmaps, resourceNameRegex: "^settings$"}
  patches:
  - {operation: replace, path: /metadata/namespace, value: ` + adminNamespace + `}
`
		if _, err := alice.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "my-rules"},
			Data: map[string]string{"rules.yaml": rules}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("the tenant's resource modifiers: %v", err)
		}
		if err := c.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		restoreWith := func(t *testing.T, name, modifiers string) *velerov1.Restore {
			t.Helper()
			if _, err := alice.Client.OadpV1alpha1().NonAdminRestores(ns).Create(ctx, &oadpv1alpha1.NonAdminRestore{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: oadpv1alpha1.NonAdminRestoreSpec{RestoreSpec: &velerov1.RestoreSpec{BackupName: "to-mine",
					ResourceModifier: &corev1.TypedLocalObjectReference{Kind: "ConfigMap", Name: modifiers}}}}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("NonAdminRestore %s: %v", name, err)
			}
			var r *velerov1.Restore
			poll(t, "restore "+name+" to end", 2*time.Minute, func(ctx context.Context) (bool, error) {
				nar, err := oadp.NonAdminRestores(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil || nar.Status.VeleroRestore == nil || nar.Status.VeleroRestore.Name == "" {
					return false, err
				}
				r, err = c.Backstop.VeleroV1().Restores(adminNamespace).Get(ctx, nar.Status.VeleroRestore.Name, metav1.GetOptions{})
				return err == nil && r.Status.Phase.Terminal(), nil
			})
			return r
		}

		r := restoreWith(t, "reshaped", "my-rules")
		if r.Status.Phase != velerov1.RestorePhaseCompleted || r.Status.Errors != 0 {
			t.Errorf("the tenant's restore with its modifiers: %s, %d errors %v", r.Status.Phase, r.Status.Errors, r.Status.ValidationErrors)
		}
		if cm, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{}); err != nil || cm.Data["a"] != "tenant" {
			t.Errorf("the restored ConfigMap in %s: %v (%v), want a=tenant as the tenant's rule says", ns, cm.Data, err)
		}
		if _, err := c.Kube.CoreV1().ConfigMaps(adminNamespace).Get(ctx, "settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a ConfigMap settings in the admin namespace after the tenant's rule named it: %v, want none", err)
		}

		r = restoreWith(t, "with-admin-rules", "admin-rules")
		want := "failed to get resource modifiers configmap " + ns + "/admin-rules: not found"
		if r.Status.Phase != velerov1.RestorePhaseFailedValidation || len(r.Status.ValidationErrors) != 1 || r.Status.ValidationErrors[0] != want {
			t.Errorf("a tenant's restore naming the admin namespace's modifiers: %s %v, want FailedValidation %q", r.Status.Phase, r.Status.ValidationErrors, want)
		}
	})

	// Sync from the tenant's bucket (backupSyncPeriod 2s). Planted beside
	// the real backup: a copy of it under a name the server gives tenants'
	// backups, whose metadata claims tenant-b, a NACUUID and tenant-b's
	// namespace; and a copy under a name the admin could give a backup.
	// The first becomes a NonAdminBackup of tenant-a alone, held to
	// tenant-a, and restores as any other; the second is never taken.
	step("backups planted in the tenant's bucket sync to that tenant alone, and restore", func(t *testing.T) {
		bob = tenantOf(t, c, "bob", "tenant-b")
		backupsDir = filepath.Join(srv.Root, "team", ns, "apps", "backups")
		planted = oadpv1alpha1.NewNACUUID(ns, "elsewhere")
		plantBackup(t, backupsDir, made, planted, func(b *velerov1.Backup) {
			b.Labels = map[string]string{oadpv1alpha1.NabOriginNACUUIDLabel: oadpv1alpha1.NewNACUUID(bob.Namespace, "planted")}
			b.Annotations = map[string]string{oadpv1alpha1.NabOriginNamespaceAnnotation: bob.Namespace, oadpv1alpha1.NabOriginNameAnnotation: "planted"}
			b.Spec.IncludedNamespaces = []string{bob.Namespace}
		})
		plantBackup(t, backupsDir, made, "nightly", nil)
		var synced *oadpv1alpha1.NonAdminBackup
		poll(t, "the planted backup synced into the tenant's namespace", 2*time.Minute, func(ctx context.Context) (bool, error) {
			var err error
			synced, err = oadp.NonAdminBackups(ns).Get(ctx, "planted", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil && synced.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated && synced.Status.VeleroBackup.Status != nil, err
		})
		if synced.Labels[oadpv1alpha1.NabSyncLabel] == "" || synced.Status.VeleroBackup.Name != planted ||
			synced.Status.VeleroBackup.Status.Phase != velerov1.BackupPhaseCompleted || synced.Spec.BackupSpec.StorageLocation != "mine" {
			t.Errorf("the synced NonAdminBackup: labels %v spec %+v status.veleroBackup %+v", synced.Labels, synced.Spec.BackupSpec, synced.Status.VeleroBackup)
		}
		vb, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, planted, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if vb.Annotations[oadpv1alpha1.NabOriginNamespaceAnnotation] != ns || vb.Labels[oadpv1alpha1.NabOriginNACUUIDLabel] != synced.Status.VeleroBackup.NACUUID ||
			vb.Annotations[velerov1.SyncedFromLocationAnnotation] != id || vb.Spec.StorageLocation != id ||
			len(vb.Spec.IncludedNamespaces) != 1 || vb.Spec.IncludedNamespaces[0] != ns {
			t.Errorf("the synced Backup: labels %v annotations %v includedNamespaces %v location %q", vb.Labels, vb.Annotations, vb.Spec.IncludedNamespaces, vb.Spec.StorageLocation)
		}
		if list, err := oadp.NonAdminBackups(bob.Namespace).List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
			t.Errorf("NonAdminBackups in %s after a backup planted as its own: %d (%v)", bob.Namespace, len(list.Items), err)
		}
		if _, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, "nightly", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a backup named as an admin's, planted in a tenant's bucket, was synced: %v", err)
		}
		if _, err := alice.Client.OadpV1alpha1().NonAdminRestores(ns).Create(ctx, &oadpv1alpha1.NonAdminRestore{ObjectMeta: metav1.ObjectMeta{Name: "from-synced"},
			Spec: oadpv1alpha1.NonAdminRestoreSpec{RestoreSpec: &velerov1.RestoreSpec{BackupName: "planted"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "the restore of the synced backup", 2*time.Minute, func(ctx context.Context) (bool, error) {
			nar, err := oadp.NonAdminRestores(ns).Get(ctx, "from-synced", metav1.GetOptions{})
			if err != nil || nar.Status.VeleroRestore == nil || nar.Status.VeleroRestore.Status == nil || !nar.Status.VeleroRestore.Status.Phase.Terminal() {
				return false, err
			}
			if p := nar.Status.VeleroRestore.Status.Phase; p != velerov1.RestorePhaseCompleted {
				t.Errorf("the restore of the synced backup: %s (%s)", p, nar.Status.VeleroRestore.Status.FailureReason)
			}
			return true, nil
		})
	})

	// A hostile tarball in the tenant's bucket: a backup planted under a
	// name the server gives tenants' backups, its tarball replaced by one
	// the tenant wrote. Its restore (as the tenant) writes only the item
	// of its namespace; entries that would leave their place are skipped,
	// an item of another namespace, a cluster-wide binding to
	// cluster-admin and a Namespace item claiming another name change
	// nothing.
	step("a hostile tarball in the tenant's bucket restores only the item of the tenant's namespace", func(t *testing.T) {
		hostile := oadpv1alpha1.NewNACUUID(ns, "hostile")
		plantBackup(t, backupsDir, made, hostile, func(b *velerov1.Backup) {
			b.Annotations = map[string]string{oadpv1alpha1.NabOriginNameAnnotation: "hostile"}
		})
		configMap := func(namespace, name string) []byte {
			return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":%q},"data":{"k":"v"}}`, name, namespace)
		}
		tarball := archivetest.Build(t,
			archivetest.Item("configmaps", "v1", ns, "from-hostile", configMap(ns, "from-hostile")),
			archivetest.Item("configmaps", "v1", bob.Namespace, "evil", configMap(bob.Namespace, "evil")),
			archivetest.Entry{Name: "resources/configmaps/v1-preferredversion/namespaces/../../../x.json", Data: configMap(ns, "dotdot")},
			archivetest.Entry{Name: "resources/configmaps/v1-preferredversion/namespaces/" + ns + "/link.json", Type: tar.TypeSymlink, Linkname: "/etc/shadow"},
			archivetest.Item("clusterrolebindings.rbac.authorization.k8s.io", "v1", "", "pwn", []byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"pwn"},`+
				`"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cluster-admin"},"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"alice"}]}`)),
			archivetest.Item("namespaces", "v1", "", ns, []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kube-system","labels":{"pwned":"yes"}}}`)),
		)
		if err := os.WriteFile(filepath.Join(backupsDir, hostile, hostile+".tar.gz"), tarball, 0o644); err != nil {
			t.Fatal(err)
		}
		poll(t, "the hostile backup synced", 2*time.Minute, func(ctx context.Context) (bool, error) {
			n, err := oadp.NonAdminBackups(ns).Get(ctx, "hostile", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil && n.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated && n.Status.VeleroBackup.Status != nil, err
		})
		if _, err := alice.Client.OadpV1alpha1().NonAdminRestores(ns).Create(ctx, &oadpv1alpha1.NonAdminRestore{ObjectMeta: metav1.ObjectMeta{Name: "from-hostile"},
			Spec: oadpv1alpha1.NonAdminRestoreSpec{RestoreSpec: &velerov1.RestoreSpec{BackupName: "hostile"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "the restore of the hostile backup", 2*time.Minute, func(ctx context.Context) (bool, error) {
			nar, err := oadp.NonAdminRestores(ns).Get(ctx, "from-hostile", metav1.GetOptions{})
			return err == nil && nar.Status.VeleroRestore != nil && nar.Status.VeleroRestore.Status != nil && nar.Status.VeleroRestore.Status.Phase.Terminal(), err
		})
		if _, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "from-hostile", metav1.GetOptions{}); err != nil {
			nar, _ := oadp.NonAdminRestores(ns).Get(ctx, "from-hostile", metav1.GetOptions{})
			logs, _ := c.Backstop.VeleroV1().RESTClient().Get().Namespace(adminNamespace).Resource("restores").Name(nar.Status.VeleroRestore.Name).SubResource("logs").DoRaw(ctx)
			t.Errorf("the hostile backup's item of the tenant's namespace: %v; the restore's log:\n%s", err, logs)
		}
		if _, err := c.Kube.CoreV1().ConfigMaps(bob.Namespace).Get(ctx, "evil", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("an item of another tenant's namespace restored from a tenant's bucket: %v", err)
		}
		if _, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "dotdot", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("an entry with .. restored: %v", err)
		}
		if _, err := c.Kube.RbacV1().ClusterRoleBindings().Get(ctx, "pwn", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a ClusterRoleBinding restored from a tenant's bucket: %v", err)
		}
		if ks, err := c.Kube.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err != nil || ks.Labels["pwned"] != "" {
			t.Errorf("kube-system changed by a tenant's restore: %v %v", ks.Labels, err)
		}

	})

	step("its files gone from the bucket, its Backup goes, as Velero's sync does", func(t *testing.T) {
		if err := os.RemoveAll(filepath.Join(backupsDir, planted)); err != nil {
			t.Fatal(err)
		}
		poll(t, "the Backup of files gone from the bucket deleted", time.Minute, func(ctx context.Context) (bool, error) {
			_, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, planted, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})

	})

	// Garbage collection (garbageCollectionPeriod 5s): a Secret copy left
	// without its location, request or Velero location (a crash after the
	// copy, then the location's finalizer removed by hand), which no event
	// names again, goes on the next pass.
	step("the garbage collection removes a Secret copy left behind, and keeps the live one", func(t *testing.T) {
		left := oadpv1alpha1.NewNACUUID(ns, "gone")
		if _, err := c.Kube.CoreV1().Secrets(adminNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: left,
			Labels:      map[string]string{oadpv1alpha1.NabslOriginNACUUIDLabel: left, oadpv1alpha1.OadpLabel: oadpv1alpha1.OadpLabelValue},
			Annotations: map[string]string{oadpv1alpha1.NabslOriginNamespaceAnnotation: ns, oadpv1alpha1.NabslOriginNameAnnotation: "gone"}},
			Data: map[string][]byte{"cloud": []byte(creds)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "the garbage collection of a Secret copy left behind", time.Minute, func(ctx context.Context) (bool, error) {
			_, err := c.Kube.CoreV1().Secrets(adminNamespace).Get(ctx, left, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if _, err := c.Kube.CoreV1().Secrets(adminNamespace).Get(ctx, id, metav1.GetOptions{}); err != nil {
			t.Errorf("the Secret copy of the tenant's live location after garbage collection: %v", err)
		}

	})

	// A location that requires encryption, its keys in a Secret of the
	// tenant's: copied beside its credentials, never a file of the server.
	step("an encrypted location of the tenant's: its keys copied, its backup age files only, restored", func(t *testing.T) {
		sealed := func(name string, config map[string]string) error {
			full := map[string]string{"s3Url": srv.Endpoint, "region": "us-east-1", "s3ForcePathStyle": "true"}
			maps.Copy(full, config)
			_, err := tenantLocations.Create(ctx, &oadpv1alpha1.NonAdminBackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: oadpv1alpha1.NonAdminBackupStorageLocationSpec{BackupStorageLocationSpec: &velerov1.BackupStorageLocationSpec{
					Provider: "aws", Config: full,
					Credential:  &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "cloud"},
					StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: "team", Prefix: "sealed"}},
				}},
			}, metav1.CreateOptions{})
			return err
		}
		if err := sealed("by-file", map[string]string{encryption.ConfigIdentitiesFile: "/etc/backstop/keys.txt"}); !conformance.InvalidAt(err,
			"spec.backupStorageLocationSpec.config[encryptionIdentitiesFile]", "reads no file of the server") {
			t.Errorf("a tenant's location reading its keys from a file of the server: %v, want 422", err)
		}
		identity, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := alice.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "my-keys"},
			Data: map[string][]byte{encryption.DefaultSecretKey: []byte(identity.String() + "\n")}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := sealed("sealed", map[string]string{encryption.ConfigSecret: "my-keys"}); err != nil {
			t.Fatalf("the tenant's encrypted location: %v", err)
		}
		var sealedID string
		poll(t, "the encrypted location's request", time.Minute, func(ctx context.Context) (bool, error) {
			if v := locationNamed(t, ctx, "sealed").Status.VeleroBackupStorageLocation; v != nil {
				sealedID = v.NACUUID
			}
			if sealedID == "" {
				return false, nil
			}
			_, err := requests.Get(ctx, sealedID, metav1.GetOptions{})
			return err == nil, nil
		})
		decideOn(t, sealedID, oadpv1alpha1.NonAdminBSLRequestApproved)
		poll(t, "the encrypted location Created and Available", 2*time.Minute, func(ctx context.Context) (bool, error) {
			l := locationNamed(t, ctx, "sealed")
			v := l.Status.VeleroBackupStorageLocation
			return l.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated && v.Status != nil && v.Status.Phase == velerov1.BackupStorageLocationPhaseAvailable, nil
		})
		secret, err := c.Kube.CoreV1().Secrets(adminNamespace).Get(ctx, sealedID, metav1.GetOptions{})
		if err != nil || string(secret.Data["cloud"]) != creds || string(secret.Data[encryption.TenantCopyKey]) != identity.String()+"\n" {
			t.Errorf("the copy of the tenant's Secrets: %v, keys copied: %v", err, secret != nil && len(secret.Data[encryption.TenantCopyKey]) > 0)
		}

		if _, err := alice.Client.OadpV1alpha1().NonAdminBackups(ns).Create(ctx, &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: "sealed-1"},
			Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{StorageLocation: "sealed"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var vb *oadpv1alpha1.VeleroBackup
		poll(t, "the backup to the encrypted location", 3*time.Minute, func(ctx context.Context) (bool, error) {
			nab, err := oadp.NonAdminBackups(ns).Get(ctx, "sealed-1", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			vb = nab.Status.VeleroBackup
			return vb != nil && vb.Status != nil && vb.Status.Phase.Terminal(), nil
		})
		if vb.Status.Phase != velerov1.BackupPhaseCompleted {
			t.Fatalf("the backup to the encrypted location: %s (%s)", vb.Status.Phase, vb.Status.FailureReason)
		}
		dir := filepath.Join(srv.Root, "team", ns, "sealed", "backups", vb.Name)
		objects, err := framework.ReadTree(dir)
		if err != nil || len(objects) == 0 {
			t.Fatalf("the objects under %s: %v (%d)", dir, err, len(objects))
		}
		for name, data := range objects {
			if !bytes.HasPrefix(data, []byte(encryption.Header)) {
				t.Errorf("%s of the tenant's encrypted backup: %.40q, want an age file", name, data)
			}
		}

		if err := c.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := alice.Client.OadpV1alpha1().NonAdminRestores(ns).Create(ctx, &oadpv1alpha1.NonAdminRestore{ObjectMeta: metav1.ObjectMeta{Name: "from-sealed"},
			Spec: oadpv1alpha1.NonAdminRestoreSpec{RestoreSpec: &velerov1.RestoreSpec{BackupName: "sealed-1"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var restore *velerov1.Restore
		poll(t, "the restore from the encrypted location", 2*time.Minute, func(ctx context.Context) (bool, error) {
			nar, err := oadp.NonAdminRestores(ns).Get(ctx, "from-sealed", metav1.GetOptions{})
			if err != nil || nar.Status.VeleroRestore == nil || nar.Status.VeleroRestore.Name == "" {
				return false, err
			}
			restore, err = c.Backstop.VeleroV1().Restores(adminNamespace).Get(ctx, nar.Status.VeleroRestore.Name, metav1.GetOptions{})
			return err == nil && restore.Status.Phase.Terminal(), nil
		})
		if restore.Status.Phase != velerov1.RestorePhaseCompleted {
			t.Errorf("the tenant's restore from its encrypted location: %s %q", restore.Status.Phase, restore.Status.FailureReason)
		}
		if _, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{}); err != nil {
			t.Errorf("the ConfigMap restored from the encrypted backup: %v", err)
		}
	})

	step("approval withdrawn: the location and the copy go, the phase stays; rejected; the spec fixed", func(t *testing.T) {
		decide(t, oadpv1alpha1.NonAdminBSLRequestPending)
		l := waitApproval(t, "False/"+oadpv1alpha1.ReasonBslSpecApprovalPending)
		poll(t, "the admin side removed", time.Minute, func(ctx context.Context) (bool, error) {
			_, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Get(ctx, id, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		assertNoAdminSide(t, "approval withdrawn", id)
		if l.Status.Phase != oadpv1alpha1.NonAdminPhaseCreated {
			t.Errorf("phase after approval withdrawn: %q, want Created (phases do not move back)", l.Status.Phase)
		}
		if err := nab("after-revoke"); !conformance.InvalidAt(err, "spec.backupSpec.storageLocation", "not approved") {
			t.Errorf("a backup to a location whose approval was withdrawn: %v, want 422", err)
		}
		decide(t, oadpv1alpha1.NonAdminBSLRequestRejected)
		waitApproval(t, "False/"+oadpv1alpha1.ReasonBslSpecRejected)

		// The spec is what was approved: it cannot change.
		if _, err := tenantLocations.Patch(ctx, "mine", types.MergePatchType, []byte(`{"spec":{"backupStorageLocationSpec":{"objectStorage":{"bucket":"other"}}}}`), metav1.PatchOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("changing the location's spec: %v, want 422", err)
		}
	})

	// A location whose finalizer is removed by hand goes at once: what was
	// made for it in the admin namespace goes after it.
	step("a location whose finalizer is removed by hand: what was made for it goes after it", func(t *testing.T) {
		newLocation(t, "dropped")
		var dropped string
		poll(t, "the second location's request", time.Minute, func(ctx context.Context) (bool, error) {
			if v := locationNamed(t, ctx, "dropped").Status.VeleroBackupStorageLocation; v != nil {
				dropped = v.NACUUID
			}
			return dropped != "", nil
		})
		poll(t, "the second location's request made", time.Minute, func(ctx context.Context) (bool, error) {
			_, err := requests.Get(ctx, dropped, metav1.GetOptions{})
			return err == nil, nil
		})
		decideOn(t, dropped, oadpv1alpha1.NonAdminBSLRequestApproved)
		waitApprovalOf(t, "dropped", "True/"+oadpv1alpha1.ReasonBslSpecApproved)
		poll(t, "the second location made", time.Minute, func(ctx context.Context) (bool, error) {
			_, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Get(ctx, dropped, metav1.GetOptions{})
			return err == nil, nil
		})
		if _, err := oadp.NonAdminBackupStorageLocations(ns).Patch(ctx, "dropped", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := tenantLocations.Delete(ctx, "dropped", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "the second location's admin side gone", time.Minute, func(ctx context.Context) (bool, error) {
			_, errB := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Get(ctx, dropped, metav1.GetOptions{})
			_, errR := requests.Get(ctx, dropped, metav1.GetOptions{})
			return apierrors.IsNotFound(errB) && apierrors.IsNotFound(errR), nil
		})
		assertNoAdminSide(t, "location gone", dropped)
	})

	step("deleted: its request goes; its backup stays until force-deleted, the data left in the tenant's bucket", func(t *testing.T) {
		if err := tenantLocations.Delete(ctx, "mine", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "the location and its request gone", time.Minute, func(ctx context.Context) (bool, error) {
			_, errL := oadp.NonAdminBackupStorageLocations(ns).Get(ctx, "mine", metav1.GetOptions{})
			_, errR := requests.Get(ctx, id, metav1.GetOptions{})
			return apierrors.IsNotFound(errL) && apierrors.IsNotFound(errR), nil
		})

		// The backup made there stays, its data in the tenant's bucket, out of
		// the server's reach: deleteBackup says why it cannot delete the data
		// (and tries again); forceDeleteBackup removes it here and leaves the
		// data where it is.
		nabs := alice.Client.OadpV1alpha1().NonAdminBackups(ns)
		if _, err := nabs.Patch(ctx, "to-mine", types.MergePatchType, []byte(`{"spec":{"deleteBackup":true}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "deleteBackup saying the location is gone", time.Minute, func(ctx context.Context) (bool, error) {
			n, err := nabs.Get(ctx, "to-mine", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			d := n.Status.VeleroDeleteBackupRequest
			return d != nil && d.Status != nil && strings.Contains(strings.Join(d.Status.Errors, " "), "does not exist"), nil
		})
		if _, err := nabs.Patch(ctx, "to-mine", types.MergePatchType, []byte(`{"spec":{"forceDeleteBackup":true}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "the force-deleted backup gone", time.Minute, func(ctx context.Context) (bool, error) {
			_, errN := nabs.Get(ctx, "to-mine", metav1.GetOptions{})
			_, errB := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, made, metav1.GetOptions{})
			return apierrors.IsNotFound(errN) && apierrors.IsNotFound(errB), nil
		})
		if _, err := os.Stat(filepath.Join(backupsDir, made, "velero-backup.json")); err != nil {
			t.Errorf("the data of a backup on a deleted tenant location: %v, want it left in the tenant's bucket", err)
		}
	})
}

// plantBackup copies the backup from of a posix bucket's backups
// directory as to, its files renamed and its velero-backup.json naming
// to, changed by edit (nil: as it is): what a tenant may write to its own
// bucket.
func plantBackup(t *testing.T, backupsDir, from, to string, edit func(*velerov1.Backup)) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(backupsDir, from))
	if err != nil {
		t.Fatal(err)
	}
	// Beside backups/ (the sync reads backups/ only), on the same disk.
	staging := filepath.Join(filepath.Dir(backupsDir), "staging-"+to)
	if err := os.Mkdir(staging, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(backupsDir, from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "velero-backup.json" {
			var b velerov1.Backup
			if err := json.Unmarshal(data, &b); err != nil {
				t.Fatal(err)
			}
			b.Name = to
			if edit != nil {
				edit(&b)
			}
			if data, err = json.Marshal(&b); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(staging, strings.Replace(e.Name(), from, to, 1)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Whole, at once: the sync never reads half a backup.
	if err := os.Rename(staging, filepath.Join(backupsDir, to)); err != nil {
		t.Fatal(err)
	}
}

// readGzip reads a gzipped response body; a status other than 200 is an
// error.
func readGzip(resp *http.Response) (string, error) {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("%d: %s", resp.StatusCode, body)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		return "", err
	}
	data, err := io.ReadAll(zr)
	return string(data), err
}

// TestSlowTenantEndpoint: a tenant's location at an endpoint that trickles
// its answers (a loopback server of the test's, which the admin's policy
// lets tenants reach) holds one of the location engine's workers until its
// check's deadline (--location-check-timeout): an admin's location made
// while it waits is checked meanwhile, and the tenant's is Unavailable at
// its deadline, saying so.
func TestSlowTenantEndpoint(t *testing.T) {
	t.Parallel()
	c := framework.StartClusterWith(t, framework.ClusterOptions{WithoutBackstop: true})
	c.InstallBackstop("--location-check-timeout=20s")
	ctx := context.Background()
	tr := &framework.Trickler{}
	srv := httptest.NewServer(tr)
	defer srv.Close()
	alice := tenantOf(t, c, "alice", "tenant-a")
	oadp := c.Backstop.OadpV1alpha1()
	if _, err := oadp.DataProtectionApplications(adminNamespace).Create(ctx, &oadpv1alpha1.DataProtectionApplication{
		ObjectMeta: metav1.ObjectMeta{Name: "dpa"},
		Spec: oadpv1alpha1.DataProtectionApplicationSpec{NonAdmin: &oadpv1alpha1.NonAdmin{Enable: ptr(true),
			AllowedLocationEndpoints: []string{"127.0.0.1"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Kube.CoreV1().Secrets(alice.Namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		Data: map[string][]byte{"cloud": []byte("[default]\naws_access_key_id = a\naws_secret_access_key = b\n")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Client.OadpV1alpha1().NonAdminBackupStorageLocations(alice.Namespace).Create(ctx, &oadpv1alpha1.NonAdminBackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Name: "slow"},
		Spec: oadpv1alpha1.NonAdminBackupStorageLocationSpec{BackupStorageLocationSpec: &velerov1.BackupStorageLocationSpec{
			Provider: "aws", Config: map[string]string{"s3Url": srv.URL, "region": "us-east-1", "s3ForcePathStyle": "true"},
			Credential:  &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "cloud"},
			StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: "slow"}},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the tenant's location checked at its endpoint", 2*time.Minute, func(context.Context) (bool, error) {
		return tr.InFlight.Load() > 0, nil
	})
	t.Run("an admin's location is checked meanwhile", func(t *testing.T) {
		if err := os.MkdirAll(filepath.Join(c.BackstopDataDir(), "admins"), 0o700); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Create(ctx, &velerov1.BackupStorageLocation{
			ObjectMeta: metav1.ObjectMeta{Name: "admins"},
			Spec: velerov1.BackupStorageLocationSpec{Provider: "filesystem",
				StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: filepath.Join(c.BackstopDataDir(), "admins")}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "the admin's location Available", 2*time.Minute, func(ctx context.Context) (bool, error) {
			l, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Get(ctx, "admins", metav1.GetOptions{})
			return err == nil && l.Status.Phase == velerov1.BackupStorageLocationPhaseAvailable, nil
		})
		if tr.InFlight.Load() == 0 {
			t.Errorf("the tenant's check ended before the admin's location was Available: the test shows nothing")
		}
	})
	t.Run("the tenant's is Unavailable at its deadline, saying so", func(t *testing.T) {
		poll(t, "the tenant's location Unavailable", 2*time.Minute, func(ctx context.Context) (bool, error) {
			l, err := oadp.NonAdminBackupStorageLocations(alice.Namespace).Get(ctx, "slow", metav1.GetOptions{})
			if err != nil || l.Status.VeleroBackupStorageLocation == nil || l.Status.VeleroBackupStorageLocation.NACUUID == "" {
				return false, nil
			}
			bsl, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Get(ctx, l.Status.VeleroBackupStorageLocation.NACUUID, metav1.GetOptions{})
			return err == nil && bsl.Status.Phase == velerov1.BackupStorageLocationPhaseUnavailable && strings.Contains(bsl.Status.Message, "took longer than 20s"), nil
		})
	})
}
