package browser

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	kvbackupv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	"github.com/backstop-io/backstop/test/integration/framework"

	corev1 "k8s.io/api/core/v1"
)

// slowSource throttles the engines' requests (two a second, one item per
// list) so that a backup of a few dozen items runs for seconds, its
// progress written every second on the way.
var slowSource = []string{"--client-page-size=1", "--client-qps=2", "--client-burst=1"}

// show opens a view of the console (its URL's fragment).
func show(t *testing.T, browser context.Context, view string) {
	t.Helper()
	if _, err := chromedp.Run(browser, chromedp.Evaluate[any](fmt.Sprintf(`location.hash = %q`, "#/"+view))); err != nil {
		t.Fatalf("showing %s: %v", view, err)
	}
}

// waitShown waits until the console shows an element matching sel; on a
// timeout it fails with the page's text.
func waitShown(t *testing.T, browser context.Context, what, sel string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		text, _ := chromedp.Run(browser, chromedp.Evaluate[string](`document.body.innerText || document.body.innerHTML`))
		t.Fatalf("the console does not show %s (%s): %v; it shows:\n%s", what, sel, err, text)
	}
}

// typeInto empties the input sel names (as the page sees it: an input
// event), then types text into it.
func typeInto(t *testing.T, browser context.Context, sel, text string) {
	t.Helper()
	if _, err := chromedp.Run(browser, chromedp.Evaluate[any](fmt.Sprintf(`(() => {
		const input = document.querySelector(%q);
		input.value = "";
		input.dispatchEvent(new Event("input", { bubbles: true }));
	})()`, sel))); err != nil {
		t.Fatalf("emptying %s: %v", sel, err)
	}
	if err := chromedp.Do(browser, chromedp.SendKeys(chromedp.CSS(sel), text)); err != nil {
		t.Fatalf("typing into %s: %v", sel, err)
	}
}

// click presses the element sel names.
func click(t *testing.T, browser context.Context, sel string) {
	t.Helper()
	if err := chromedp.Do(browser, chromedp.Click(chromedp.CSS(sel))); err != nil {
		t.Fatalf("clicking %s: %v", sel, err)
	}
}

