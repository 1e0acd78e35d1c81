package resource

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/klog/v2"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/livelog"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// LogFile is where a log is: the storage location of namespace holding
// it, and the download target naming it.
type LogFile struct {
	Namespace, Location string
	Kind                velerov1.DownloadTargetKind
	Name                string
}

// LogTarget says where the log of an object (by namespace and name) is.
type LogTarget func(ctx context.Context, namespace, name string) (LogFile, error)

// LogsREST is a `logs` GET subresource: the object's log as text. While
// its run goes on on this server, what the run has logged so far (its
// live log, livelog.Registry); once it ended, the log read from its
// storage location and decompressed. Unlike a DownloadRequest it needs no
// signed URL, and it is authorized like any subresource (get on
// <resource>/logs).
//
// Parameters: offset=N skips the log's first N bytes (a reader going on
// from where it got to); follow=true streams what the run logs until it
// ends, or for at most FollowFor (below the request timeouts of the
// servers and proxies on its way: the reader asks again from its offset).
// The header Backstop-Log-Offset says where in the log the body starts
// (past the offset asked for when a live log no longer keeps those
// bytes); Backstop-Log-Live is true when the body is a run's live log.
type LogsREST struct {
	// followFor bounds a followed log (FollowFor).
	followFor time.Duration
	resource  schema.GroupResource
	newFunc   func() runtime.Object
	target    LogTarget
	locations objectstore.Locations
	live      *livelog.Registry
}

var (
	_ rest.Connecter       = &LogsREST{}
	_ rest.StorageMetadata = &LogsREST{}
)

// FollowFor bounds a follow=true response: its writes end by then, also
// when the reader reads nothing (a write deadline, not only a check
// between writes).
const FollowFor = 45 * time.Second

// followGrace is how long past FollowFor a followed log's last write may
// take.
const followGrace = 5 * time.Second

// StoredLogFor bounds the writes of a stored log's response.
const StoredLogFor = 2 * time.Minute

// The response headers of a log.
const (
	LogOffsetHeader = "Backstop-Log-Offset"
	LogLiveHeader   = "Backstop-Log-Live"
)

// NewLogsREST returns the logs subresource of resource; live holds the
// logs of the runs in progress on this server.
func NewLogsREST(resource schema.GroupResource, newFunc func() runtime.Object, target LogTarget, locations objectstore.Locations, live *livelog.Registry) *LogsREST {
	return &LogsREST{followFor: FollowFor, resource: resource, newFunc: newFunc, target: target, locations: locations, live: live}
}

// New returns an empty object of the parent resource.
func (r *LogsREST) New() runtime.Object { return r.newFunc() }

// Destroy does nothing.
func (r *LogsREST) Destroy() {}

// ProducesMIMETypes: the log is text.
func (r *LogsREST) ProducesMIMETypes(string) []string { return []string{"text/plain"} }

// ProducesObject: the response is a stream, not an object.
func (r *LogsREST) ProducesObject(string) any { return "" }

// NewConnectOptions: the parameters are read from the request's query.
func (r *LogsREST) NewConnectOptions() (runtime.Object, bool, string) { return nil, false, "" }

// ConnectMethods: the log is read with GET.
func (r *LogsREST) ConnectMethods() []string { return []string{http.MethodGet} }

// logRequest is what a request for a log asks.
type logRequest struct {
	offset int64
	follow bool
}

func parseLogRequest(q url.Values) (logRequest, error) {
	var lr logRequest
	var errs field.ErrorList
	if v := q.Get("offset"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			errs = append(errs, field.Invalid(field.NewPath("offset"), v, "a number of bytes, 0 or more"))
		}
		lr.offset = n
	}
	switch v := q.Get("follow"); v {
	case "", "false":
	case "true":
		lr.follow = true
	default:
		errs = append(errs, field.NotSupported(field.NewPath("follow"), v, []string{"true", "false"}))
	}
	if len(errs) > 0 {
		return lr, errors.New(errs.ToAggregate().Error())
	}
	return lr, nil
}

