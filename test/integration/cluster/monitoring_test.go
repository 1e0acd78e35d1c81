package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// mixinDir holds Velero's Grafana mixins as published (testdata/mixin,
// SOURCE.md says from where).
const mixinDir = "testdata/mixin"

// dashboardQuery is one query of a dashboard: a panel's target, or a
// template variable's (label_values).
type dashboardQuery struct {
	dashboard, panel, expr string
	variable               bool
}

// dashboardQueries reads every query of a Grafana dashboard's JSON.
func dashboardQueries(t *testing.T, file string) []dashboardQuery {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var board struct {
		Title      string            `json:"title"`
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &board); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var out []dashboardQuery
	var panels func([]json.RawMessage)
	panels = func(list []json.RawMessage) {
		for _, raw := range list {
			var p struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
				Panels []json.RawMessage `json:"panels"`
			}
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			for _, target := range p.Targets {
				if target.Expr != "" {
					out = append(out, dashboardQuery{dashboard: board.Title, panel: p.Title, expr: target.Expr})
				}
			}
			panels(p.Panels)
		}
	}
	panels(board.Panels)
	for _, v := range board.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q string
		if json.Unmarshal(v.Query, &q) != nil {
			var obj struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &obj); err != nil {
				t.Fatalf("%s: variable %s: %v", file, v.Name, err)
			}
			q = obj.Query
		}
		out = append(out, dashboardQuery{dashboard: board.Title, panel: "$" + v.Name, expr: q, variable: true})
	}
	return out
}

var (
	labelValues   = regexp.MustCompile(`^label_values\((.*),\s*([A-Za-z_]+)\)$`)
	anyLabelValue = regexp.MustCompile(`^label_values\(([A-Za-z_]+)\)$`)
)

// promQL is what Grafana sends for a query: its variables given, and a
// template variable's label_values(metric, label) as the series it
// reads.
func promQL(q dashboardQuery, instance string) string {
	expr := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$job", framework.PrometheusJob,
		"$cluster", framework.PrometheusCluster, "$instance", instance, "$schedule", ".*", "$top_cluster_count", "10").Replace(q.expr)
	if m := labelValues.FindStringSubmatch(expr); q.variable && m != nil {
		return fmt.Sprintf("count by (%s) (%s)", m[2], m[1])
	}
	if m := anyLabelValue.FindStringSubmatch(expr); q.variable && m != nil {
		return fmt.Sprintf(`count by (%s) ({%s!=""})`, m[1], m[1])
	}
	return expr
}

// upstreamBroken are the published queries that show nothing against
// Velero either: the old mixin's "Backup Duration" panel reads
// backup_duration_seconds, without Velero's prefix.
var upstreamBroken = map[string]bool{
	`backup_duration_seconds{job=~"$job", instance=~"$instance", cluster=~"$cluster", schedule=~"$schedule"}`: true,
}

// What Backstop ships for monitoring (artifacts/monitoring, rendered from
// the chart by hack/update-deploy.sh): the alert rules as a Prometheus
// rule file, the dashboard as Grafana imports it.
const (
	shippedRules     = "prometheus-rules.yaml"
	shippedDashboard = "grafana-dashboard.json"
)

// monitoringDir is artifacts/monitoring of this module.
func monitoringDir(t *testing.T) string { return framework.ArtifactsDir(t, "monitoring") }

// readsNothingHere: the shipped dashboard's VM panels read series of
// VirtualMachineBackups, which this scenario makes none of (the VM suites
// check those series at /metrics).
func readsNothingHere(expr string) bool {
	return strings.Contains(expr, "backstop_vm_backup_")
}

// verifyBackup asks for a verification of a backup (its annotation) and
// returns the reason of its Verified condition once that request is
// answered.
func verifyBackup(t *testing.T, c *framework.Cluster, name, request string) string {
	t.Helper()
	ctx := context.Background()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, velerov1.VerifyAnnotation, request)
	if _, err := c.Backstop.VeleroV1().Backups(adminNamespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var reason string
	poll(t, "the verification "+request+" of backup "+name, 2*time.Minute, func(ctx context.Context) (bool, error) {
		b, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		v := b.Status.Verification
		if v == nil || v.Request != request || v.CompletionTimestamp == nil {
			return false, nil
		}
		if cond := meta.FindStatusCondition(b.Status.Conditions, velerov1.BackupConditionVerified); cond != nil {
			reason = cond.Reason
		}
		return true, nil
	})
	return reason
}

