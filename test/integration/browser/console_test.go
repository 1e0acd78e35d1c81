package browser

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	consoleregistry "github.com/backstop-io/backstop/pkg/registry/console/console"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// screenshotsEnv names a directory the console's screenshots are also
// written to (make console-screenshots: docs/images).
const screenshotsEnv = "BACKSTOP_CONSOLE_SCREENSHOTS"

// waitPhase waits until the console shows backup name in phase.
func waitPhase(t *testing.T, browser context.Context, name string, phase velerov1.BackupPhase) {
	t.Helper()
	waitShown(t, browser, fmt.Sprintf("backup %s %s", name, phase), fmt.Sprintf(`tr[data-name=%q] [data-phase=%q]`, name, phase))
}

// screenshot takes a picture of the page, checks it is one, and writes
// it as name to the directory screenshotsEnv names (when it names one).
func screenshot(t *testing.T, browser context.Context, name string) {
	t.Helper()
	shot, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil || img.Bounds().Dx() < 800 {
		t.Fatalf("screenshot %s: %v, %v", name, err, img)
	}
	if dir := os.Getenv(screenshotsEnv); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, name), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// openConsole opens namespace's console through the kubectl proxy at
// proxy, with more actions after the navigation.
func openConsole(t *testing.T, browser context.Context, proxy, namespace string, then ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(browser, append([]chromedp.Action[chromedp.Void]{chromedp.EmulateViewport(1400, 800),
		chromedp.Navigate(proxy + consoleregistry.Path(namespace))}, then...)...); err != nil {
		t.Fatalf("the console of %s: %v", namespace, err)
	}
}

// TestConsoleBackups: an admin opens the console of the admin namespace
// through kubectl proxy in Chromium: the backups there and those created
// after are shown live (a watch), each reaching Completed; on a server
// whose backup engine is off (backups wait ReadyToStart), the Cancel
// button of a waiting backup cancels it through the same proxy (the
// console's write is same-origin: the cross-origin filter lets it
// through) and the page shows it Failed.
func TestConsoleBackups(t *testing.T) {
	t.Run("backups are shown live to their end", func(t *testing.T) {
		s := framework.Start(t, framework.Options{})
		ctx := context.Background()
		backups := s.Clientset.VeleroV1().Backups(adminNamespace)
		if _, err := backups.Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "before"},
			Spec: velerov1.BackupSpec{IncludedNamespaces: []string{adminNamespace}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		proxy := startProxy(t, s.KubeconfigPath)
		browser := newBrowser(t)
		openConsole(t, browser, proxy, adminNamespace)
		waitPhase(t, browser, "before", velerov1.BackupPhaseCompleted)
		if _, err := backups.Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "after"},
			Spec: velerov1.BackupSpec{IncludedNamespaces: []string{adminNamespace}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPhase(t, browser, "after", velerov1.BackupPhaseCompleted)
		screenshot(t, browser, "console-backups.png")
	})

	t.Run("a waiting backup cancelled with its button", func(t *testing.T) {
		s := framework.Start(t, framework.Options{Args: []string{"--disable-controllers=" + velerov1.EngineBackup}})
		ctx := context.Background()
		backups := s.Clientset.VeleroV1().Backups(adminNamespace)
		if _, err := backups.Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "waiting"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		proxy := startProxy(t, s.KubeconfigPath)
		browser := newBrowser(t)
		openConsole(t, browser, proxy, adminNamespace)
		waitPhase(t, browser, "waiting", velerov1.BackupPhaseReadyToStart)
		if err := chromedp.Do(browser, chromedp.Click(chromedp.CSS(`button[aria-label="Cancel backup waiting"]`))); err != nil {
			t.Fatal(err)
		}
		waitPhase(t, browser, "waiting", velerov1.BackupPhaseFailed)
		b, err := backups.Get(ctx, "waiting", metav1.GetOptions{})
		if err != nil || !b.Spec.Cancel || b.Status.FailureReason != velerov1.BackupCancelledReason {
			t.Errorf("the backup after its Cancel button: %v, cancel=%v, reason %q", err, b != nil && b.Spec.Cancel, b.Status.FailureReason)
		}
	})
}

