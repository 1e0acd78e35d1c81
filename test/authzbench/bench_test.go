//go:build bench

// Package authzbench measures what standalone RBAC costs, on a real server
// (test/integration/framework) holding 1,000 ClusterRoles and 10,000
// RoleBindings: the time of one decision of the authorizer the server runs
// (kube-apiserver's RBAC authorizer over informers, built here as the
// server builds it, against that server's objects), allowed and denied, and
// the end-to-end cost of a request decided by RBAC beside the same request
// of a system:masters user, which the server allows before RBAC is asked,
// in the same run. docs/benchmarks.md has the figures; `make bench-authz`
// runs it.
package authzbench

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/backstop-io/backstop/pkg/standalone/authz"
	"github.com/backstop-io/backstop/test/integration/framework"
)

var (
	clusterRoles = flag.Int("authzbench.clusterroles", 1000, "ClusterRoles the server holds")
	roleBindings = flag.Int("authzbench.rolebindings", 10000, "RoleBindings the server holds")
	namespaces   = flag.Int("authzbench.namespaces", 100, "namespaces the RoleBindings are spread over")
	decisions    = flag.Int("authzbench.decisions", 20000, "authorizer decisions timed per case")
	requests     = flag.Int("authzbench.requests", 2000, "requests timed per user")
)

func config(b *testing.B, kubeconfig string) *rest.Config {
	b.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit
	return cfg
}

// populate creates the ClusterRoles (five rules each, on made-up
// resources, so that a denied request reads them all) and the RoleBindings
// (each binding one user to one ClusterRole), with 32 concurrent clients.
func populate(b *testing.B, client kubernetes.Interface) {
	b.Helper()
	ctx := context.Background()
	run := func(n int, create func(i int) error) {
		var next atomic.Int64
		var wg sync.WaitGroup
		var failed atomic.Pointer[error]
		for range 32 {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= n || failed.Load() != nil {
						return
					}
					if err := create(i); err != nil {
						failed.Store(&err)
					}
				}
			})
		}
		wg.Wait()
		if err := failed.Load(); err != nil {
			b.Fatal(*err)
		}
	}
	run(*clusterRoles, func(i int) error {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("role-%04d", i)}}
		for r := range 5 {
			role.Rules = append(role.Rules, rbacv1.PolicyRule{
				APIGroups: []string{"backup.kubevirt.io"}, Resources: []string{fmt.Sprintf("things%d-%d", i, r)}, Verbs: []string{"get", "list"},
			})
		}
		_, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
		return err
	})
	run(*roleBindings, func(i int) error {
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("binding-%05d", i), Namespace: fmt.Sprintf("ns-%03d", i%*namespaces)},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: fmt.Sprintf("role-%04d", i%*clusterRoles)},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: fmt.Sprintf("user-%05d", i)}},
		}
		_, err := client.RbacV1().RoleBindings(binding.Namespace).Create(ctx, binding, metav1.CreateOptions{})
		return err
	})
}

func BenchmarkAuthorization(b *testing.B) {
	s := framework.Start(b, framework.Options{})
	admin := config(b, s.KubeconfigPath)
	client, err := kubernetes.NewForConfig(admin)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	populate(b, client)
	b.Logf("created %d ClusterRoles and %d RoleBindings in %s", *clusterRoles, *roleBindings, time.Since(start).Round(time.Millisecond))

	// The measured user: one RoleBinding among the others, in the last
	// namespace, to a role that lets them list VM backups.
	ctx := context.Background()
	target := fmt.Sprintf("ns-%03d", *namespaces-1)
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "vmb-lister"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"backup.kubevirt.io"}, Resources: []string{"virtualmachinebackups"}, Verbs: []string{"list"}}},
	}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := client.RbacV1().RoleBindings(target).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "vmb-lister"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
	}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}

	// One decision: the authorizer the server runs, on informers of this
	// server's RBAC objects.
	rbac, err := authz.New(admin, authz.Policy{})
	if err != nil {
		b.Fatal(err)
	}
	syncCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := rbac.Sync(syncCtx); err != nil {
		b.Fatal(err)
	}
	// alice is bound in the target namespace; mallory is not, so her
	// request is refused after every binding there has been looked at.
	attrs := func(name, namespace string) authorizer.AttributesRecord {
		u := &user.DefaultInfo{Name: name, Groups: []string{user.AllAuthenticated}}
		return authorizer.AttributesRecord{User: u, Verb: "list", Namespace: namespace, APIGroup: "backup.kubevirt.io",
			APIVersion: "v1alpha1", Resource: "virtualmachinebackups", ResourceRequest: true}
	}
	decide := func(name string, a authorizer.AttributesRecord, want authorizer.Decision) {
		ds := make([]time.Duration, *decisions)
		for i := range ds {
			t0 := time.Now()
			got, _, _ := rbac.Authorizer.Authorize(ctx, a)
			ds[i] = time.Since(t0)
			if got != want {
				b.Fatalf("%s: decision %v, want %v", name, got, want)
			}
		}
		p50, p99 := framework.Percentiles(ds)
		b.ReportMetric(float64(p50.Nanoseconds()), name+"-p50-ns")
		b.ReportMetric(float64(p99.Nanoseconds()), name+"-p99-ns")
		fmt.Printf("| decision, %s | %d | %s | %s |\n", name, len(ds), p50, p99)
	}
	// The figures below are the benchmark: run it with -benchtime=1x.
	for b.Loop() {
		fmt.Printf("\n%d ClusterRoles, %d RoleBindings over %d namespaces\n\n| what | n | p50 | p99 |\n|---|---|---|---|\n", *clusterRoles, *roleBindings, *namespaces)
		decide("allowed", attrs("alice", target), authorizer.DecisionAllow)
		decide("denied", attrs("mallory", target), authorizer.DecisionNoOpinion)

		// End to end: the same list request by alice (RBAC decides) and by the
		// admin (system:masters), alternating.
		aliceClient, err := kubernetes.NewForConfig(config(b, s.IssueKubeconfig("alice")))
		if err != nil {
			b.Fatal(err)
		}
		path := "/apis/backup.kubevirt.io/v1alpha1/namespaces/" + target + "/virtualmachinebackups"
		users := []struct {
			name   string
			client rest.Interface
		}{{"system:masters", client.RbacV1().RESTClient()}, {"RBAC", aliceClient.RbacV1().RESTClient()}}
		times := make([][]time.Duration, len(users))
		for i := range *requests {
			for u := range users {
				t0 := time.Now()
				if err := users[u].client.Get().AbsPath(path).Do(ctx).Error(); err != nil {
					b.Fatalf("request %d as %s: %v", i, users[u].name, err)
				}
				times[u] = append(times[u], time.Since(t0))
			}
		}
		var p50s []time.Duration
		for u, us := range users {
			p50, p99 := framework.Percentiles(times[u])
			p50s = append(p50s, p50)
			b.ReportMetric(float64(p50.Microseconds()), "list-"+us.name+"-p50-us")
			b.ReportMetric(float64(p99.Microseconds()), "list-"+us.name+"-p99-us")
			fmt.Printf("| list request, %s | %d | %s | %s |\n", us.name, len(times[u]), p50, p99)
		}
		fmt.Printf("| RBAC overhead per request (p50 difference) | | %s | |\n\n", p50s[1]-p50s[0])
	}
}