// consoleBytes is a size as the console writes it (format.jsx's bytes).
func consoleBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// createTrackers makes n VirtualMachineBackupTrackers in namespace: items a
// backup of it takes, and slowly under slowSource.
func createTrackers(t *testing.T, client versioned.Interface, namespace string, n int) {
	t.Helper()
	apiGroup := "kubevirt.io"
	for i := range n {
		if _, err := client.BackupV1alpha1().VirtualMachineBackupTrackers(namespace).Create(context.Background(), &kvbackupv1alpha1.VirtualMachineBackupTracker{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t%02d", i)},
			Spec: kvbackupv1alpha1.VirtualMachineBackupTrackerSpec{Source: corev1.TypedLocalObjectReference{
				APIGroup: &apiGroup, Kind: "VirtualMachine", Name: fmt.Sprintf("vm-%02d", i)}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConsoleAdmin: the admin's day in the console, standalone through
// kubectl proxy in Chromium, on a server whose engines are throttled so
// that runs take seconds: a backup created with the form, its progress
// bar seen moving, its page showing its log once stored; a restore of it
// created from the backups list and seen to its end; the backup deleted
// with a confirmation; a schedule's next runs on the timeline, paused,
// unpaused and triggered with its buttons; the storage locations. Every
// view passes the accessibility check, and its screenshot is taken.
func TestConsoleAdmin(t *testing.T) {
	// Locations measured every second (status.usage), the default one
	// checked every second.
	s := framework.Start(t, framework.Options{Args: append([]string{"--location-usage-interval=1s"}, slowSource...)})
	ctx := context.Background()
	if _, err := s.Clientset.VeleroV1().BackupStorageLocations(adminNamespace).Patch(ctx, "default", types.MergePatchType,
		[]byte(`{"spec":{"validationFrequency":"1s"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	createTrackers(t, s.Clientset, adminNamespace, 16)
	proxy := startProxy(t, s.KubeconfigPath)

	var backup string
	t.Run("a backup created with the form, its progress moving to Completed", func(t *testing.T) {
		browser := newBrowser(t)
		openConsole(t, browser, proxy, adminNamespace)
		waitShown(t, browser, "the backups", `section[data-kind=backups] table`)
		click(t, browser, `section[data-kind=backups] a[href="#/new-backup/backups"]`)
		waitShown(t, browser, "the backup form", `#backup-namespaces`)
		checkAccessibility(t, browser)
		screenshot(t, browser, "console-new-backup.png")
		if err := chromedp.Do(browser, chromedp.SendKeys(chromedp.CSS(`#backup-namespaces`), adminNamespace)); err != nil {
			t.Fatal(err)
		}
		// The page's progress bar and its live log's lines, sampled every
		// frame from here on.
		if _, err := chromedp.Run(browser, chromedp.Evaluate[any](`(() => {
			window.progressSeen = [];
			window.liveLinesSeen = [];
			const sample = () => {
				const p = document.querySelector("article[data-backup-page] progress");
				const v = p ? p.value + "/" + p.max : null;
				if (v && window.progressSeen[window.progressSeen.length - 1] !== v) window.progressSeen.push(v);
				const log = document.querySelector("article[data-backup-page] pre.log");
				const live = document.querySelector("article[data-backup-page] [data-log-live]");
				const n = log && live ? Number(log.dataset.logLines) : null;
				if (n && window.liveLinesSeen[window.liveLinesSeen.length - 1] !== n) window.liveLinesSeen.push(n);
				requestAnimationFrame(sample);
			};
			requestAnimationFrame(sample);
		})()`)); err != nil {
			t.Fatal(err)
		}
		click(t, browser, `form button[type=submit]`)
		waitShown(t, browser, "the new backup's page", `article[data-backup-page]`)
		name, err := chromedp.Run(browser, chromedp.Evaluate[string](`document.querySelector("article[data-backup-page]").dataset.backupPage`))
		if err != nil {
			t.Fatal(err)
		}
		backup = name
		// While it runs, its log is served as it grows: the logs
		// subresource answers before any log is stored.
		waitShown(t, browser, "the backup's live log", `article[data-backup-page] [data-log-live]`)
		running, err := s.Clientset.VeleroV1().Backups(adminNamespace).Get(ctx, backup, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		liveLog, err := s.Clientset.VeleroV1().RESTClient().Get().Namespace(adminNamespace).Resource("backups").Name(backup).SubResource("logs").DoRaw(ctx)
		if after, gerr := s.Clientset.VeleroV1().Backups(adminNamespace).Get(ctx, backup, metav1.GetOptions{}); gerr == nil && after.Status.Phase == velerov1.BackupPhaseInProgress &&
			(err != nil || !strings.Contains(string(liveLog), `msg="Backup started"`) || strings.Contains(string(liveLog), `msg="Backup completed"`)) {
			t.Errorf("the logs of the running backup (%s before, %s after): %v, %.300q; want its live log", running.Status.Phase, after.Status.Phase, err, liveLog)
		}
		waitShown(t, browser, "the backup Completed", `article[data-backup-page] [data-phase=Completed]`)
		seen, err := chromedp.Run(browser, chromedp.Evaluate[[]string](`window.progressSeen`))
		if err != nil {
			t.Fatal(err)
		}
		// At least two values short of the total, then the total.
		var partial, done, total int
		for _, v := range seen {
			if _, err := fmt.Sscanf(v, "%d/%d", &done, &total); err == nil && done < total {
				partial++
			}
		}
		if partial < 2 || done != total || total == 0 {
			t.Errorf("the progress bar showed %v: want it moving (two values short of the total, at least) to its total", seen)
		}
		b, err := s.Clientset.VeleroV1().Backups(adminNamespace).Get(ctx, backup, metav1.GetOptions{})
		if err != nil || strings.Join(b.Spec.IncludedNamespaces, ",") != adminNamespace {
			t.Fatalf("the backup the form created: %v, %+v", err, b)
		}
		// Its size, on its page.
		if size, err := chromedp.Run(browser, chromedp.Evaluate[string](`[...document.querySelectorAll("article[data-backup-page] dt")].find((dt) => dt.textContent === "Size in the location")?.nextElementSibling?.textContent ?? ""`)); err != nil ||
			b.Status.SizeBytes == 0 || size != consoleBytes(b.Status.SizeBytes) {
			t.Errorf("the backup's page shows the size %q (%v), want %q (status.sizeBytes %d)", size, err, consoleBytes(b.Status.SizeBytes), b.Status.SizeBytes)
		}
		// Its log, followed while it ran, read to its end once stored.
		waitShown(t, browser, "the backup's whole log", `pre.log[data-log-state=read]`)
		lines, err := chromedp.Run(browser, chromedp.Evaluate[int](`Number(document.querySelector("pre.log").dataset.logLines)`))
		liveLines, lerr := chromedp.Run(browser, chromedp.Evaluate[[]int](`window.liveLinesSeen`))
		if err != nil || lerr != nil || len(liveLines) < 2 || lines < liveLines[len(liveLines)-1] {
			t.Errorf("the backup's log grew through %v lines while it ran, then showed %d (%v, %v): want it growing, then whole", liveLines, lines, err, lerr)
		}
		if text, err := chromedp.Run(browser, chromedp.Evaluate[string](`document.querySelector("pre.log").textContent`)); err != nil ||
			strings.Count(text, `msg="Backup started"`) != 1 || strings.Count(text, `msg="Backup completed"`) != 1 {
			t.Errorf("the log shown (%v) does not hold each line once:\n%.2000s", err, text)
		}
		// Its resource list, read through a DownloadRequest: every item it
		// took.
		click(t, browser, `#resources-title + p button`)
		waitShown(t, browser, "the backup's resource list", `.resources[data-resource-count]`)
		count, err := chromedp.Run(browser, chromedp.Evaluate[int](`Number(document.querySelector(".resources").dataset.resourceCount)`))
		if b, gerr := s.Clientset.VeleroV1().Backups(adminNamespace).Get(ctx, backup, metav1.GetOptions{}); err != nil || gerr != nil ||
			b.Status.Progress == nil || count != b.Status.Progress.ItemsBackedUp {
			t.Errorf("the resource list shows %d items (%v, %v), want the backup's %+v", count, err, gerr, b.Status.Progress)
		}
		checkAccessibility(t, browser)
		screenshot(t, browser, "console-backup.png")
	})
	if backup == "" {
		t.Fatal("no backup to go on with")
	}

	t.Run("a restore created from the list, seen to its end", func(t *testing.T) {
		browser := newBrowser(t)
		openConsole(t, browser, proxy, adminNamespace)
		click(t, browser, fmt.Sprintf(`a[aria-label="Restore backup %s"]`, backup))
		waitShown(t, browser, "the restore form", `#restore-name`)
		checkAccessibility(t, browser)
		click(t, browser, `form button[type=submit]`)
		sel := fmt.Sprintf(`section[data-kind=restores] tr[data-name^=%q]`, backup+"-")
		waitShown(t, browser, "the restore", sel)
		waitShown(t, browser, "the restore Completed", sel+` [data-phase=Completed]`)
		restores, err := s.Clientset.VeleroV1().Restores(adminNamespace).List(ctx, metav1.ListOptions{})
		if err != nil || len(restores.Items) != 1 || restores.Items[0].Spec.BackupName != backup ||
			restores.Items[0].Status.Phase != velerov1.RestorePhaseCompleted {
			t.Fatalf("the restores after the form: %v, %+v", err, restores)
		}
		screenshot(t, browser, "console-restores.png")

		// Its page: its log, and its warnings (the backup's objects are
		// still there, each one a warning), read from its results.
		restore := restores.Items[0]
		click(t, browser, sel+" a")
		waitShown(t, browser, "the restore's log", `article[data-restore-page] pre.log`)
		if restore.Status.Warnings == 0 {
			t.Fatalf("the restore into the namespace it came from has no warnings: %+v", restore.Status)
		}
		click(t, browser, `#results-title + p button`)
		waitShown(t, browser, "the restore's warnings", `.results[data-warnings]`)
		warnings, err := chromedp.Run(browser, chromedp.Evaluate[int](`Number(document.querySelector(".results").dataset.warnings)`))
		if err != nil || warnings != restore.Status.Warnings {
			t.Errorf("the restore's page lists %d warnings (%v), its status counts %d", warnings, err, restore.Status.Warnings)
		}
		checkAccessibility(t, browser)
		screenshot(t, browser, "console-restore.png")
	})

	t.Run("schedules on the timeline, paused, unpaused and triggered", func(t *testing.T) {
		schedules := s.Clientset.VeleroV1().Schedules(adminNamespace)
		if _, err := schedules.Create(ctx, &velerov1.Schedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly"},
			Spec: velerov1.ScheduleSpec{Schedule: "0 3 * * *", Template: velerov1.BackupSpec{IncludedNamespaces: []string{adminNamespace}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := schedules.Create(ctx, &velerov1.Schedule{ObjectMeta: metav1.ObjectMeta{Name: "hourly"},
			Spec: velerov1.ScheduleSpec{Schedule: "@every 6h", Template: velerov1.BackupSpec{IncludedNamespaces: []string{adminNamespace}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		browser := newBrowser(t)
		openConsole(t, browser, proxy, adminNamespace)
		show(t, browser, "schedules")
		waitShown(t, browser, "the schedule", `section[data-kind=schedules] tr[data-name=nightly] [data-paused=false]`)
		// 48 hours: two runs of the nightly, eight of the other.
		runs, err := chromedp.Run(browser, chromedp.Evaluate[map[string]int](`Object.fromEntries([...document.querySelectorAll(".timeline g[data-schedule]")].map(g => [g.dataset.schedule, g.querySelectorAll("circle").length]))`))
		if err != nil || runs["nightly"] != 2 || runs["hourly"] != 8 {
			t.Errorf("runs on the timeline: %v (%v), want nightly 2 and hourly 8", runs, err)
		}
		if all, err := chromedp.Run(browser, chromedp.Evaluate[string](`document.querySelector(".timeline svg").dataset.runs`)); err != nil || all != "10" {
			t.Errorf("the timeline counts %q runs (%v), want 10", all, err)
		}
		checkAccessibility(t, browser)
		screenshot(t, browser, "console-schedules.png")

		click(t, browser, `button[aria-label="Pause schedule nightly"]`)
		waitShown(t, browser, "the schedule paused", `tr[data-name=nightly] [data-paused=true]`)
		if sc, err := schedules.Get(ctx, "nightly", metav1.GetOptions{}); err != nil || !sc.Spec.Paused {
			t.Errorf("the schedule after Pause: %v, paused=%v", err, sc != nil && sc.Spec.Paused)
		}
		click(t, browser, `button[aria-label="Unpause schedule nightly"]`)
		waitShown(t, browser, "the schedule unpaused", `tr[data-name=nightly] [data-paused=false]`)
		if sc, err := schedules.Get(ctx, "nightly", metav1.GetOptions{}); err != nil || sc.Spec.Paused {
			t.Errorf("the schedule after Unpause: %v, paused=%v", err, sc != nil && sc.Spec.Paused)
		}

		click(t, browser, `button[aria-label="Back up now with schedule nightly"]`)
		show(t, browser, "backups")
		sel := `section[data-kind=backups] tr[data-name^="nightly-"]`
		waitShown(t, browser, "the schedule's backup", sel)
		waitShown(t, browser, "the schedule's backup Completed", sel+` [data-phase=Completed]`)
		bs, err := s.Clientset.VeleroV1().Backups(adminNamespace).List(ctx, metav1.ListOptions{
			LabelSelector: labels.SelectorFromSet(labels.Set{velerov1.ScheduleNameLabel: "nightly"}).String()})
		if err != nil || len(bs.Items) != 1 {
			t.Errorf("backups of the schedule after its button: %v, %+v", err, bs)
		}
	})

	t.Run("a backup deleted after a confirmation", func(t *testing.T) {
		browser := newBrowser(t)
		openConsole(t, browser, proxy, adminNamespace)
		row := fmt.Sprintf(`section[data-kind=backups] tr[data-name=%q]`, backup)
		waitShown(t, browser, "the backup", row)
		// Asked, then kept: the question takes the focus (on Keep) and
		// gives it back to Delete.
		click(t, browser, fmt.Sprintf(`button[aria-label="Delete backup %s"]`, backup))
		// (The focus moves after the page paints: waited for.)
		waitShown(t, browser, "the confirmation, focused on Keep", fmt.Sprintf(`button[aria-label="Keep backup %s"]:focus`, backup))
		click(t, browser, fmt.Sprintf(`button[aria-label="Keep backup %s"]`, backup))
		waitShown(t, browser, "the Delete button again, focused", fmt.Sprintf(`button[aria-label="Delete backup %s"]:focus`, backup))
		if _, err := s.Clientset.VeleroV1().Backups(adminNamespace).Get(ctx, backup, metav1.GetOptions{}); err != nil {
			t.Fatalf("the backup after Keep: %v", err)
		}
		click(t, browser, fmt.Sprintf(`button[aria-label="Delete backup %s"]`, backup))
		// Asked again: nothing is deleted until the second press.
		waitShown(t, browser, "the confirmation", fmt.Sprintf(`button[aria-label="Yes, delete backup %s"]`, backup))
		if _, err := s.Clientset.VeleroV1().Backups(adminNamespace).Get(ctx, backup, metav1.GetOptions{}); err != nil {
			t.Fatalf("the backup before the confirmation: %v", err)
		}
		click(t, browser, fmt.Sprintf(`button[aria-label="Yes, delete backup %s"]`, backup))
		wctx, cancel := context.WithTimeout(browser, time.Minute)
		defer cancel()
		if err := chromedp.Do(wctx, chromedp.WaitNotPresent(chromedp.CSS(row))); err != nil {
			t.Fatalf("the deleted backup is still shown: %v", err)
		}
		if _, err := s.Clientset.VeleroV1().Backups(adminNamespace).Get(ctx, backup, metav1.GetOptions{}); err == nil {
			t.Errorf("the backup is still there after its deletion was shown")
		}
	})

	t.Run("a running backup cancelled with its button", func(t *testing.T) {
		backups := s.Clientset.VeleroV1().Backups(adminNamespace)
		if _, err := backups.Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "running"},
			Spec: velerov1.BackupSpec{IncludedNamespaces: []string{adminNamespace}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		browser := newBrowser(t)
		openConsole(t, browser, proxy, adminNamespace)
		waitShown(t, browser, "the backup running", `tr[data-name=running] [data-phase=InProgress]`)
		click(t, browser, `button[aria-label="Cancel backup running"]`)
		waitShown(t, browser, "the backup ended", `tr[data-name=running] [data-phase=Failed]`)
		b, err := backups.Get(ctx, "running", metav1.GetOptions{})
		if err != nil || b.Status.Phase != velerov1.BackupPhaseFailed || b.Status.FailureReason != velerov1.BackupCancelledReason {
			t.Errorf("the running backup after its Cancel button: %v, %+v", err, b.Status)
		}
	})

	t.Run("storage locations", func(t *testing.T) {
		browser := newBrowser(t)
		openConsole(t, browser, proxy, adminNamespace)
		show(t, browser, "locations")
		waitShown(t, browser, "the default location Available", `section[data-kind=backupstoragelocations] tr[data-name=default] [data-phase=Available]`)
		// Its space over time: from empty at the start to the backups'.
		waitShown(t, browser, "the default location's usage", `figure.usage[data-location=default]`)
		usage, err := chromedp.Run(browser, chromedp.Evaluate[map[string]string](`({...document.querySelector("figure.usage[data-location=default]").dataset})`))
		if samples, _ := strconv.Atoi(usage["samples"]); err != nil || samples < 2 || usage["minBytes"] != "0" || usage["maxBytes"] == "0" {
			t.Errorf("the default location's usage chart: %v (%v), want samples from empty to the backups' bytes", usage, err)
		}
		checkAccessibility(t, browser)
		screenshot(t, browser, "console-locations.png")
	})
}
