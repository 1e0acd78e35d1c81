// Package cluster tests Backstop in aggregated mode behind a real control
// plane (framework.StartCluster): registered by artifacts/deploy as users
// apply it, running as the manifests' ServiceAccount with the shipped RBAC,
// reached only through kube-apiserver. Each test runs a control plane of
// its own and runs beside the others (t.Parallel; the framework gives each
// cluster its own ports and pod address in the test network namespace).
package cluster

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/apiserver"
	"github.com/backstop-io/backstop/test/integration/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.RunInNetNS(m)) }

const adminNamespace = framework.BackstopNamespace

func poll(t *testing.T, what string, timeout time.Duration, cond func(context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// inOrder returns a runner of named steps that run in order on what the
// ones before left: the first that fails ends the test.
func inOrder(t *testing.T) func(name string, f func(t *testing.T)) {
	return func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, f) {
			t.FailNow()
		}
	}
}

func forbidden(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Forbidden")
}

// TestAggregated: Backstop through kube-apiserver — trusted by its CA, not
// by skipping verification; discovery; a backup of a real namespace by the
// cluster admin; delegated authentication (client certificates,
// ServiceAccount tokens) and authorization (a RoleBinding grants, its
// absence denies, through the aggregator); killed while registered and
// back.
func TestAggregated(t *testing.T) {
	t.Parallel()
	c := framework.StartCluster(t)
	ctx := context.Background()
	admin := c.AdminKubeconfig

	t.Run("trusted-by-ca-bundle", func(t *testing.T) {
		for _, name := range apiserver.APIServiceNames() {
			cond := c.APIServiceAvailable(ctx, name)
			if cond.Status != "True" || !cond.CABundle || cond.InsecureSkipTLSVerify {
				t.Errorf("APIService %s: %+v, want Available with the server's caBundle and verification on", name, cond)
			}
		}
	})

	t.Run("discovery", func(t *testing.T) {
		for group, resource := range map[string]string{"velero.io": "backups", "oadp.openshift.io": "nonadminbackups", "backup.kubevirt.io": "virtualmachinebackups"} {
			out, err := c.Kubectl(admin, nil, "api-resources", "--api-group", group, "-o", "name")
			if err != nil || !strings.Contains(out, resource+"."+group) {
				t.Errorf("kubectl api-resources --api-group %s: %q, %v", group, out, err)
			}
		}
		// kube-apiserver merges the server's OpenAPI into its own some time
		// after the APIService is Available.
		var out string
		var err error
		if werr := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			out, err = c.Kubectl(admin, nil, "explain", "backups.velero.io.spec.cancel")
			return err == nil && strings.Contains(out, "cancel"), nil
		}); werr != nil {
			t.Errorf("kubectl explain through kube-apiserver's aggregated OpenAPI: %q, %v", out, err)
		}
		// Both OpenAPI versions, as kube-apiserver aggregates them: v2 in
		// its merged document, v3 per group version.
		for path, want := range map[string]string{
			"/openapi/v2":                                  `"io.velero.v1.Backup"`,
			"/openapi/v3/apis/velero.io/v1":                `"io.velero.v1.Backup"`,
			"/openapi/v3/apis/backup.kubevirt.io/v1alpha1": `"io.kubevirt.backup.v1alpha1.VirtualMachineBackup"`,
		} {
			var body string
			if werr := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
				body, err = c.Kubectl(admin, nil, "get", "--raw", path)
				return err == nil && strings.Contains(body, want), nil
			}); werr != nil {
				t.Errorf("GET %s through kube-apiserver: no %s (%d bytes, %v)", path, want, len(body), err)
			}
		}
	})

	t.Run("backup-of-a-namespace", func(t *testing.T) {
		if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Kube.CoreV1().ConfigMaps("shop").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"currency": "EUR"},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		last := runBackup(t, c, &velerov1.Backup{
			ObjectMeta: metav1.ObjectMeta{Name: "shop"},
			Spec:       velerov1.BackupSpec{IncludedNamespaces: []string{"shop"}},
		})
		if last.Status.Phase != velerov1.BackupPhaseCompleted || last.Status.Progress == nil || last.Status.Progress.ItemsBackedUp < 2 {
			t.Errorf("backup of namespace shop: phase %s, progress %+v, errors %d, want Completed with the namespace and its ConfigMap",
				last.Status.Phase, last.Status.Progress, last.Status.Errors)
		}
		// Its phase transitions are Events on it in the cluster: what
		// kubectl describe shows.
		var described string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			out, err := c.Kubectl(admin, nil, "describe", "backup", "shop", "-n", adminNamespace)
			described = out
			_, events, _ := strings.Cut(out, "Events:")
			return err == nil && strings.Contains(events, "→ Completed (backup)"), nil
		})
		if err != nil {
			all, _ := c.Kubectl(admin, nil, "get", "events", "-n", adminNamespace, "-o", "wide")
			t.Fatalf("kubectl describe backup shows no transition to Completed:\n%s\nevents in %s:\n%s", described, adminNamespace, all)
		}
		_, events, _ := strings.Cut(described, "Events:")
		for _, want := range []string{"new → Queued (backup-queue)", "Queued → ReadyToStart (backup-queue)", "ReadyToStart → InProgress (backup)"} {
			if !strings.Contains(events, want) {
				t.Errorf("kubectl describe backup: the Events lack %q:%s", want, events)
			}
		}
	})

	t.Run("events-of-every-life", func(t *testing.T) {
		// Every resource with a life records its phase changes as Events
		// on it, whichever engine writes them.
		v1 := c.Backstop.VeleroV1()
		if r := runRestore(t, c, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "shop-again"},
			Spec: velerov1.RestoreSpec{BackupName: "shop", ExistingResourcePolicy: velerov1.PolicyTypeUpdate}}); r.Status.Phase != velerov1.RestorePhaseCompleted {
			t.Fatalf("restore: %s", r.Status.Phase)
		}
		if b := runBackup(t, c, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "disposable"},
			Spec: velerov1.BackupSpec{IncludedNamespaces: []string{"shop"}}}); b.Status.Phase != velerov1.BackupPhaseCompleted {
			t.Fatalf("backup: %s", b.Status.Phase)
		}
		if _, err := v1.DeleteBackupRequests(adminNamespace).Create(ctx, &velerov1.DeleteBackupRequest{ObjectMeta: metav1.ObjectMeta{Name: "drop-disposable"},
			Spec: velerov1.DeleteBackupRequestSpec{BackupName: "disposable"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := v1.ServerStatusRequests(adminNamespace).Create(ctx, &velerov1.ServerStatusRequest{ObjectMeta: metav1.ObjectMeta{Name: "status"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := v1.DownloadRequests(adminNamespace).Create(ctx, &velerov1.DownloadRequest{ObjectMeta: metav1.ObjectMeta{Name: "shop-log"},
			Spec: velerov1.DownloadRequestSpec{Target: velerov1.DownloadTarget{Kind: velerov1.DownloadTargetKindBackupLog, Name: "shop"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// A tenant's backup, and a restore of it (the tenants' engines).
		runTenantBackupAndRestore(t, c, "shop", "own")
		for _, want := range []struct{ namespace, kind, name, message string }{
			{adminNamespace, "Restore", "shop-again", "→ Completed (restore)"},
			{adminNamespace, "DeleteBackupRequest", "drop-disposable", "InProgress → Processed (backup-deletion)"},
			{adminNamespace, "ServerStatusRequest", "status", "→ Processed (server-status-request)"},
			{adminNamespace, "DownloadRequest", "shop-log", "→ Processed (download-request)"},
			{adminNamespace, "BackupStorageLocation", "default", "new → Available (backup-storage-location)"},
			{"shop", "NonAdminBackup", "own", "New → Created (nonadmin-backup)"},
			{"shop", "NonAdminRestore", "own", "→ Created (nonadmin-restore)"},
		} {
			var messages string
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
				out, err := c.Kubectl(admin, nil, "get", "events", "-n", want.namespace, "--field-selector",
					"involvedObject.kind="+want.kind+",involvedObject.name="+want.name, "-o", "jsonpath={.items[*].message}")
				messages = out
				return err == nil && strings.Contains(out, want.message), nil
			})
			if err != nil {
				t.Errorf("the Events of %s %s: %q, want one saying %q", want.kind, want.name, messages, want.message)
			}
		}
	})

	t.Run("cross-origin-writes-refused", func(t *testing.T) {
		// A browser's cross-site write reaches Backstop through
		// kube-apiserver with its headers, and is refused there (403);
		// the same request from the same origin reaches the registry
		// (which refuses to cancel a completed backup: 409), and so does
		// one with an Origin but no Sec-Fetch-Site (kube-apiserver
		// rewrites Host: only Sec-Fetch-Site decides here).
		cancel := func(site string) error {
			req := c.Backstop.VeleroV1().RESTClient().Post().Namespace(adminNamespace).Resource("backups").Name("shop").SubResource("cancel").
				SetHeader("Content-Type", "application/x-www-form-urlencoded").Body([]byte("confirm=yes"))
			if site != "" {
				req.SetHeader("Sec-Fetch-Site", site)
			} else {
				req.SetHeader("Origin", "http://127.0.0.1:8001")
			}
			return req.Do(ctx).Error()
		}
		if err := cancel("cross-site"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cross-origin") {
			t.Errorf("a cross-site cancel through kube-apiserver: %v, want 403 from Backstop", err)
		}
		if err := cancel("same-origin"); !apierrors.IsConflict(err) {
			t.Errorf("a same-origin cancel of a completed backup through kube-apiserver: %v, want 409", err)
		}
		if err := cancel(""); !apierrors.IsConflict(err) {
			t.Errorf("a cancel with an Origin and no Sec-Fetch-Site through kube-apiserver: %v, want 409 from the registry", err)
		}
	})

	t.Run("delegated-auth", func(t *testing.T) {
		alice := c.UserKubeconfig("alice", "tenants")
		if _, err := c.Kubectl(alice, nil, "get", "virtualmachinebackuptrackers", "-n", "team-a"); !forbidden(err) {
			t.Errorf("alice without a binding: %v, want Forbidden from the aggregated server", err)
		}
		for _, ns := range []string{"team-a", "team-b"} {
			if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// edit picks up the shipped tenant and VM backup roles through
		// kube-controller-manager's aggregation.
		if out, err := c.Kubectl(admin, nil, "create", "rolebinding", "alice-edit", "--clusterrole", "edit", "--user", "alice", "-n", "team-a"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		tracker := []byte(`{"apiVersion":"backup.kubevirt.io/v1alpha1","kind":"VirtualMachineBackupTracker","metadata":{"name":"t1"},"spec":{"source":{"apiGroup":"kubevirt.io","kind":"VirtualMachine","name":"vm1"}}}`)
		poll(t, "alice's rights in team-a", time.Minute, func(context.Context) (bool, error) {
			_, err := c.Kubectl(alice, tracker, "create", "-n", "team-a", "-f", "-")
			return err == nil, nil
		})
		if _, err := c.Kubectl(alice, tracker, "create", "-n", "team-b", "-f", "-"); !forbidden(err) {
			t.Errorf("alice creating in team-b: %v, want Forbidden", err)
		}
		if _, err := c.Kubectl(alice, nil, "get", "backups.velero.io", "-n", adminNamespace); !forbidden(err) {
			t.Errorf("alice reading the admin's backups: %v, want Forbidden", err)
		}
		// A ServiceAccount token, bound to view.
		if _, err := c.Kube.CoreV1().ServiceAccounts("team-a").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if out, err := c.Kubectl(admin, nil, "create", "rolebinding", "robot-view", "--clusterrole", "view", "--serviceaccount", "team-a:robot", "-n", "team-a"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		robot := c.TokenKubeconfig("team-a", "robot")
		poll(t, "the robot's rights in team-a", time.Minute, func(context.Context) (bool, error) {
			out, err := c.Kubectl(robot, nil, "get", "virtualmachinebackuptrackers", "-n", "team-a", "-o", "name")
			return err == nil && strings.Contains(out, "t1"), nil
		})
		if _, err := c.Kubectl(robot, nil, "delete", "virtualmachinebackuptrackers", "t1", "-n", "team-a"); !forbidden(err) {
			t.Errorf("a view-bound ServiceAccount deleting: %v, want Forbidden", err)
		}
	})

	t.Run("killed-while-registered", func(t *testing.T) {
		c.StopBackstop(true)
		poll(t, "the APIService to be unavailable", time.Minute, func(ctx context.Context) (bool, error) {
			return c.APIServiceAvailable(ctx, "v1.velero.io").Status == "False", nil
		})
		if cond := c.APIServiceAvailable(ctx, "v1.velero.io"); cond.Reason == "" {
			t.Errorf("an unavailable APIService without a reason: %+v", cond)
		}
		_, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, "shop", metav1.GetOptions{})
		if !apierrors.IsServiceUnavailable(err) {
			t.Errorf("reading a backup while the server is down: %v, want 503", err)
		}
		c.StartBackstop()
		b, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, "shop", metav1.GetOptions{})
		if err != nil || b.Status.Phase != velerov1.BackupPhaseCompleted {
			t.Errorf("the backup after kill -9 and restart: %v, %v", b, err)
		}
	})
}

// runTenantBackupAndRestore makes a NonAdminBackup of a namespace as the
// admin, waits for its Velero backup to complete, and makes a
// NonAdminRestore of it (both named name).
func runTenantBackupAndRestore(t *testing.T, c *framework.Cluster, namespace, name string) {
	t.Helper()
	ctx := context.Background()
	c.OpenToTenantRestores(namespace)
	tenant := c.Backstop.OadpV1alpha1()
	if _, err := tenant.NonAdminBackups(namespace).Create(ctx, &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the tenant's backup Completed", 2*time.Minute, func(ctx context.Context) (bool, error) {
		nab, err := tenant.NonAdminBackups(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		v := nab.Status.VeleroBackup
		return v != nil && v.Status != nil && v.Status.Phase == velerov1.BackupPhaseCompleted, nil
	})
	if _, err := tenant.NonAdminRestores(namespace).Create(ctx, &oadpv1alpha1.NonAdminRestore{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: oadpv1alpha1.NonAdminRestoreSpec{RestoreSpec: &velerov1.RestoreSpec{BackupName: name}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
