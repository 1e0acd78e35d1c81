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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// TestPrometheusMixins: a real Prometheus scrapes Backstop behind
// kube-apiserver as Velero's mixins expect (the job integrations/velero),
// with the mixins' alert rules as published (for: set to 0s: they wait
// minutes); after a backup, a restore and a failed backup, the backup
// failure alerts of both mixins fire and the restore failure alerts do
// not, the mixin's NoVolumeSnapshots fires (no snapshots were taken);
// every query of the published dashboards and of their variables is
// accepted by Prometheus, and those of the panels that show what
// happened return series.
func TestPrometheusMixins(t *testing.T) {
	t.Parallel()
	c := framework.StartCluster(t)
	ctx := context.Background()
	dir := t.TempDir()
	var rules []string
	for _, f := range []string{"velero-2-mixin/prometheus_rules_out/prometheus_alerts.yaml", "velero-mixin/alerts/velero-alerts.yml"} {
		data, err := os.ReadFile(filepath.Join(mixinDir, f))
		if err != nil {
			t.Fatal(err)
		}
		path, err := framework.WriteRules(dir, strings.ReplaceAll(f, "/", "_"), data)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, path)
	}
	p := c.StartPrometheus(rules...)
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

	// A backup, its restore, and a backup into a location whose directory
	// became a file after it was found available.
	if out, err := c.Kubectl(c.AdminKubeconfig, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: watched}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: watched}\ndata: {a: b}\n"), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if b := runBackup(t, c, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "watched"}, Spec: velerov1.BackupSpec{IncludedNamespaces: []string{"watched"}}}); b.Status.Phase != velerov1.BackupPhaseCompleted {
		t.Fatalf("backup: %s", b.Status.Phase)
	}
	if r := runRestore(t, c, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "watched"}, Spec: velerov1.RestoreSpec{BackupName: "watched", ExistingResourcePolicy: velerov1.PolicyTypeUpdate}}); r.Status.Phase != velerov1.RestorePhaseCompleted {
		t.Fatalf("restore: %s", r.Status.Phase)
	}
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
			case len(samples) == 0 && !upstreamBroken[q.expr]:
				t.Errorf("%s / %s: no series for %s", q.dashboard, q.panel, expr)
			case len(samples) > 0 && upstreamBroken[q.expr]:
				t.Errorf("%s / %s: series for a query that reads no metric of Velero's: %s", q.dashboard, q.panel, expr)
			}
		}
	})
}
