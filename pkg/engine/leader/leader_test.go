package leader

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func TestParseTerm(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    Term
		wantErr bool
	}{
		{in: "host_ab12/3", want: Term{Holder: "host_ab12", Transitions: 3}},
		{in: "a/b/0", want: Term{Holder: "a/b", Transitions: 0}},
		{in: "host", wantErr: true},
		{in: "/3", wantErr: true},
		{in: "host/x", wantErr: true},
	} {
		got, err := ParseTerm(c.in)
		if (err != nil) != c.wantErr || got != c.want {
			t.Errorf("ParseTerm(%q) = %+v, %v; want %+v, error %v", c.in, got, err, c.want, c.wantErr)
		}
		if err == nil && got.String() != c.in {
			t.Errorf("Term %+v prints %q, want %q", got, got.String(), c.in)
		}
	}
}

func TestFence(t *testing.T) {
	leases := map[string]Term{"engines": {Holder: "b", Transitions: 4}, HostLease("engines", "node-1"): {Holder: "c", Transitions: 1}}
	var leaseErr error
	fence := &Fence{}
	fence.SetCurrent("engines", func(_ context.Context, name string) (Term, error) {
		if leaseErr != nil {
			return Term{}, leaseErr
		}
		t, ok := leases[name]
		if !ok {
			return Term{}, apierrors.NewNotFound(coordinationv1.Resource("leases"), name)
		}
		return t, nil
	})
	served := 0
	handler := fence.Filter(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { served++ }))
	for _, c := range []struct {
		name, method, term string
		lease              string
		leaseErr           error
		want               int
	}{
		{"a client's write (no term)", http.MethodPut, "", "", nil, http.StatusOK},
		{"the current term's write", http.MethodPut, "b/4", "", nil, http.StatusOK},
		{"the current term's delete", http.MethodDelete, "b/4", "", nil, http.StatusOK},
		{"an ended term's read", http.MethodGet, "a/3", "", nil, http.StatusOK},
		{"an ended term's write", http.MethodPut, "a/3", "", nil, http.StatusForbidden},
		{"an ended term's create", http.MethodPost, "a/3", "", nil, http.StatusForbidden},
		{"an ended term's patch", http.MethodPatch, "a/3", "", nil, http.StatusForbidden},
		{"the same holder's earlier term", http.MethodPut, "b/2", "", nil, http.StatusForbidden},
		{"a term that does not parse", http.MethodPut, "garbage", "", nil, http.StatusForbidden},
		{"the engines' Lease named", http.MethodPut, "b/4", "engines", nil, http.StatusOK},
		{"a VM host's current term", http.MethodPut, "c/1", HostLease("engines", "node-1"), nil, http.StatusOK},
		{"a VM host's ended term", http.MethodPut, "c/0", HostLease("engines", "node-1"), nil, http.StatusForbidden},
		{"the engines' term under a VM host's Lease", http.MethodPut, "b/4", HostLease("engines", "node-1"), nil, http.StatusForbidden},
		{"a VM host without a Lease", http.MethodPut, "c/1", HostLease("engines", "node-2"), nil, http.StatusForbidden},
		{"a Lease that is not the engines'", http.MethodPut, "b/4", "kube-scheduler", nil, http.StatusForbidden},
		{"the Lease cannot be read: try again", http.MethodPut, "b/4", "", errors.New("etcd down"), http.StatusServiceUnavailable},
	} {
		leaseErr = c.leaseErr
		before := served
		req := httptest.NewRequest(c.method, "/apis/velero.io/v1/namespaces/ns/backups/b1/status", strings.NewReader("{}"))
		if c.term != "" {
			req.Header.Set(TermHeader, c.term)
		}
		if c.lease != "" {
			req.Header.Set(LeaseHeader, c.lease)
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, rec.Code, rec.Body, c.want)
		}
		if wantServed := c.want == http.StatusOK; (served > before) != wantServed {
			t.Errorf("%s: served %v, want %v", c.name, served > before, wantServed)
		}
		if c.want == http.StatusForbidden && !strings.Contains(rec.Body.String(), `"reason":"Forbidden"`) {
			t.Errorf("%s: body %s, want a Forbidden Status", c.name, rec.Body)
		}
	}
}
