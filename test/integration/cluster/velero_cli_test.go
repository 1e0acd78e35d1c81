package cluster

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/conformance"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestVeleroCLIAggregated: the unmodified velero CLI v1.18 with the cluster admin's
// kubeconfig, through kube-apiserver: backups, restores and schedules, and
// the logs and details it downloads through links that go through
// kube-apiserver too (what a user outside the cluster reaches), fetched
// without credentials and trusted by the CA the storage location carries.
func TestVeleroCLIAggregated(t *testing.T) {
	t.Parallel()
	c := framework.StartCluster(t)
	ctx := context.Background()
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kube.CoreV1().ConfigMaps("shop").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"currency": "EUR"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	velero, wants := veleroCLI(t, c)
	wants("velero version", velero("version"), "Version: v1.18.3", "Server:")
	wants("backup create --wait", velero("backup", "create", "b1", "--include-namespaces", "shop", "--wait"),
		`Backup request "b1" submitted successfully`, "Backup completed with status: Completed")
	wants("backup describe --details", velero("backup", "describe", "b1", "--details", "--colorized=false"),
		"Phase: Completed", "Resource List:", "v1/ConfigMap:", "shop/settings")
	wants("backup logs", velero("backup", "logs", "b1"), "Backup completed")

	// The link the CLI followed: through kube-apiserver, served to anyone
	// holding it, refused once tampered with.
	link := downloadLink(t, c, "b1")
	if !strings.HasPrefix(link, c.URL()+"/apis/velero.io/v1/namespaces/"+adminNamespace+"/downloadrequests/") {
		t.Errorf("download link %s, want one through kube-apiserver (%s)", link, c.URL())
	}
	anonymous := anonymousClient(t, c)
	if code, body := get(t, anonymous, link); code != http.StatusOK || !strings.Contains(body, "Backup completed") {
		t.Errorf("the link without credentials: %d %q", code, body)
	}
	if code, _ := get(t, anonymous, strings.Replace(link, "signature=", "signature=00", 1)); code != http.StatusForbidden {
		t.Errorf("a tampered link: %d, want 403", code)
	}

	wants("restore create --wait", velero("restore", "create", "r1", "--from-backup", "b1", "--namespace-mappings", "shop:shop-copy", "--wait"),
		`Restore request "r1" submitted successfully`, "Restore completed with status: Completed")
	wants("restore describe --details", velero("restore", "describe", "r1", "--details", "--colorized=false"), "Phase: Completed", "shop-copy")
	wants("restore logs", velero("restore", "logs", "r1"), "Restored", "shop-copy/settings")
	if _, err := c.Kube.CoreV1().ConfigMaps("shop-copy").Get(ctx, "settings", metav1.GetOptions{}); err != nil {
		t.Errorf("the restored ConfigMap: %v", err)
	}

	wants("schedule create", velero("schedule", "create", "s1", "--schedule", "0 1 * * *", "--include-namespaces", "shop"),
		`Schedule "s1" created successfully`)
	for _, step := range []struct {
		verb   string
		paused bool
	}{{"pause", true}, {"unpause", false}} {
		velero("schedule", step.verb, "s1")
		s, err := c.Backstop.VeleroV1().Schedules(adminNamespace).Get(ctx, "s1", metav1.GetOptions{})
		if err != nil || s.Spec.Paused != step.paused {
			t.Errorf("after velero schedule %s: %v, paused %v", step.verb, err, s.Spec.Paused)
		}
	}

	wants("backup delete", velero("backup", "delete", "b1", "--confirm"), `Request to delete backup "b1" submitted successfully`)
	poll(t, "the backup to be deleted", 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, "b1", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// veleroCLI returns a runner of the velero CLI as the cluster admin, in
// the admin namespace, and a checker of its output.
func veleroCLI(t *testing.T, c *framework.Cluster) (run func(args ...string) string, wants func(what, out string, wants ...string)) {
	home := t.TempDir()
	run = func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, framework.Binary(t, "velero"), append([]string{"--kubeconfig", c.AdminKubeconfig, "-n", adminNamespace}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("velero %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	// wants checks for each of wants in out, with runs of white space as
	// one.
	wants = func(what, out string, wants ...string) {
		t.Helper()
		flat := strings.Join(strings.Fields(out), " ")
		for _, w := range wants {
			if !strings.Contains(flat, strings.Join(strings.Fields(w), " ")) {
				t.Errorf("%s: output lacks %q:\n%s", what, w, out)
			}
		}
		if strings.Contains(out, "<error") {
			t.Errorf("%s reports an error:\n%s", what, out)
		}
	}
	return run, wants
}

// downloadLink creates a DownloadRequest for the log of backup and returns
// its link.
func downloadLink(t *testing.T, c *framework.Cluster, backup string) string {
	t.Helper()
	dr, err := c.Backstop.VeleroV1().DownloadRequests(adminNamespace).Create(context.Background(), &velerov1.DownloadRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: backup + "-"},
		Spec:       velerov1.DownloadRequestSpec{Target: velerov1.DownloadTarget{Kind: velerov1.DownloadTargetKindBackupLog, Name: backup}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	poll(t, "the download request", time.Minute, func(ctx context.Context) (bool, error) {
		dr, err = c.Backstop.VeleroV1().DownloadRequests(adminNamespace).Get(ctx, dr.Name, metav1.GetOptions{})
		return err == nil && dr.Status.Phase == velerov1.DownloadRequestPhaseProcessed, err
	})
	return dr.Status.DownloadURL
}

// anonymousClient sends no credentials and trusts the CA the default
// storage location carries, as the velero CLI does.
func anonymousClient(t *testing.T, c *framework.Cluster) *http.Client {
	t.Helper()
	return conformance.LinkClient(context.Background(), t, c.Backstop, adminNamespace)
}

func get(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	// Logs are stored gzipped, and served as stored.
	if zr, err := gzip.NewReader(bytes.NewReader(body)); err == nil {
		if plain, err := io.ReadAll(zr); err == nil {
			body = plain
		}
	}
	return resp.StatusCode, string(body)
}