// Connect finds the log, then serves it.
func (r *LogsREST) Connect(ctx context.Context, name string, _ runtime.Object, responder rest.Responder) (http.Handler, error) {
	namespace := genericrequest.NamespaceValue(ctx)
	file, err := r.target(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		lr, err := parseLogRequest(req.URL.Query())
		if err != nil {
			responder.Error(apierrors.NewBadRequest(fmt.Sprintf("logs of %s: %v", name, err)))
			return
		}
		// Every followed request counts, the stored log's too: each is
		// long-running (no seat of priority and fairness bounds it).
		if lr.follow {
			user := ""
			if u, ok := genericrequest.UserFrom(ctx); ok {
				user = u.GetName()
			}
			release, err := r.live.Follow(user, namespace)
			if err != nil {
				responder.Error(apierrors.NewTooManyRequests(fmt.Sprintf("following the log of %s: %v", name, err), int(r.followFor/time.Second)))
				return
			}
			defer release()
		}
		if tail := r.live.Get(livelog.Key{Kind: string(file.Kind), Namespace: file.Namespace, Name: file.Name}); tail != nil {
			r.serveLive(ctx, w, tail, lr)
			return
		}
		// A stored log is read (from an endpoint of its location's
		// owner) and written (to a reader that may read nothing) by a
		// deadline.
		ctx, cancel := context.WithTimeout(ctx, StoredLogFor)
		defer cancel()
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(StoredLogFor))
		f, err := r.locations.OpenTarget(ctx, file.Namespace, file.Location, file.Kind, file.Name)
		if errors.Is(err, objectstore.ErrNotFound) {
			responder.Error(apierrors.NewNotFound(schema.GroupResource{Group: r.resource.Group, Resource: r.resource.Resource + "/logs"},
				fmt.Sprintf("%s (no log stored yet: %v)", name, err)))
			return
		}
		if err != nil {
			responder.Error(apierrors.NewInternalError(fmt.Errorf("reading the log of %s: %w", name, err)))
			return
		}
		defer f.Close()
		zr, err := gzip.NewReader(bufio.NewReader(f))
		if err != nil {
			responder.Error(apierrors.NewInternalError(fmt.Errorf("the stored log of %s is not gzip data: %w", name, err)))
			return
		}
		defer zr.Close()
		skipped, err := io.CopyN(io.Discard, zr, lr.offset)
		if err != nil && !errors.Is(err, io.EOF) {
			responder.Error(apierrors.NewInternalError(fmt.Errorf("reading the stored log of %s: %w", name, err)))
			return
		}
		textHeaders(w, skipped, false)
		w.WriteHeader(http.StatusOK)
		var broken readError
		if _, err := io.Copy(w, source{zr}); errors.As(err, &broken) {
			// The status is sent: the stream is broken off, so that the
			// reader does not take the part it got for the whole log. (A
			// reader gone is nobody to tell.)
			klog.FromContext(ctx).Error(broken.error, "Reading a stored log", "resource", r.resource.String(), "name", name)
			panic(http.ErrAbortHandler)
		}
	}), nil
}

// source marks the errors of a reader (readError), to tell them from the
// errors of the writer it is copied to.
type source struct{ io.Reader }

type readError struct{ error }

func (s source) Read(p []byte) (int, error) {
	n, err := s.Reader.Read(p)
	if err != nil && err != io.EOF {
		err = readError{err}
	}
	return n, err
}

func textHeaders(w http.ResponseWriter, offset int64, live bool) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set(LogOffsetHeader, strconv.FormatInt(offset, 10))
	h.Set(LogLiveHeader, strconv.FormatBool(live))
}

// serveLive writes a run's live log from the offset asked for: what it has,
// or, following, what it gets until it ends.
func (r *LogsREST) serveLive(ctx context.Context, w http.ResponseWriter, tail *livelog.Tail, lr logRequest) {
	flusher, _ := w.(http.Flusher)
	begin := func(offset int64) {
		textHeaders(w, offset, true)
		w.WriteHeader(http.StatusOK)
		if flusher != nil {
			flusher.Flush()
		}
	}
	if !lr.follow {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(StoredLogFor))
		c := tail.Read(lr.offset)
		begin(c.Offset)
		_, _ = w.Write(c.Data)
		return
	}
	// The follow ends by FollowFor: the timer ends it between writes, the
	// deadline a write that a reader reading nothing keeps waiting.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(r.followFor + followGrace))
	_, _ = tail.Follow(ctx, lr.offset, r.followFor, begin, func(p []byte) error {
		if _, err := w.Write(p); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	})
}
