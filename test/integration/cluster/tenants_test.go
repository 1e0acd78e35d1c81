package cluster

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	"github.com/backstop-io/backstop/test/integration/conformance"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// tenantOf makes user a namespace owner as a cluster admin would: the
// namespace, opened to tenants' restores, and a RoleBinding to edit there
// (which kube-controller-manager aggregates Backstop's tenant roles into). It returns the user's clients,
// authenticated by a client certificate kube-apiserver trusts.
func tenantOf(t *testing.T, c *framework.Cluster, user, namespace string) conformance.Tenant {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	c.OpenToTenantRestores(namespace)
	if _, err := c.Kube.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.UserKubeconfig(user))
	if err != nil {
		t.Fatal(err)
	}
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The binding is effective once kube-apiserver's authorizer sees it.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.OadpV1alpha1().NonAdminBackups(namespace).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("%s cannot list NonAdminBackups in %s: %v", user, namespace, err)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return conformance.Tenant{Namespace: namespace, Client: client, Kube: kube, HTTP: httpClient}
}

// TestTenantAttackMatrixAggregated runs the tenant attack matrix through
// kube-apiserver: tenants authenticated by kube-apiserver, authorized by
// its RBAC (delegated), Secrets of the admin namespace among the targets.
func TestTenantAttackMatrixAggregated(t *testing.T) {
	t.Parallel()
	c := framework.StartCluster(t)
	conformance.TenantAttacks(t, conformance.TenantTarget{
		Admin: c.Backstop, AdminKube: c.Kube, AdminNamespace: adminNamespace,
		A:       tenantOf(t, c, "alice", "tenant-a"),
		B:       tenantOf(t, c, "bob", "tenant-b"),
		Core:    true,
		DataDir: c.BackstopDataDir(),
	})
}

