package resource

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/livelog"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// responder records the error a handler answers.
type responder struct{ err error }

func (r *responder) Object(int, runtime.Object) {}
func (r *responder) Error(err error)            { r.err = err }

// TestLogsREST: a run's log served live while it runs here (whole, from an
// offset, followed to its end), then from its storage location (the same
// offsets going on); bad parameters refused.
func TestLogsREST(t *testing.T) {
	const ns, name = "backstop-system", "b1"
	bucket := t.TempDir()
	store, err := objectstore.NewFilesystem(bucket)
	if err != nil {
		t.Fatal(err)
	}
	bsl := &velerov1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: ns},
		Spec: velerov1.BackupStorageLocationSpec{Provider: objectstore.ProviderFilesystem,
			StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: bucket}}}}
	locations := objectstore.Locations{
		Get: func(_ context.Context, namespace, location string) (*velerov1.BackupStorageLocation, error) {
			if namespace != ns || location != "local" {
				return nil, apierrors.NewNotFound(velero.Resource("backupstoragelocations"), location)
			}
			return bsl, nil
		},
	}
	live := livelog.NewRegistry(0)
	target := func(_ context.Context, _, n string) (LogFile, error) {
		if n != name {
			return LogFile{}, apierrors.NewNotFound(velero.Resource("backups"), n)
		}
		return LogFile{Namespace: ns, Location: "local", Kind: velerov1.DownloadTargetKindBackupLog, Name: name}, nil
	}
	logs := NewLogsREST(velero.Resource("backups"), func() runtime.Object { return &velero.Backup{} }, target, locations, live)
	ctx := genericrequest.WithNamespace(context.Background(), ns)

	// get serves a request; it returns the status, the offset and live
	// headers, the body, and the error answered.
	get := func(t *testing.T, query string) (int, string, string, string, error) {
		t.Helper()
		r := &responder{}
		h, err := logs.Connect(ctx, name, nil, r)
		if err != nil {
			return 0, "", "", "", err
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/apis/velero.io/v1/namespaces/"+ns+"/backups/"+name+"/logs"+query, nil))
		if r.err != nil {
			return 0, "", "", "", r.err
		}
		return w.Code, w.Header().Get(LogOffsetHeader), w.Header().Get(LogLiveHeader), w.Body.String(), nil
	}

	if _, err := logs.Connect(ctx, "missing", nil, &responder{}); !apierrors.IsNotFound(err) {
		t.Errorf("logs of a missing backup: %v, want NotFound", err)
	}
	t.Run("before the run", func(t *testing.T) {
		if _, _, _, _, err := get(t, ""); !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "no log stored yet") {
			t.Errorf("got %v, want NotFound: no log stored yet", err)
		}
	})
	// reads checks requests answered 200: with where the body starts in
	// the log, whether it is the live log, and the body.
	type read struct{ name, query, offset, body string }
	reads := func(t *testing.T, isLive string, cases []read) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				code, offset, gotLive, body, err := get(t, tc.query)
				if err != nil || code != http.StatusOK || offset != tc.offset || gotLive != isLive || body != tc.body {
					t.Errorf("got %d, offset %s, live %s, %q, %v; want offset %s, live %s, %q", code, offset, gotLive, body, err, tc.offset, isLive, tc.body)
				}
			})
		}
	}
	tail := live.Start(livelog.Key{Kind: string(velerov1.DownloadTargetKindBackupLog), Namespace: ns, Name: name})
	tail.Write([]byte("line one\nline two\n"))
	reads(t, "true", []read{
		{name: "live, whole", query: "", offset: "0", body: "line one\nline two\n"},
		{name: "live, from an offset", query: "?offset=9", offset: "9", body: "line two\n"},
		{name: "live, past its end", query: "?offset=100", offset: "18", body: ""},
	})
	for _, q := range []string{"?offset=-1", "?offset=x", "?follow=yes"} {
		t.Run("refused: "+q, func(t *testing.T) {
			if _, _, _, _, err := get(t, q); !apierrors.IsBadRequest(err) {
				t.Errorf("got %v, want BadRequest", err)
			}
		})
	}
	t.Run("followed to the run's end", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			h, err := logs.Connect(ctx, name, nil, &responder{})
			if err != nil {
				t.Error(err)
				return
			}
			h.ServeHTTP(w, req)
		}))
		defer srv.Close()
		resp, err := http.Get(srv.URL + "?follow=true&offset=9")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		// What is there comes at once, before the run logs more.
		first := make([]byte, len("line two\n"))
		if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "line two\n" {
			t.Fatalf("first read %q, %v", first, err)
		}
		tail.Write([]byte("line three\n"))
		tail.Close()
		rest, err := io.ReadAll(resp.Body)
		if err != nil || string(rest) != "line three\n" || resp.Header.Get(LogOffsetHeader) != "9" {
			t.Errorf("then %q, %v (offset %s); want the line written while followed, then the end", rest, err, resp.Header.Get(LogOffsetHeader))
		}
	})
	if err := objectstore.PutGzip(context.Background(), store, objectstore.NewLayout("").BackupDir(name)+name+"-logs.gz",
		[]byte("line one\nline two\nline three\n")); err != nil {
		t.Fatal(err)
	}
	reads(t, "false", []read{
		{name: "stored, whole", query: "", offset: "0", body: "line one\nline two\nline three\n"},
		{name: "stored, from where the live log ended", query: "?offset=29&follow=true", offset: "29", body: ""},
		{name: "stored, from an offset", query: "?offset=18", offset: "18", body: "line three\n"},
		{name: "stored, past its end", query: "?offset=100", offset: "29", body: ""},
	})
	t.Run("stored, broken off where it cannot be read", func(t *testing.T) {
		var whole bytes.Buffer
		zw := gzip.NewWriter(&whole)
		for i := range 20000 {
			fmt.Fprintf(zw, "line %d of a long log\n", i)
		}
		zw.Close()
		cut := whole.Bytes()[:whole.Len()/2]
		if err := store.Put(context.Background(), objectstore.NewLayout("").BackupDir(name)+name+"-logs.gz", bytes.NewReader(cut)); err != nil {
			t.Fatal(err)
		}
		h, err := logs.Connect(ctx, name, nil, &responder{})
		if err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		aborted := func() (p any) {
			defer func() { p = recover() }()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/logs", nil))
			return nil
		}()
		if aborted != http.ErrAbortHandler || w.Code != http.StatusOK || !strings.HasPrefix(w.Body.String(), "line 0 of a long log\n") {
			t.Errorf("a log cut in half: panic %v, status %d, %d bytes sent; want the part read, then the stream broken off (http.ErrAbortHandler)", aborted, w.Code, w.Body.Len())
		}
	})
}
