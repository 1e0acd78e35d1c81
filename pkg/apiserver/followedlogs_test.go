package apiserver

import (
	"net/http/httptest"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	genericfilters "k8s.io/apiserver/pkg/server/filters"

	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
)

// TestFollowedLogs: a followed log is long-running like a watch; a log
// read once, or another subresource followed, is not.
func TestFollowedLogs(t *testing.T) {
	check := followedLogs(genericfilters.BasicLongRunningRequestCheck(sets.NewString("watch"), sets.NewString()))
	for _, tc := range []struct {
		name, url, verb, subresource string
		want                         bool
	}{
		{name: "a log followed", url: "/apis/velero.io/v1/namespaces/ns/backups/b/log?follow=true", verb: "get", subresource: "log", want: true},
		{name: "a log followed (logs)", url: "/apis/velero.io/v1/namespaces/ns/backups/b/logs?follow=true", verb: "get", subresource: "logs", want: true},
		{name: "a log read once", url: "/apis/velero.io/v1/namespaces/ns/backups/b/logs", verb: "get", subresource: "logs"},
		{name: "a log with follow=false", url: "/apis/velero.io/v1/namespaces/ns/backups/b/logs?follow=false", verb: "get", subresource: "logs"},
		{name: "another subresource", url: "/apis/velero.io/v1/namespaces/ns/backups/b/cancel?follow=true", verb: "create", subresource: "cancel"},
		{name: "a watch", url: "/apis/velero.io/v1/namespaces/ns/backups?watch=true", verb: "watch", want: true},
		{name: "a list", url: "/apis/velero.io/v1/namespaces/ns/backups", verb: "list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info := &genericrequest.RequestInfo{IsResourceRequest: true, Verb: tc.verb, Subresource: tc.subresource}
			if got := check(httptest.NewRequest("GET", tc.url, nil), info); got != tc.want {
				t.Errorf("long-running: %v, want %v", got, tc.want)
			}
		})
	}
}