// TestConsoleThroughKubeAPIServer: the console as a cluster's users open
// it, through kubectl proxy to kube-apiserver, which proxies the group
// console.backstop.io/v1 to Backstop with the user's identity: the admin
// sees a backup reach Completed; a tenant with edit in its namespace opens
// that namespace's console, and kube-apiserver's RBAC refuses it another's.
func TestConsoleThroughKubeAPIServer(t *testing.T) {
	c := framework.StartCluster(t)
	ctx := context.Background()

	t.Run("the admin's backups", func(t *testing.T) {
		if _, err := c.Backstop.VeleroV1().Backups(adminNamespace).Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "nightly"},
			Spec: velerov1.BackupSpec{IncludedNamespaces: []string{adminNamespace}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		proxy := startProxy(t, c.AdminKubeconfig)
		browser := newBrowser(t)
		openConsole(t, browser, proxy, adminNamespace)
		waitPhase(t, browser, "nightly", velerov1.BackupPhaseCompleted)
		// Its resource list, read through the download request's content
		// subresource as kube-apiserver's links name it.
		show(t, browser, "backups/nightly")
		click(t, browser, `#resources-title + p button`)
		waitShown(t, browser, "the backup's resource list", `.resources[data-resource-count]`)
		// Its Events, which the cluster keeps.
		waitShown(t, browser, "the backup's Events", `ul.events[data-events]`)

		// A schedule paused and triggered with its buttons, through
		// kube-apiserver's proxy (the subresources' POSTs).
		schedules := c.Backstop.VeleroV1().Schedules(adminNamespace)
		if _, err := schedules.Create(ctx, &velerov1.Schedule{ObjectMeta: metav1.ObjectMeta{Name: "weekly"},
			Spec: velerov1.ScheduleSpec{Schedule: "0 4 * * 0", Template: velerov1.BackupSpec{IncludedNamespaces: []string{adminNamespace}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		show(t, browser, "schedules")
		click(t, browser, `button[aria-label="Pause schedule weekly"]`)
		waitShown(t, browser, "the schedule paused", `tr[data-name=weekly] [data-paused=true]`)
		if sc, err := schedules.Get(ctx, "weekly", metav1.GetOptions{}); err != nil || !sc.Spec.Paused {
			t.Errorf("the schedule after Pause: %v, paused=%v", err, sc != nil && sc.Spec.Paused)
		}
		click(t, browser, `button[aria-label="Back up now with schedule weekly"]`)
		show(t, browser, "backups")
		waitShown(t, browser, "the schedule's backup Completed", `section[data-kind=backups] tr[data-name^="weekly-"] [data-phase=Completed]`)
	})

	t.Run("a tenant's own console, not another's", func(t *testing.T) {
		for _, ns := range []string{"team-a", "team-b"} {
			if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if out, err := c.Kubectl(c.AdminKubeconfig, nil, "create", "rolebinding", "alice-edit", "--clusterrole", "edit", "--user", "alice", "-n", "team-a"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		proxy := startProxy(t, c.UserKubeconfig("alice"))
		status := func(ns string) int {
			resp, err := http.Get(proxy + consoleregistry.Path(ns))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		// edit carries backstop:console:view once kube-controller-manager
		// has aggregated it.
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return status("team-a") == http.StatusOK, nil
		}); err != nil {
			t.Fatalf("alice's console in team-a: %d, want 200", status("team-a"))
		}
		if got := status("team-b"); got != http.StatusForbidden {
			t.Errorf("team-b's console, as alice: %d, want 403", got)
		}
		browser := newBrowser(t)
		// Her rights read, her NonAdminBackups listed (an empty table), no
		// error shown.
		openConsole(t, browser, proxy, "team-a", chromedp.WaitVisible(chromedp.CSS(`section[data-kind=nonadminbackups] table`)))
		if alerts, err := chromedp.Run(browser, chromedp.Evaluate[[]string](`[...document.querySelectorAll("[role=alert]")].map(e => e.innerText)`)); err != nil || len(alerts) > 0 {
			t.Errorf("alice's console shows errors %v (%v)", alerts, err)
		}
	})
}

// axeScript is axe-core, from the console's locked npm packages
// (web/console/node_modules, installed by hack/build-console.sh).
var axeScript = filepath.Join("..", "..", "..", "web", "console", "node_modules", "axe-core", "axe.min.js")

// seriousViolations runs axe-core on the page (WCAG 2 A and AA rules,
// best practices) and returns its serious and critical violations.
func seriousViolations(t *testing.T, browser context.Context) []string {
	t.Helper()
	script, err := os.ReadFile(axeScript)
	if err != nil {
		t.Fatalf("axe-core (npm ci in web/console: hack/build-console.sh): %v", err)
	}
	if _, err := chromedp.Run(browser, chromedp.Evaluate[any](string(script))); err != nil {
		t.Fatalf("loading axe-core: %v", err)
	}
	type violation struct {
		ID, Impact, Help string
		Nodes            []struct{ Target []string }
	}
	found, err := chromedp.Run(browser, chromedp.Evaluate[[]violation](
		`axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations)`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe-core: %v", err)
	}
	var serious []string
	for _, v := range found {
		if v.Impact == "serious" || v.Impact == "critical" {
			serious = append(serious, fmt.Sprintf("%s (%s): %s, at %v", v.ID, v.Impact, v.Help, v.Nodes))
		}
	}
	return serious
}

// checkAccessibility fails the test on a serious or critical violation of
// the page; it shows first that the check sees one (a button without a
// name, added to a copy of the page and taken out again).
func checkAccessibility(t *testing.T, browser context.Context) {
	t.Helper()
	if found := seriousViolations(t, browser); len(found) > 0 {
		t.Errorf("accessibility: %v", found)
	}
	if _, err := chromedp.Run(browser, chromedp.Evaluate[any](`(() => { const b = document.createElement("button"); b.id = "axe-control"; document.body.append(b); })()`)); err != nil {
		t.Fatal(err)
	}
	control := seriousViolations(t, browser)
	if _, err := chromedp.Run(browser, chromedp.Evaluate[any](`document.getElementById("axe-control").remove()`)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(control, " "), "button-name") {
		t.Errorf("axe-core did not report a button without a name: %v", control)
	}
}

// TestConsoleTenant: a tenant with edit in its namespace opens that
// namespace's console through kubectl proxy with its own kubeconfig: it
// sees its NonAdminBackup reach Completed and nothing of another tenant's,
// the admin's Backups section is not there, and no request the page sent
// was refused (the console reads the user's rights first); the page has
// no serious accessibility violation.
func TestConsoleTenant(t *testing.T) {
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	if out, err := s.Kubectl(nil, "create", "rolebinding", "alice-edit", "--clusterrole", "edit", "--user", "alice", "-n", "alice"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	kubeconfig := s.IssueKubeconfig("alice")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	alice, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, nab := range []struct {
		client    versioned.Interface
		namespace string
		name      string
	}{{alice, "alice", "mine"}, {s.Clientset, "bob", "bobs"}} {
		if _, err := nab.client.OadpV1alpha1().NonAdminBackups(nab.namespace).Create(ctx, &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: nab.name},
			Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Her schedule (its first run skipped: nothing runs meanwhile).
	if _, err := alice.OadpV1alpha1().NonAdminSchedules("alice").Create(ctx, &oadpv1alpha1.NonAdminSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly"},
		Spec: oadpv1alpha1.NonAdminScheduleSpec{Schedule: "0 3 * * *", SkipImmediately: true,
			Template: oadpv1alpha1.NonAdminScheduleTemplate{BackupSpec: &velerov1.BackupSpec{}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, kubeconfig)
	browser := newBrowser(t)
	var mu sync.Mutex
	var refused []string
	if err := chromedp.Listen(browser, func(ev any) {
		if r, ok := ev.(*network.EventResponseReceived); ok && r.Response.Status >= 400 {
			mu.Lock()
			refused = append(refused, fmt.Sprintf("%d %s", r.Response.Status, r.Response.URL))
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	openConsole(t, browser, proxy, "alice")
	waitPhase(t, browser, "mine", velerov1.BackupPhaseCompleted)
	sections, err := chromedp.Run(browser, chromedp.Evaluate[[]string](`[...document.querySelectorAll("section[data-kind]")].map(s => s.dataset.kind)`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(sections, ",") != "nonadminbackups" {
		t.Errorf("alice's console shows the sections %v, want only nonadminbackups", sections)
	}
	text, err := chromedp.Run(browser, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil || strings.Contains(text, "bobs") {
		t.Errorf("alice's console shows bob's backup (%v):\n%s", err, text)
	}
	mu.Lock()
	if len(refused) > 0 {
		t.Errorf("requests of alice's console refused: %v", refused)
	}
	mu.Unlock()
	checkAccessibility(t, browser)
	screenshot(t, browser, "console-tenant.png")

	// Her other views: her kinds only, each accessible; then a restore of
	// her backup, created from her list and seen to its end.
	for _, view := range []struct{ name, kind string }{
		{"restores", "nonadminrestores"}, {"schedules", "nonadminschedules"}, {"locations", "nonadminbackupstoragelocations"},
	} {
		show(t, browser, view.name)
		waitShown(t, browser, "alice's "+view.name, fmt.Sprintf(`section[data-kind=%s] table`, view.kind))
		sections, err := chromedp.Run(browser, chromedp.Evaluate[[]string](`[...document.querySelectorAll("section[data-kind]")].map(s => s.dataset.kind)`))
		if err != nil || strings.Join(sections, ",") != view.kind {
			t.Errorf("alice's %s view shows the sections %v (%v), want only %s", view.name, sections, err, view.kind)
		}
		checkAccessibility(t, browser)
	}
	// Her schedule paused with its button: a patch of her NonAdminSchedule.
	show(t, browser, "schedules")
	click(t, browser, `button[aria-label="Pause schedule nightly"]`)
	waitShown(t, browser, "her schedule paused", `section[data-kind=nonadminschedules] tr[data-name=nightly] [data-paused=true]`)
	if nas, err := alice.OadpV1alpha1().NonAdminSchedules("alice").Get(ctx, "nightly", metav1.GetOptions{}); err != nil || !nas.Spec.Paused {
		t.Errorf("her schedule after Pause: %v, paused %v", err, nas.Spec.Paused)
	}
	// A backup made with her form: a NonAdminBackup of her namespace, run
	// to its end, its page showing its log and size.
	show(t, browser, "backups")
	click(t, browser, `section[data-kind=nonadminbackups] a[href="#/new-backup/nonadminbackups"]`)
	waitShown(t, browser, "her backup form", `#backup-name`)
	if text, err := chromedp.Run(browser, chromedp.Evaluate[string](`document.querySelector("form").innerText`)); err != nil ||
		!strings.Contains(text, "Backs up alice.") || strings.Contains(text, "Namespaces") {
		t.Errorf("her form (%v) does not say it backs up her namespace alone:\n%s", err, text)
	}
	checkAccessibility(t, browser)
	typeInto(t, browser, "#backup-name", "from-the-form")
	click(t, browser, `form button[type=submit]`)
	waitShown(t, browser, "her new backup's page", `article[data-backup-page="from-the-form"] [data-phase=Completed]`)
	waitShown(t, browser, "her new backup's log", `article[data-backup-page="from-the-form"] pre.log[data-log-state=read]`)
	if nab, err := alice.OadpV1alpha1().NonAdminBackups("alice").Get(ctx, "from-the-form", metav1.GetOptions{}); err != nil ||
		nab.Status.VeleroBackup == nil || nab.Status.VeleroBackup.Status == nil || nab.Status.VeleroBackup.Status.SizeBytes == 0 {
		t.Errorf("her backup from the form: %v, %+v", err, nab.Status.VeleroBackup)
	} else if size, err := chromedp.Run(browser, chromedp.Evaluate[string](`[...document.querySelectorAll("article[data-backup-page] dt")].find((dt) => dt.textContent === "Size in the location")?.nextElementSibling?.textContent ?? ""`)); err != nil ||
		size != consoleBytes(nab.Status.VeleroBackup.Status.SizeBytes) {
		t.Errorf("her backup's page shows the size %q (%v), want %q", size, err, consoleBytes(nab.Status.VeleroBackup.Status.SizeBytes))
	}
	show(t, browser, "backups")
	click(t, browser, `a[aria-label="Restore backup mine"]`)
	waitShown(t, browser, "the restore form", `#restore-name`)
	click(t, browser, `form button[type=submit]`)
	waitShown(t, browser, "her restore Completed", `section[data-kind=nonadminrestores] tr[data-name^="mine-"] [data-phase=Completed]`)
	nars, err := alice.OadpV1alpha1().NonAdminRestores("alice").List(ctx, metav1.ListOptions{})
	if err != nil || len(nars.Items) != 1 || nars.Items[0].Spec.RestoreSpec == nil || nars.Items[0].Spec.RestoreSpec.BackupName != "mine" {
		t.Errorf("alice's restores after the form: %v, %+v", err, nars)
	}
	mu.Lock()
	if len(refused) > 0 {
		t.Errorf("requests of alice's console refused: %v", refused)
	}
	mu.Unlock()
}

// largeList is how many backups TestConsoleLargeList lists.
const largeList = 10000

// TestConsoleLargeList: the console of a namespace of 10,000 backups
// opens, shows every one and scrolls to the last; the time from the
// navigation to the painted list is measured in the browser (the page's
// performance mark) and printed (docs/benchmarks.md, "Console").
func TestConsoleLargeList(t *testing.T) {
	// The engines that would run the backups off: the backups stay New.
	s := framework.Start(t, framework.Options{Args: []string{"--disable-controllers=" + velerov1.EngineBackupQueue + "," + velerov1.EngineBackup}})
	ctx := context.Background()
	backups := s.Clientset.VeleroV1().Backups(adminNamespace)
	names := make(chan int)
	var g errgroup.Group
	for range 16 {
		g.Go(func() error {
			for i := range names {
				if _, err := backups.Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("b-%05d", i)}}, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	for i := range largeList {
		names <- i
	}
	close(names)
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, s.KubeconfigPath)
	browser := newBrowser(t)
	openConsole(t, browser, proxy, adminNamespace,
		chromedp.Poll[chromedp.Void](`performance.getEntriesByName("console:backups:listed").length > 0`, chromedp.WithPollingTimeout(2*time.Minute)))
	type mark struct {
		StartTime float64
		Detail    int
	}
	listed, err := chromedp.Run(browser, chromedp.Evaluate[mark](`(() => { const m = performance.getEntriesByName("console:backups:listed")[0]; return {startTime: m.startTime, detail: m.detail}; })()`))
	if err != nil {
		t.Fatal(err)
	}
	shown, err := chromedp.Run(browser, chromedp.Evaluate[int](`Number(document.querySelector("section[data-kind=backups] .count").dataset.count)`))
	if err != nil || shown != largeList || listed.Detail != largeList {
		t.Fatalf("the console counts %d backups (%v), listed %d; want %d", shown, err, listed.Detail, largeList)
	}
	// Rows are drawn as they are scrolled to: the last (the 10,000th, row
	// 10,001 with the header) is on screen once the page is scrolled to
	// its end.
	if _, err := chromedp.Run(browser, chromedp.Evaluate[any](`window.scrollTo(0, document.documentElement.scrollHeight)`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(browser, chromedp.Poll[chromedp.Void](fmt.Sprintf(`(() => {
		window.scrollTo(0, document.documentElement.scrollHeight);
		const row = document.querySelector('section[data-kind=backups] tr[aria-rowindex="%d"]');
		if (!row) return false;
		const r = row.getBoundingClientRect();
		return r.top >= 0 && r.bottom <= window.innerHeight; })()`, largeList+1), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		where, _ := chromedp.Run(browser, chromedp.Evaluate[string](`(() => {
			const rows = [...document.querySelectorAll("section[data-kind=backups] tbody tr[data-name]")];
			const last = rows[rows.length - 1];
			return JSON.stringify({rows: rows.length, first: rows[0]?.dataset.name, last: last?.dataset.name,
				lastRect: last?.getBoundingClientRect(), rowHeight: rows[0]?.getBoundingClientRect().height,
				scrollY: window.scrollY, innerHeight: window.innerHeight, scrollHeight: document.documentElement.scrollHeight}); })()`))
		t.Errorf("the last backup after scrolling to the end is not on screen: %v; %s", err, where)
	}
	drawn, err := chromedp.Run(browser, chromedp.Evaluate[int](`document.querySelectorAll("section[data-kind=backups] tbody tr[data-name]").length`))
	if err != nil || drawn == 0 || drawn > 500 {
		t.Errorf("%d rows drawn (%v): want the window's, not all %d", drawn, err, largeList)
	}
	// The filter finds what is not drawn: ten names, then one.
	for _, f := range []struct {
		text  string
		names int
	}{{"b-0999", 10}, {" B-00042 ", 1}} {
		typeInto(t, browser, "#backups-filter", f.text)
		waitShown(t, browser, fmt.Sprintf("%d backups filtered by %q", f.names, f.text), fmt.Sprintf(`#backups-filtered[data-shown="%d"]`, f.names))
		names, err := chromedp.Run(browser, chromedp.Evaluate[[]string](`[...document.querySelectorAll("section[data-kind=backups] tbody tr[data-name]")].map((r) => r.dataset.name)`))
		want := strings.ToLower(strings.TrimSpace(f.text))
		if err != nil || len(names) != f.names {
			t.Errorf("filtered by %q, the rows %v (%v), want %d", f.text, names, err, f.names)
		}
		for _, n := range names {
			if !strings.Contains(n, want) {
				t.Errorf("filtered by %q, a row of %s", f.text, n)
			}
		}
	}
	checkAccessibility(t, browser)
	t.Logf("the console's list of %d backups painted %.0f ms after the navigation began", largeList, listed.StartTime)
	fmt.Printf("console: %d backups listed and painted in %.0f ms\n", largeList, listed.StartTime)
}
