package framework

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// PrometheusJob is the job the cluster's Backstop is scraped as: the one
// Velero's Grafana mixin (velero-2-mixin) selects, as Grafana Agent's
// Velero integration names it.
const PrometheusJob = "integrations/velero"

// ServingCAConfigMap is where the server publishes its serving CA
// (apiserver.ServingCAConfigMap, made by the chart).
const ServingCAConfigMap = "backstop-serving-ca"

// PrometheusCluster is the cluster label the scrape adds, as a
// multi-cluster Prometheus labels its targets (the mixins' $cluster).
const PrometheusCluster = "harness"

// Prometheus is a Prometheus server (Debian's package:
// hack/install-prometheus.sh) the test runs on loopback, scraping the
// cluster's Backstop every 2 seconds as PrometheusJob: over TLS, verified
// with the CA of Backstop's APIServices, with the token of a
// ServiceAccount that may read /metrics (delegated authorization), and
// evaluating the rule files given every second. It keeps Velero's and
// Backstop's series only.
type Prometheus struct {
	// URL is its HTTP API's base.
	URL string
	// Instance is the scrape target's instance label.
	Instance string
}

func (s clusterSlot) prometheusPort() int { return 9090 + int(s) }

// StartPrometheus starts Prometheus with rule files and waits until it
// scrapes Backstop; it stops with the cluster.
func (c *Cluster) StartPrometheus(ruleFiles ...string) *Prometheus {
	t := c.t
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus is not installed (hack/install-prometheus.sh, run by make test's setup): %v", err)
	}
	ctx := context.Background()
	const ns, name = "monitoring", "prometheus"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := c.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// What a Prometheus needs of an aggregated server: get /metrics.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-metrics"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	if _, err := c.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-metrics"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}}
	if _, err := c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tokenFile := c.write("prometheus.token", []byte(c.token(ns, name)))
	// Backstop's serving CA, where the server publishes it for the
	// clients of its Service (the chart's ServiceMonitor reads it there).
	var ca string
	c.waitFor("the serving CA in ConfigMap "+ServingCAConfigMap, c.backstop, time.Minute, func(ctx context.Context) error {
		cm, err := c.Kube.CoreV1().ConfigMaps(BackstopNamespace).Get(ctx, ServingCAConfigMap, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ca = cm.Data["ca.crt"]; ca == "" {
			return fmt.Errorf("no ca.crt in %v", cm.Data)
		}
		return nil
	})
	// The same CA kube-apiserver verifies the server with.
	apiService, err := c.Dynamic.Resource(apiServices).Get(ctx, "v1.velero.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bundle, _, _ := unstructured.NestedString(apiService.Object, "spec", "caBundle")
	if decoded, err := base64.StdEncoding.DecodeString(bundle); err != nil || string(decoded) != ca {
		t.Fatalf("the caBundle of APIService v1.velero.io (%v) is not the CA of ConfigMap %s", err, ServingCAConfigMap)
	}
	caFile := c.write("prometheus-ca.crt", []byte(ca))
	p := &Prometheus{URL: fmt.Sprintf("http://127.0.0.1:%d", c.slot.prometheusPort()),
		Instance: fmt.Sprintf("%s:%d", c.slot.backstopPodIP(), c.backstopPort)}
	var rules strings.Builder
	for _, f := range ruleFiles {
		fmt.Fprintf(&rules, "  - %q\n", f)
	}
	// Every 2 s: the server's /metrics holds kube's API server metrics
	// too, which on two busy cores take more than a second to serve at
	// times (a scrape may take its whole interval); only the series of
	// Velero's and Backstop's own are kept.
	config := fmt.Sprintf(`global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 1s
rule_files:
%sscrape_configs:
  - job_name: %q
    scheme: https
    authorization:
      credentials_file: %q
    tls_config:
      ca_file: %q
      server_name: %s.%s.svc
    static_configs:
      - targets: [%q]
        labels:
          cluster: %q
    metric_relabel_configs:
      - source_labels: [__name__]
        regex: "(velero|backstop|podVolume)_.*"
        action: keep
`, rules.String(), PrometheusJob, tokenFile, caFile, BackstopService, BackstopNamespace, p.Instance, PrometheusCluster)
	if len(ruleFiles) == 0 {
		config = strings.Replace(config, "rule_files:\n", "", 1)
	}
	configFile := c.write("prometheus.yml", []byte(config))
	proc := c.start("prometheus", bin, "--config.file="+configFile, "--storage.tsdb.path="+c.path("prometheus-data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", c.slot.prometheusPort()),
		// Grafana's dashboards look at [$__interval] offset -$__interval.
		"--enable-feature=promql-negative-offset")
	c.waitFor("Prometheus to scrape Backstop", proc, time.Minute, func(ctx context.Context) error {
		up, err := p.Query(ctx, fmt.Sprintf(`up{job=%q} == 1`, PrometheusJob), time.Time{})
		if err != nil {
			return err
		}
		if len(up) != 1 {
			return fmt.Errorf("up: %v", up)
		}
		return nil
	})
	return p
}

// Sample is one series of a query's answer: its labels and value.
type Sample struct {
	Labels map[string]string
	Value  string
}

// Query evaluates an instant query at a time (zero: now) through the
// HTTP API. An expression Prometheus refuses is an error.
func (p *Prometheus) Query(ctx context.Context, expr string, at time.Time) ([]Sample, error) {
	form := url.Values{"query": {expr}}
	if !at.IsZero() {
		form.Set("time", fmt.Sprintf("%.3f", float64(at.UnixMilli())/1000))
	}
	var answer struct {
		Status    string `json:"status"`
		Error     string `json:"error"`
		ErrorType string `json:"errorType"`
		Data      struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := p.get(ctx, "/api/v1/query?"+form.Encode(), &answer); err != nil {
		return nil, err
	}
	if answer.Status != "success" {
		return nil, fmt.Errorf("query %q: %s: %s", expr, answer.ErrorType, answer.Error)
	}
	switch answer.Data.ResultType {
	case "vector":
		var result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(answer.Data.Result, &result); err != nil {
			return nil, err
		}
		var out []Sample
		for _, r := range result {
			v, _ := r.Value[1].(string)
			out = append(out, Sample{Labels: r.Metric, Value: v})
		}
		return out, nil
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(answer.Data.Result, &v); err != nil {
			return nil, err
		}
		s, _ := v[1].(string)
		return []Sample{{Value: s}}, nil
	default:
		return nil, fmt.Errorf("query %q: a %s answer", expr, answer.Data.ResultType)
	}
}

// Series is one series of a range query's answer: its labels and its
// points (NaN where Prometheus answered NaN).
type Series struct {
	Labels map[string]string
	Points []Point
}

// Point is a value at a time.
type Point struct {
	T time.Time
	V float64
}

// QueryRange evaluates an expression at each step from start to end
// through the HTTP API.
func (p *Prometheus) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Series, error) {
	form := url.Values{"query": {expr}, "start": {fmt.Sprintf("%.3f", float64(start.UnixMilli())/1000)},
		"end": {fmt.Sprintf("%.3f", float64(end.UnixMilli())/1000)}, "step": {fmt.Sprintf("%gs", step.Seconds())}}
	var answer struct {
		Status    string `json:"status"`
		Error     string `json:"error"`
		ErrorType string `json:"errorType"`
		Data      struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := p.get(ctx, "/api/v1/query_range?"+form.Encode(), &answer); err != nil {
		return nil, err
	}
	if answer.Status != "success" {
		return nil, fmt.Errorf("query %q: %s: %s", expr, answer.ErrorType, answer.Error)
	}
	var out []Series
	for _, r := range answer.Data.Result {
		s := Series{Labels: r.Metric}
		for _, v := range r.Values {
			at, _ := v[0].(float64)
			text, _ := v[1].(string)
			value, err := strconv.ParseFloat(text, 64)
			if err != nil {
				return nil, fmt.Errorf("query %q: value %q: %w", expr, text, err)
			}
			s.Points = append(s.Points, Point{T: time.UnixMilli(int64(at * 1000)), V: value})
		}
		out = append(out, s)
	}
	return out, nil
}

// Alert is one alert Prometheus holds: its labels and state (pending,
// firing).
type Alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// Alerts are the alerts of the rule files, pending or firing.
func (p *Prometheus) Alerts(ctx context.Context) ([]Alert, error) {
	data, err := apiData[struct {
		Alerts []Alert `json:"alerts"`
	}](ctx, p, "/api/v1/alerts")
	return data.Alerts, err
}

// Rule is one rule of a rule file as Prometheus evaluates it: health
// (unknown before its first evaluation, ok, err) and, for an alerting
// rule, state (inactive, pending, firing).
type Rule struct {
	Name      string `json:"name"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
	State     string `json:"state"`
	Type      string `json:"type"`
}

// RuleGroup is a group of a rule file.
type RuleGroup struct {
	Name  string `json:"name"`
	File  string `json:"file"`
	Rules []Rule `json:"rules"`
}

// Rules are the groups of the rule files, with their rules' evaluation.
func (p *Prometheus) Rules(ctx context.Context) ([]RuleGroup, error) {
	data, err := apiData[struct {
		Groups []RuleGroup `json:"groups"`
	}](ctx, p, "/api/v1/rules")
	return data.Groups, err
}

// apiData is the data of an answer of Prometheus' HTTP API at path; an
// answer whose status is not success is an error.
func apiData[T any](ctx context.Context, p *Prometheus, path string) (T, error) {
	var answer struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   T      `json:"data"`
	}
	if err := p.get(ctx, path, &answer); err != nil {
		return answer.Data, err
	}
	if answer.Status != "success" {
		return answer.Data, fmt.Errorf("GET %s: %s: %s", path, answer.Status, answer.Error)
	}
	return answer.Data, nil
}

func (p *Prometheus) get(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("GET %s: %d %.200s: %w", path, resp.StatusCode, body, err)
	}
	return nil
}

// WriteRules writes a copy of a rule file with every alert's "for" set to
// 0s, so that a test sees its alerts fire as soon as their expressions
// hold (the mixins wait minutes).
func WriteRules(dir, name string, data []byte) (string, error) {
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if trimmed := strings.TrimSpace(l); strings.HasPrefix(trimmed, "for:") {
			lines[i] = l[:strings.Index(l, "for:")] + "for: 0s"
		}
	}
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o600)
}