// TestPrometheusMixins: a real Prometheus scrapes Backstop behind
// kube-apiserver as Velero's mixins expect (the job integrations/velero),
// with the mixins' alert rules as published (for: set to 0s: they wait
// minutes); after a backup, a restore and a failed backup, the backup
// failure alerts of both mixins fire and the restore failure alerts do
// not, the mixin's NoVolumeSnapshots fires (no snapshots were taken);
// Backstop's own rules (artifacts/monitoring) all evaluate, and after a
// backup verified Corrupt and a location Unavailable their alerts fire;
// every query of the published dashboards, of Backstop's and of their
// variables is accepted by Prometheus, and those of the panels that show
// what happened return series. Prometheus verifies the server with the CA
// it publishes in its ConfigMap, as the chart's ServiceMonitor does.
func TestPrometheusMixins(t *testing.T) {
	t.Parallel()
	c := framework.StartCluster(t)
	ctx := context.Background()
	dir := t.TempDir()
	var rules []string
	for _, f := range []string{filepath.Join(mixinDir, "velero-2-mixin/prometheus_rules_out/prometheus_alerts.yaml"),
		filepath.Join(mixinDir, "velero-mixin/alerts/velero-alerts.yml"), filepath.Join(monitoringDir(t), shippedRules)} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		path, err := framework.WriteRules(dir, strings.ReplaceAll(strings.TrimPrefix(f, "/"), "/", "_"), data)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, path)
	}
	shippedRulesFile := rules[len(rules)-1]
	p := c.StartPrometheus(rules...)
	started := time.Now()
	// The series exist at 0 before anything happens: the first failure is
	// an increase.
	poll(t, "the failure counter at 0 in Prometheus", time.Minute, func(ctx context.Context) (bool, error) {
		s, err := p.Query(ctx, fmt.Sprintf(`velero_backup_failure_total{job=%q,schedule=""} == 0`, framework.PrometheusJob), time.Time{})
		return err == nil && len(s) == 1, err
	})

	// A schedule (paused): its series exist before it ever runs.
	if _, err := c.Backstop.VeleroV1().Schedules(adminNamespace).Create(ctx, &velerov1.Schedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: adminNamespace},
		Spec: velerov1.ScheduleSpec{Schedule: "0 2 * * *", Paused: true}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the schedule's series in Prometheus", time.Minute, func(ctx context.Context) (bool, error) {
		s, err := p.Query(ctx, fmt.Sprintf(`velero_backup_attempt_total{job=%q,schedule="nightly"} == 0`, framework.PrometheusJob), time.Time{})
		return err == nil && len(s) == 1, err
	})

	// A backup and its restore.
	if out, err := c.Kubectl(c.AdminKubeconfig, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: watched}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: watched}\ndata: {a: b}\n"), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if b := runBackup(t, c, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "watched"}, Spec: velerov1.BackupSpec{IncludedNamespaces: []string{"watched"}}}); b.Status.Phase != velerov1.BackupPhaseCompleted {
		t.Fatalf("backup: %s", b.Status.Phase)
	}
	if r := runRestore(t, c, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "watched"}, Spec: velerov1.RestoreSpec{BackupName: "watched", ExistingResourcePolicy: velerov1.PolicyTypeUpdate}}); r.Status.Phase != velerov1.RestorePhaseCompleted {
		t.Fatalf("restore: %s", r.Status.Phase)
	}
	// A backup verified as written, then with a byte changed (Corrupt).
	checked := filepath.Join(c.Dir, "checked")
	if err := os.MkdirAll(checked, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Create(ctx, &velerov1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Name: "checked", Namespace: adminNamespace},
		Spec:       velerov1.BackupStorageLocationSpec{Provider: "filesystem", StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: checked}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if b := runBackup(t, c, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "checked"}, Spec: velerov1.BackupSpec{IncludedNamespaces: []string{"watched"}, StorageLocation: "checked"}}); b.Status.Phase != velerov1.BackupPhaseCompleted {
		t.Fatalf("backup into the checked location: %s %q", b.Status.Phase, b.Status.FailureReason)
	}
	if reason := verifyBackup(t, c, "checked", "as-written"); reason != velerov1.VerificationPassedReason {
		t.Fatalf("verification of the backup as written: %s", reason)
	}
	tarball := filepath.Join(checked, "backups", "checked", "checked.tar.gz")
	data, err := os.ReadFile(tarball)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	if err := os.WriteFile(tarball, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if reason := verifyBackup(t, c, "checked", "changed"); reason != velerov1.VerificationCorruptReason {
		t.Fatalf("verification of the backup with a byte changed: %s", reason)
	}

	// A tenant's backup and its restore (the tenants' panels).
	if out, err := c.Kubectl(c.AdminKubeconfig, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: tenant}\n"), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	runTenantBackupAndRestore(t, c, "tenant", "mine")
	for _, metric := range []string{"backstop_nonadmin_backups", "backstop_nonadmin_restores"} {
		poll(t, "the tenant's "+metric+" in Prometheus", time.Minute, func(ctx context.Context) (bool, error) {
			s, err := p.Query(ctx, fmt.Sprintf(`%s{job=%q,namespace="tenant",phase="Created"} == 1`, metric, framework.PrometheusJob), time.Time{})
			return err == nil && len(s) == 1, err
		})
	}

	// Last, a backup into a location whose directory became a file after
	// it was found available: its failure is what the failure alerts,
	// which look 5 minutes back, must still see when they are read.
	flaky := filepath.Join(c.Dir, "flaky")
	if err := os.MkdirAll(flaky, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Create(ctx, &velerov1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Name: "flaky", Namespace: adminNamespace},
		Spec: velerov1.BackupStorageLocationSpec{Provider: "filesystem", StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: flaky}},
			ValidationFrequency: &metav1.Duration{Duration: time.Hour}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the location available", time.Minute, func(ctx context.Context) (bool, error) {
		l, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Get(ctx, "flaky", metav1.GetOptions{})
		return err == nil && l.Status.Phase == velerov1.BackupStorageLocationPhaseAvailable, nil
	})
	if err := os.RemoveAll(flaky); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(flaky, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b := runBackup(t, c, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "broken"}, Spec: velerov1.BackupSpec{IncludedNamespaces: []string{"watched"}, StorageLocation: "flaky"}}); b.Status.Phase != velerov1.BackupPhaseFailed {
		t.Fatalf("backup into the broken location: %s %q, want Failed", b.Status.Phase, b.Status.FailureReason)
	}

	// A location whose directory cannot be (under a file): Unavailable.
	if _, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Create(ctx, &velerov1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Name: "impossible", Namespace: adminNamespace},
		Spec:       velerov1.BackupStorageLocationSpec{Provider: "filesystem", StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: filepath.Join(flaky, "below")}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the impossible location Unavailable", time.Minute, func(ctx context.Context) (bool, error) {
		l, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Get(ctx, "impossible", metav1.GetOptions{})
		return err == nil && l.Status.Phase == velerov1.BackupStorageLocationPhaseUnavailable, nil
	})

	t.Run("alerts", func(t *testing.T) {
		want := map[string]bool{"VeleroBackupFailure": true, "VeleroBackupFailed": true, "NoVolumeSnapshots": true,
			"VeleroHighRestoreFailureRate": false, "RestoreFailed": false, "VeleroBackupPartialFailure": false}
		var firing map[string]bool
		poll(t, "the alerts", time.Minute, func(ctx context.Context) (bool, error) {
			alerts, err := p.Alerts(ctx)
			if err != nil {
				return false, err
			}
			firing = map[string]bool{}
			for _, a := range alerts {
				if a.State == "firing" {
					firing[a.Labels["alertname"]] = true
				}
			}
			for name, fires := range want {
				if fires && !firing[name] {
					return false, nil
				}
			}
			return true, nil
		})
		for name, fires := range want {
			if firing[name] != fires {
				t.Errorf("alert %s firing: %v, want %v (firing: %v)", name, firing[name], fires, firing)
			}
		}
	})

	t.Run("shipped rules", func(t *testing.T) {
		// Every rule of artifacts/monitoring/prometheus-rules.yaml
		// evaluates without error; Backstop's alerts fire for what
		// happened (a backup Corrupt, a location Unavailable, a backup
		// failed) and not for what did not.
		want := map[string]string{"VeleroBackupFailure": "firing", "VeleroHighRestoreFailureRate": "inactive", "VeleroUpStatus": "inactive",
			"VeleroHighBackupDuration": "inactive", "BackstopBackupCorrupt": "firing", "BackstopStorageLocationUnavailable": "firing",
			"BackstopBackupUnverifiable": "inactive", "BackstopBackupQueueStalled": "inactive", "BackstopRestoreQueueStalled": "inactive",
			"BackstopVMBackupFailure": "inactive", "BackstopTenantBackupsBackingOff": "inactive"}
		var shipped []framework.Rule
		// Until every rule was evaluated and those that should fire do
		// (or a minute passed: then what was last seen is reported).
		_ = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			groups, err := p.Rules(ctx)
			if err != nil {
				return false, nil
			}
			shipped = nil
			for _, g := range groups {
				if g.File == shippedRulesFile {
					shipped = append(shipped, g.Rules...)
				}
			}
			for _, r := range shipped {
				if r.Health == "unknown" || want[r.Name] == "firing" && r.State != "firing" {
					return false, nil
				}
			}
			return len(shipped) > 0, nil
		})
		if len(shipped) == 0 {
			t.Fatalf("no rules of %s in Prometheus", shippedRulesFile)
		}
		seen := map[string]bool{}
		for _, r := range shipped {
			seen[r.Name] = true
			if r.Health != "ok" {
				t.Errorf("rule %s: health %s: %s", r.Name, r.Health, r.LastError)
			}
			if w, ok := want[r.Name]; !ok {
				t.Errorf("rule %s: not in this test's list", r.Name)
			} else if r.State != w {
				t.Errorf("alert %s: %s, want %s", r.Name, r.State, w)
			}
		}
		for name := range want {
			if !seen[name] {
				t.Errorf("alert %s: not in %s", name, shippedRules)
			}
		}
	})

	t.Run("dashboards", func(t *testing.T) {
		// The panels of the last interval need two scrapes in it of the
		// series the backups made (the durations' histogram appears with
		// the first backup that ends).
		poll(t, "two scrapes of the backups' durations", time.Minute, func(ctx context.Context) (bool, error) {
			s, err := p.Query(ctx, fmt.Sprintf(`count_over_time(velero_backup_duration_seconds_count{job=%q}[1m]) >= 2`, framework.PrometheusJob), time.Time{})
			return err == nil && len(s) == 1, err
		})
		var queries []dashboardQuery
		for _, f := range []string{"velero-2-mixin/dashboards_out/overview.json", "velero-2-mixin/dashboards_out/clusterOverview.json", "velero-mixin/dashboards_out/velero-overview.json"} {
			queries = append(queries, dashboardQueries(t, filepath.Join(mixinDir, f))...)
		}
		if len(queries) < 60 {
			t.Fatalf("%d queries read from the dashboards, want theirs (more than 60)", len(queries))
		}
		shipped := dashboardQueries(t, filepath.Join(monitoringDir(t), shippedDashboard))
		if len(shipped) < 40 {
			t.Fatalf("%d queries read from the shipped dashboard, want Velero's and Backstop's (more than 40)", len(shipped))
		}
		queries = append(queries, shipped...)
		now := time.Now()
		for _, q := range queries {
			// A panel of the last interval looks ahead of each point of
			// its graph (offset -1m): at the graph's last point, the last
			// minute.
			expr := strings.ReplaceAll(promQL(q, p.Instance), " offset -1m", "")
			samples, err := p.Query(ctx, expr, now)
			switch {
			case err != nil:
				t.Errorf("%s / %s: %v", q.dashboard, q.panel, err)
			case len(samples) == 0 && !upstreamBroken[q.expr] && !readsNothingHere(q.expr):
				t.Errorf("%s / %s: no series for %s", q.dashboard, q.panel, expr)
			case len(samples) > 0 && (upstreamBroken[q.expr] || readsNothingHere(q.expr)):
				t.Errorf("%s / %s: series for a query that reads no metric of this scenario: %s", q.dashboard, q.panel, expr)
			}
		}
	})

	t.Run("picture", func(t *testing.T) {
		// The shipped dashboard's graphs drawn from this Prometheus' data
		// (docs/monitoring.md's picture: make dashboard-picture).
		picture := filepath.Join(t.TempDir(), "dashboard.png")
		dashboard := filepath.Join(monitoringDir(t), shippedDashboard)
		panels := len(graphPanels(t, dashboard))
		withData := renderDashboard(t, p, dashboard, picture, started, time.Now(), 2*time.Second)
		// All but the VMs' (none backed up).
		if withData != panels-2 {
			t.Errorf("%d of the dashboard's %d graphs have data, want all but the 2 of VMs", withData, panels)
		}
		checkPicture(t, picture)
	})
}
