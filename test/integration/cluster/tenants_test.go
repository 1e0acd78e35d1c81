package cluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	"github.com/backstop-io/backstop/test/integration/conformance"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// tenantOf makes user a namespace owner as a cluster admin would: the
// namespace, and a RoleBinding to edit there (which kube-controller-manager
// aggregates Backstop's tenant roles into). It returns the user's clients,
// authenticated by a client certificate kube-apiserver trusts.
func tenantOf(t *testing.T, c *framework.Cluster, user, namespace string) conformance.Tenant {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
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
	return conformance.Tenant{Namespace: namespace, Client: client, Kube: kube}
}

// TestTenantAttackMatrix runs the tenant attack matrix through
// kube-apiserver: tenants authenticated by kube-apiserver, authorized by
// its RBAC (delegated), Secrets of the admin namespace among the targets.
func TestTenantAttackMatrix(t *testing.T) {
	c := framework.StartCluster(t)
	conformance.TenantAttacks(t, conformance.TenantTarget{
		Admin: c.Backstop, AdminKube: c.Kube, AdminNamespace: adminNamespace,
		A:       tenantOf(t, c, "alice", "tenant-a"),
		B:       tenantOf(t, c, "bob", "tenant-b"),
		Core:    true,
		DataDir: c.BackstopDataDir(),
	})
}