// TestTenantContentsLinks: a tenant's backup contents hold its namespace's
// Secrets, so, through kube-apiserver, their link opens only for a user
// who may get those Secrets, authenticated: not anonymously, not for a user
// bound to view, who reads the NonAdminDownloadRequest and its link. A
// log's link stays a bearer link, as the OADP CLI fetches it.
func TestTenantContentsLinks(t *testing.T) {
	t.Parallel()
	c := framework.StartCluster(t)
	ctx := context.Background()
	alice := tenantOf(t, c, "alice", "tenant-a")
	if _, err := c.Kube.RbacV1().RoleBindings("tenant-a").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "carol-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "carol"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	carolCfg, err := clientcmd.BuildConfigFromFlags("", c.UserKubeconfig("carol"))
	if err != nil {
		t.Fatal(err)
	}
	carol, err := rest.HTTPClientFor(carolCfg)
	if err != nil {
		t.Fatal(err)
	}
	carolClient, err := versioned.NewForConfig(carolCfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Client.OadpV1alpha1().NonAdminBackups("tenant-a").Create(ctx, &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: "nab1"},
		Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		nab, err := c.Backstop.OadpV1alpha1().NonAdminBackups("tenant-a").Get(ctx, "nab1", metav1.GetOptions{})
		vb := nab.Status.VeleroBackup
		return err == nil && vb != nil && vb.Status != nil && vb.Status.Phase.Terminal(), err
	}); err != nil {
		t.Fatalf("NonAdminBackup nab1 did not finish: %v", err)
	}
	nadrs := alice.Client.OadpV1alpha1().NonAdminDownloadRequests("tenant-a")
	contents := conformance.TenantLink(ctx, t, nadrs, "contents", velerov1.DownloadTargetKindBackupContents, "nab1")
	logs := conformance.TenantLink(ctx, t, nadrs, "log", velerov1.DownloadTargetKindBackupLog, "nab1")
	// carol reads the request and its link.
	r, err := carolClient.OadpV1alpha1().NonAdminDownloadRequests("tenant-a").Get(ctx, "contents", metav1.GetOptions{})
	if err != nil || r.Status.VeleroDownloadRequest.Status == nil || r.Status.VeleroDownloadRequest.Status.DownloadURL != contents {
		t.Fatalf("carol (view) reads the NonAdminDownloadRequest: %v", err)
	}
	anonymous := conformance.LinkClient(ctx, t, c.Backstop, adminNamespace)
	for _, tc := range []struct {
		name   string
		client *http.Client
		link   string
		want   int
	}{
		{"the contents, anonymously", anonymous, contents, http.StatusForbidden},
		{"the contents, as a viewer", carol, contents, http.StatusForbidden},
		{"the contents, as the owner", alice.HTTP, contents, http.StatusOK},
		{"the log, anonymously (the OADP CLI's logs)", anonymous, logs, http.StatusOK},
	} {
		if got := conformance.Status(ctx, t, tc.client, tc.link); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestServerRights: the rights the server's account holds in a cluster
// set up from artifacts/deploy, asked of kube-apiserver itself with the
// account's token: it writes nothing of its own accord; it acts as any user
// but never with system:masters (the cluster refuses it), and as a cluster
// admin's name it writes only in a namespace opened to tenants' restores;
// it acts as the restore identity, which writes (never deletes) what
// restores hold.
func TestServerRights(t *testing.T) {
	t.Parallel()
	c := framework.StartCluster(t)
	ctx := context.Background()
	const opened, admin = "team-z", "an-admin"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opened}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.OpenToTenantRestores(opened)
	if _, err := c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "an-admin"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: admin}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	server, err := clientcmd.BuildConfigFromFlags("", c.TokenKubeconfig(framework.BackstopNamespace, framework.BackstopServiceAccount))
	if err != nil {
		t.Fatal(err)
	}
	as := func(t *testing.T, imp rest.ImpersonationConfig) kubernetes.Interface {
		t.Helper()
		cfg := rest.CopyConfig(server)
		cfg.Impersonate = imp
		k, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	configMap := func(k kubernetes.Interface, ns string) error {
		_, err := k.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "rights-"}}, metav1.CreateOptions{})
		return err
	}
	for _, tc := range []struct {
		name    string
		as      rest.ImpersonationConfig
		ns      string
		allowed bool
	}{
		{name: "the server itself writes in kube-system", ns: "kube-system"},
		{name: "as system:masters", as: rest.ImpersonationConfig{UserName: "someone", Groups: []string{"system:masters"}}, ns: opened},
		{name: "as a cluster admin, in kube-system", as: rest.ImpersonationConfig{UserName: admin}, ns: "kube-system"},
		{name: "as a cluster admin, in a namespace not opened", as: rest.ImpersonationConfig{UserName: admin}, ns: "default"},
		{name: "as a cluster admin, in a namespace opened to tenants' restores", as: rest.ImpersonationConfig{UserName: admin}, ns: opened, allowed: true},
		{name: "as the restore identity, anywhere", as: rest.ImpersonationConfig{UserName: "system:serviceaccount:" + framework.BackstopNamespace + ":backstop-restorer"},
			ns: "kube-system", allowed: true},
		{name: "as another service account of its namespace", as: rest.ImpersonationConfig{UserName: "system:serviceaccount:" + framework.BackstopNamespace + ":default"},
			ns: "kube-system"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := configMap(as(t, tc.as), tc.ns)
			if tc.allowed && err != nil {
				t.Errorf("creating a ConfigMap in %s: %v, want it allowed", tc.ns, err)
			}
			if !tc.allowed && !apierrors.IsForbidden(err) {
				t.Errorf("creating a ConfigMap in %s: %v, want Forbidden", tc.ns, err)
			}
		})
	}
	t.Run("as a user, it reads", func(t *testing.T) {
		k := as(t, rest.ImpersonationConfig{UserName: "alice", Groups: []string{"system:authenticated"},
			Extra: map[string][]string{"authentication.kubernetes.io/credential-id": {"X509SHA256=00"}}})
		if _, err := k.CoreV1().Namespaces().Get(ctx, opened, metav1.GetOptions{}); err != nil && !apierrors.IsForbidden(err) {
			t.Errorf("reading namespace %s as alice: %v", opened, err)
		} else if err != nil {
			t.Logf("reading namespace %s as alice (who may not): %v", opened, err)
		}
		k = as(t, rest.ImpersonationConfig{UserName: admin})
		if _, err := k.CoreV1().Namespaces().Get(ctx, opened, metav1.GetOptions{}); err != nil {
			t.Errorf("reading namespace %s as a cluster admin: %v", opened, err)
		}
	})
	restorer := as(t, rest.ImpersonationConfig{UserName: "system:serviceaccount:" + framework.BackstopNamespace + ":backstop-restorer"})
	t.Run("the restore identity never deletes", func(t *testing.T) {
		err := restorer.CoreV1().ConfigMaps("kube-system").Delete(ctx, "extension-apiserver-authentication", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		if !apierrors.IsForbidden(err) {
			t.Errorf("deleting as the restore identity: %v, want Forbidden", err)
		}
	})
	// Its rules grant "*", which RBAC takes for every subresource too; the
	// chart's admission policy leaves it objects and their status.
	t.Run("the restore identity writes no subresource but status", func(t *testing.T) {
		refusedByPolicy := func(t *testing.T, what string, err error) {
			t.Helper()
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "the restore identity writes objects and their status only") {
				t.Errorf("%s as the restore identity: %v, want Forbidden by the chart's policy", what, err)
			}
		}
		_, err := restorer.CoreV1().ServiceAccounts(framework.BackstopNamespace).CreateToken(ctx, framework.BackstopServiceAccount,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(600))}}, metav1.CreateOptions{})
		refusedByPolicy(t, "a token of the server's account", err)
		// Admission comes before the pod is looked for: without the policy
		// this is NotFound.
		err = restorer.CoreV1().RESTClient().Post().Namespace("kube-system").Resource("pods").Name("any").SubResource("exec").
			Param("command", "id").Param("stdout", "true").Do(ctx).Error()
		refusedByPolicy(t, "an exec in a pod", err)
		err = restorer.CoreV1().RESTClient().Post().Namespace(opened).Resource("pods").Name("any").SubResource("eviction").
			Body(&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "any", Namespace: opened}}).Do(ctx).Error()
		refusedByPolicy(t, "an eviction", err)
		ns, err := restorer.CoreV1().Namespaces().Get(ctx, opened, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := restorer.CoreV1().Namespaces().UpdateStatus(ctx, ns, metav1.UpdateOptions{}); err != nil {
			t.Errorf("a namespace's status, as the restore identity: %v, want it written", err)
		}
	})
}
