package framework

import "testing"

// TestRequestsOn: apiserver_request_total is summed over the verbs and
// codes of the core group's named resources only.
func TestRequestsOn(t *testing.T) {
	const metrics = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="POST",version="v1"} 100
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="POST",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="secrets",scope="resource",subresource="",verb="GET",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1"} 50
apiserver_request_total{code="201",component="apiserver",dry_run="",group="velero.io",resource="configmaps",scope="resource",subresource="",verb="POST",version="v1"} 9
# HELP apiserver_request_duration_seconds x
# TYPE apiserver_request_duration_seconds counter
apiserver_request_duration_seconds{resource="configmaps"} 1000
`
	for _, tc := range []struct {
		resources []string
		want      int64
	}{
		{[]string{"configmaps", "secrets"}, 110},
		{[]string{"configmaps"}, 103},
		{[]string{"deployments"}, 0},
	} {
		got, err := requestsOn([]byte(metrics), tc.resources)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("requests on %v: %d, want %d", tc.resources, got, tc.want)
		}
	}
	if _, err := requestsOn([]byte("# TYPE other counter\nother 1\n"), []string{"configmaps"}); err == nil {
		t.Error("metrics without apiserver_request_total: no error")
	}
}
