package apiserver

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	"github.com/backstop-io/backstop/pkg/livelog"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestFollowedLogsBounded: a `view` user asks 2,000 times to follow the log
// of a tenant's running backup, as fast as the server answers. The server
// holds its bound of followed logs per user and refuses the rest at once
// (429, with Retry-After); its open files and its memory grow by what the
// bound holds, not by what was asked (figures in docs/benchmarks.md); the
// tenant still follows its own log meanwhile.
func TestFollowedLogsBounded(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{Args: slowSource})
	ctx := context.Background()
	const namespace, attempts = "tenant-a", 2000
	alice := newTenant(t, s, "alice", namespace)
	bob := newUser(t, s, "bob", namespace, "view")
	// 200 items at two requests a second: minutes of backup, of which
	// the test uses seconds.
	for i := range 200 {
		createTracker(t, s, namespace, fmt.Sprintf("t%03d", i), nil)
	}
	if _, err := alice.client.OadpV1alpha1().NonAdminBackups(namespace).Create(ctx, &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: "slow"},
		Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNAB(t, s, namespace, "slow", "its backup to collect items", func(nab *oadpv1alpha1.NonAdminBackup) bool {
		vb := nab.Status.VeleroBackup
		return vb != nil && vb.Status != nil && vb.Status.Phase == velerov1.BackupPhaseInProgress && vb.Status.Progress != nil && vb.Status.Progress.ItemsBackedUp > 0
	})

	// follower is a user's client without client-go's rate limit,
	// without its retries of a 429 (it would wait out Retry-After), and
	// on HTTP/1.1, a connection per held log (HTTP/2 would multiplex them
	// on one).
	follower := func(t *testing.T, kubeconfig string) func() (io.ReadCloser, error) {
		t.Helper()
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		cfg.QPS, cfg.Burst = -1, 0
		cfg.TLSClientConfig.NextProtos = []string{"http/1.1"}
		client, err := versioned.NewForConfig(rest.CopyConfig(cfg))
		if err != nil {
			t.Fatal(err)
		}
		return func() (io.ReadCloser, error) {
			return client.OadpV1alpha1().RESTClient().Get().Namespace(namespace).Resource("nonadminbackups").Name("slow").
				SubResource("log").Param("follow", "true").MaxRetries(0).Stream(ctx)
		}
	}
	type usage struct{ rssKB, files int64 }
	measure := func(t *testing.T) usage {
		t.Helper()
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.PID()))
		if err != nil {
			t.Fatal(err)
		}
		return usage{rssKB: framework.ProcStatus(t, s.PID(), "VmRSS"), files: int64(len(fds))}
	}

	before := measure(t)
	follow := follower(t, bob.kubeconfig)
	var held []io.ReadCloser
	defer func() {
		for _, rc := range held {
			rc.Close()
		}
	}()
	refused := 0
	for range attempts {
		rc, err := follow()
		switch {
		case err == nil:
			held = append(held, rc)
		case apierrors.IsTooManyRequests(err):
			refused++
		default:
			t.Fatalf("following the log as a viewer: %v, want the log or 429", err)
		}
	}
	during := measure(t)
	t.Logf("%d follows asked by one viewer: %d served, %d refused; the server's RSS %d → %d MiB, open files %d → %d",
		attempts, len(held), refused, before.rssKB/1024, during.rssKB/1024, before.files, during.files)

	t.Run("the bound per user, then 429", func(t *testing.T) {
		if len(held) != livelog.DefaultMaxFollowersPerUser || refused != attempts-livelog.DefaultMaxFollowersPerUser {
			t.Errorf("%d served, %d refused; want %d served, the rest refused", len(held), refused, livelog.DefaultMaxFollowersPerUser)
		}
	})
	t.Run("what the server holds", func(t *testing.T) {
		// Unbounded, the same requests took 2,000 files and 160 MiB.
		const maxFiles, maxRSSKB = 64, 64 << 10
		if grew := during.files - before.files; grew > maxFiles {
			t.Errorf("the server's open files grew by %d, want at most %d", grew, maxFiles)
		}
		if grew := during.rssKB - before.rssKB; grew > maxRSSKB {
			t.Errorf("the server's RSS grew by %d KiB, want at most %d", grew, maxRSSKB)
		}
	})
	t.Run("the tenant still follows its log", func(t *testing.T) {
		rc, err := follower(t, alice.kubeconfig)()
		if err != nil {
			t.Fatalf("following as the tenant: %v", err)
		}
		defer rc.Close()
		buf := make([]byte, 1)
		if _, err := io.ReadFull(rc, buf); err != nil {
			t.Errorf("reading the followed log: %v", err)
		}
	})
}
