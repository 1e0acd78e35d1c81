package framework

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// APIRequests is how many requests kube-apiserver has served on the
// given resources of the core group ("" in apiserver_request_total's
// group label), of every verb, by its /metrics: the load a client put on
// it between two readings.
func (c *Cluster) APIRequests(t testing.TB, resources ...string) int64 {
	t.Helper()
	raw, err := c.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("reading kube-apiserver's /metrics: %v", err)
	}
	n, err := requestsOn(raw, resources)
	if err != nil {
		t.Fatalf("kube-apiserver's /metrics: %v", err)
	}
	return n
}

// requestsOn sums apiserver_request_total over the core group's
// resources of a /metrics text.
func requestsOn(metrics []byte, resources []string) (int64, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(metrics))
	if err != nil {
		return 0, fmt.Errorf("parsing: %w", err)
	}
	family, ok := families["apiserver_request_total"]
	if !ok {
		return 0, fmt.Errorf("no apiserver_request_total")
	}
	var n float64
	for _, m := range family.GetMetric() {
		group, resource := "", ""
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "group":
				group = l.GetValue()
			case "resource":
				resource = l.GetValue()
			}
		}
		if group == "" && slices.Contains(resources, resource) {
			n += m.GetCounter().GetValue()
		}
	}
	return int64(n), nil
}
