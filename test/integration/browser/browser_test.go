// Package browser tests Backstop as a user's browser reaches it: Debian's
// Chromium (hack/install-chromium.sh), headless, driven with chromedp,
// through `kubectl proxy`, which answers any page the browser opens with
// the user's credentials.
package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestMain runs the tests in a network namespace of their own (as the
// cluster suite does): the browser, kubectl proxy, the servers and the
// control plane reach nothing outside the machine.
func TestMain(m *testing.M) { os.Exit(framework.RunInNetNS(m)) }

// adminNamespace is the standalone server's admin namespace.
const adminNamespace = "backstop-system"

// chromiumPath is Debian's Chromium.
const chromiumPath = "/usr/bin/chromium"

// startProxy runs `kubectl proxy` with a kubeconfig on a port of its
// choosing on loopback and returns its URL; it stops with the test.
func startProxy(t *testing.T, kubeconfig string) string {
	t.Helper()
	cmd := exec.Command(framework.Binary(t, "kubectl"), "--kubeconfig", kubeconfig, "proxy", "--address=127.0.0.1", "--port=0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	serving := regexp.MustCompile(`Starting to serve on (127\.0\.0\.1:\d+)`)
	found := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if m := serving.FindStringSubmatch(scanner.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case addr := <-found:
		return "http://" + addr
	case <-time.After(30 * time.Second):
		t.Fatal("kubectl proxy did not say where it serves within 30 s")
		return ""
	}
}

// newBrowser starts headless Chromium; it ends with the test.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("Chromium is not installed (hack/install-chromium.sh, run by make test's setup): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath), chromedp.NoSandbox,
		chromedp.UserDataDir(filepath.Join(t.TempDir(), "profile")))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancelBrowser()
		cancelAlloc()
	})
	return ctx
}

// attackerPage is a page of another site that tries to cancel a backup
// through the user's `kubectl proxy` three ways: a script's no-cors POST
// (no preflight), a script's JSON POST with a custom header (preflighted),
// and an HTML form posted into a frame (no preflight). It records what
// the browser let it see in window.results and sets its title to "done".
const attackerPage = `<!doctype html>
<html><head><title>offer</title></head><body>
<form id="form" method="POST" action="%[1]s" target="sink" enctype="application/x-www-form-urlencoded">
<input type="hidden" name="confirm" value="yes"></form>
<iframe name="sink" id="sink"></iframe>
<script>
(async () => {
  const results = {};
  try {
    await fetch(%[1]q, {method: "POST", mode: "no-cors", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "confirm=yes"});
    results.noCors = "sent";
  } catch (e) { results.noCors = "error: " + e; }
  try {
    const r = await fetch(%[1]q, {method: "POST", headers: {"Content-Type": "application/json", "X-Backstop-Console": "1"}, body: "{}"});
    results.json = "answered " + r.status;
  } catch (e) { results.json = "blocked"; }
  const sink = document.getElementById("sink");
  await new Promise(resolve => { sink.onload = resolve; document.getElementById("form").submit(); });
  results.form = "submitted";
  window.results = results;
  document.title = "done";
})();
</script></body></html>`

// TestForeignPageCannotWrite: a page of another site, opened in the
// user's browser while the user runs `kubectl proxy`, cannot cancel a
// backup: the JSON request fails its preflight in the browser, and the
// requests that need none (a no-cors fetch, an HTML form) reach the server
// and are refused there (its log says so) before the API; the backup is
// not cancelled. The same form POST without a browser's headers, through
// the same proxy, cancels it: what the refusal stops is real.
func TestForeignPageCannotWrite(t *testing.T) {
	// The backup engines off: the backup stays New, which a cancel marks.
	s := framework.Start(t, framework.Options{Args: []string{"--disable-controllers=" + velerov1.EngineBackupQueue + "," + velerov1.EngineBackup}})
	ctx := context.Background()
	backups := s.Clientset.VeleroV1().Backups(adminNamespace)
	if _, err := backups.Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "target", Namespace: adminNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, s.KubeconfigPath)
	cancelURL := proxy + "/apis/velero.io/v1/namespaces/" + adminNamespace + "/backups/target/cancel"

	// The attacker's site: localhost, another site than 127.0.0.1.
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	site := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, attackerPage, cancelURL)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = site.Serve(listener) }()
	t.Cleanup(func() { _ = site.Close() })
	pageURL := fmt.Sprintf("http://localhost:%d/offer", listener.Addr().(*net.TCPAddr).Port)

	browser := newBrowser(t)
	if err := chromedp.Do(browser, chromedp.Navigate(pageURL),
		chromedp.Poll[chromedp.Void](`document.title === "done"`, chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("the attacker's page: %v", err)
	}
	results, err := chromedp.Run(browser, chromedp.Evaluate[string](`JSON.stringify(window.results)`))
	if err != nil {
		t.Fatalf("the attacker's page's results: %v", err)
	}
	var seen struct{ NoCors, JSON, Form string }
	if err := json.Unmarshal([]byte(results), &seen); err != nil {
		t.Fatalf("the page's results %q: %v", results, err)
	}
	if seen.JSON != "blocked" || seen.NoCors != "sent" || seen.Form != "submitted" {
		t.Errorf("the page saw %+v, want the JSON request blocked by its preflight, the no-cors fetch and the form sent", seen)
	}
	if b, err := backups.Get(ctx, "target", metav1.GetOptions{}); err != nil || b.Spec.Cancel {
		t.Fatalf("the backup after the attacker's page: %v, cancel=%v; want it untouched", err, b != nil && b.Spec.Cancel)
	}
	log, err := os.ReadFile(filepath.Join(s.DataDir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	if refused := strings.Count(string(log), "Refused a browser's cross-origin write"); refused < 2 {
		t.Errorf("the server refused %d cross-origin writes, want the no-cors fetch's and the form's", refused)
	}

	t.Run("the same request without a browser's headers cancels", func(t *testing.T) {
		resp, err := http.PostForm(cancelURL, url.Values{"confirm": {"yes"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if b, err := backups.Get(ctx, "target", metav1.GetOptions{}); err != nil || !b.Spec.Cancel || resp.StatusCode != http.StatusOK {
			t.Errorf("a form POST through the proxy without a browser's headers: %d, backup %v cancel=%v", resp.StatusCode, err, b != nil && b.Spec.Cancel)
		}
	})
}
