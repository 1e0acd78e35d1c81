package resource

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
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

// LogsREST is a `logs` GET subresource: the object's log, read from its
// storage location and decompressed, as text. Unlike a DownloadRequest it
// needs no signed URL, and it is authorized like any subresource
// (get on <resource>/logs).
type LogsREST struct {
	resource  schema.GroupResource
	newFunc   func() runtime.Object
	target    LogTarget
	locations objectstore.Locations
}

var (
	_ rest.Getter          = &LogsREST{}
	_ rest.StorageMetadata = &LogsREST{}
)

// NewLogsREST returns the logs subresource of resource.
func NewLogsREST(resource schema.GroupResource, newFunc func() runtime.Object, target LogTarget, locations objectstore.Locations) *LogsREST {
	return &LogsREST{resource: resource, newFunc: newFunc, target: target, locations: locations}
}

// New returns an empty object of the parent resource.
func (r *LogsREST) New() runtime.Object { return r.newFunc() }

// Destroy does nothing.
func (r *LogsREST) Destroy() {}

// ProducesMIMETypes: the log is text.
func (r *LogsREST) ProducesMIMETypes(string) []string { return []string{"text/plain"} }

// ProducesObject: the response is a stream, not an object.
func (r *LogsREST) ProducesObject(string) any { return "" }

// Get opens the log.
func (r *LogsREST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	namespace := genericrequest.NamespaceValue(ctx)
	file, err := r.target(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	f, err := r.locations.OpenTarget(ctx, file.Namespace, file.Location, file.Kind, file.Name)
	if errors.Is(err, objectstore.ErrNotFound) {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: r.resource.Group, Resource: r.resource.Resource + "/logs"},
			fmt.Sprintf("%s (no log stored yet: %v)", name, err))
	}
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("reading the log of %s: %w", name, err))
	}
	return &logStream{file: f}, nil
}

// logStream streams a gzip-compressed log as text.
type logStream struct {
	file io.ReadCloser
}

var _ rest.ResourceStreamer = &logStream{}

func (s *logStream) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject is never called on a stream; it returns the stream itself.
func (s *logStream) DeepCopyObject() runtime.Object { return s }

// InputStream decompresses the stored log.
func (s *logStream) InputStream(context.Context, string, string) (io.ReadCloser, bool, string, error) {
	zr, err := gzip.NewReader(bufio.NewReader(s.file))
	if err != nil {
		_ = s.file.Close()
		return nil, false, "", apierrors.NewInternalError(fmt.Errorf("the stored log is not gzip data: %w", err))
	}
	return &gunzipStream{Reader: zr, file: s.file}, false, "text/plain", nil
}

type gunzipStream struct {
	*gzip.Reader
	file io.Closer
}

func (g *gunzipStream) Close() error {
	err := g.Reader.Close()
	if cerr := g.file.Close(); err == nil {
		err = cerr
	}
	return err
}
