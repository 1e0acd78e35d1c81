package resource

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	runtimeobj "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/livelog"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// statusResponder answers an error with its status code.
type statusResponder struct{ w http.ResponseWriter }

func (r statusResponder) Object(int, runtimeobj.Object) {}
func (r statusResponder) Error(err error) {
	code := http.StatusInternalServerError
	if st, ok := err.(apierrors.APIStatus); ok {
		code = int(st.Status().Code)
		// As the API server's responder answers it.
		if d := st.Status().Details; d != nil && d.RetryAfterSeconds > 0 {
			r.w.Header().Set("Retry-After", strconv.Itoa(int(d.RetryAfterSeconds)))
		}
	}
	http.Error(r.w, err.Error(), code)
}

// TestFollowBounds: followed logs are bounded by user and in all (past the
// bounds a follow is refused, 429, holding nothing), and a follower that
// reads nothing is cut off at the follow's deadline all the same.
func TestFollowBounds(t *testing.T) {
	const ns, name = "backstop-system", "b1"
	live := livelog.NewRegistry(0)
	live.MaxFollowers, live.MaxFollowersPerUser = 5, 3
	target := func(context.Context, string, string) (LogFile, error) {
		return LogFile{Namespace: ns, Location: "local", Kind: velerov1.DownloadTargetKindBackupLog, Name: name}, nil
	}
	logs := NewLogsREST(velero.Resource("backups"), func() runtimeobj.Object { return &velero.Backup{} }, target, objectstore.Locations{}, live)
	logs.followFor = time.Second
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx := genericrequest.WithUser(genericrequest.WithNamespace(req.Context(), ns), &user.DefaultInfo{Name: req.Header.Get("X-User")})
		h, err := logs.Connect(ctx, name, nil, statusResponder{w})
		if err != nil {
			t.Error(err)
			return
		}
		h.ServeHTTP(w, req)
	}))
	defer srv.Close()
	tail := live.Start(livelog.Key{Kind: string(velerov1.DownloadTargetKindBackupLog), Namespace: ns, Name: name})
	defer tail.Close()
	tail.Write([]byte("started\n"))

	follow := func(t *testing.T, who string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL+"?follow=true", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-User", who)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	t.Run("2000 follows by one user: the bound, then 429", func(t *testing.T) {
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		goroutines := runtime.NumGoroutine()
		var held []*http.Response
		refused := 0
		for range 2000 {
			resp := follow(t, "viewer")
			if resp.StatusCode == http.StatusOK {
				held = append(held, resp)
				continue
			}
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
				t.Fatalf("a follow past the bound: %d (Retry-After %q), want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
			}
			refused++
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if len(held) != 3 || refused != 1997 || live.Followers() != 3 {
			t.Errorf("%d follows served, %d refused, %d followers counted; want 3, 1997, 3", len(held), refused, live.Followers())
		}
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		grown := runtime.NumGoroutine() - goroutines
		t.Logf("2000 follows, 3 held: heap %d → %d KiB, %d goroutines more", before.HeapAlloc>>10, after.HeapAlloc>>10, grown)
		// Each held follow keeps its handler and the client's connection
		// (a few goroutines each); a refused one keeps nothing.
		if grown > 50 {
			t.Errorf("%d goroutines more after 2000 follows of which 3 are served: the refused ones hold something", grown)
		}
		t.Run("another user, up to the bound in all", func(t *testing.T) {
			ok := 0
			for range 5 {
				resp := follow(t, "other")
				if resp.StatusCode == http.StatusOK {
					ok++
					held = append(held, resp)
				} else {
					resp.Body.Close()
				}
			}
			if ok != 2 {
				t.Errorf("another user's follows served: %d, want 2 (5 in all)", ok)
			}
		})
		for _, resp := range held {
			resp.Body.Close()
		}
		if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return live.Followers() == 0, nil
		}); err != nil {
			t.Errorf("%d followers counted after their readers left", live.Followers())
		}
	})

	t.Run("a follower that reads nothing is cut off at the deadline", func(t *testing.T) {
		resp := follow(t, "stalled")
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("follow: %d", resp.StatusCode)
		}
		// Far more than the sockets' buffers hold, written while the
		// reader reads nothing: the handler's writes block.
		line := []byte(strings.Repeat("x", 64<<10-1) + "\n")
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tail.Write(line)
				if i%64 == 63 {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
		if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return live.Followers() == 0, nil
		}); err != nil {
			t.Errorf("the stalled follower still held after a minute (the follow lasts %s): %v", logs.followFor, err)
		}
	})
}
