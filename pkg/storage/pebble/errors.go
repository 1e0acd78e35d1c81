package pebble

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/value"
	"k8s.io/klog/v2"
)

// The messages below are the ones the upstream etcd3 backend returns, so
// clients see the same errors whichever backend serves them.
const (
	expired         = "The resourceVersion for the provided list is too old."
	continueExpired = "The provided continue parameter is too old " +
		"to display a consistent list result. You can start a new list without " +
		"the continue parameter."
	inconsistentContinue = "The provided continue parameter is too old " +
		"to display a consistent list result. You can start a new list without " +
		"the continue parameter, or use the continue token in this response to " +
		"retrieve the remainder of the results. Continuing with the provided " +
		"token results in an inconsistent list - objects that were created, " +
		"modified, or deleted between the time the first chunk was returned " +
		"and now may show up in the list."
)

func interpretWatchError(err error) error {
	if errors.Is(err, ErrCompacted) {
		return apierrors.NewResourceExpired("The resourceVersion for the provided watch is too old.")
	}
	var corruptDeleted *corruptObjectDeletedError
	if errors.As(err, &corruptDeleted) {
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusInternalServerError,
			Reason:  metav1.StatusReasonStoreReadError,
			Message: corruptDeleted.Error(),
		}}
	}
	return err
}

func interpretListError(err error, paging bool, continueKey, keyPrefix string) error {
	if errors.Is(err, ErrCompacted) {
		if paging {
			return handleCompactedErrorForPaging(continueKey, keyPrefix)
		}
		return apierrors.NewResourceExpired(expired)
	}
	return err
}

func handleCompactedErrorForPaging(continueKey, keyPrefix string) error {
	// continueToken.ResourceVersion=-1 means that the apiserver can continue
	// the list at the latest resource version.
	newToken, err := storage.EncodeContinue(continueKey, keyPrefix, -1)
	if err != nil {
		utilruntime.HandleError(err)
		return apierrors.NewResourceExpired(continueExpired)
	}
	statusError := apierrors.NewResourceExpired(inconsistentContinue)
	statusError.ErrStatus.ListMeta.Continue = newToken
	return statusError
}

// listItemErrors collects per-item errors of a LIST; Append reports whether
// the caller should stop.
type listItemErrors interface {
	Append(key string, err error) bool
	Aggregate() error
}

func defaultListErrorAggregatorFactory() listItemErrors { return &abortOnFirstError{} }

type abortOnFirstError struct{ err error }

func (a *abortOnFirstError) Append(_ string, err error) bool { a.err = err; return true }
func (a *abortOnFirstError) Aggregate() error                { return a.err }

// maxCorruptObjErrsToAggregate caps the corrupt-object errors of one LIST.
const maxCorruptObjErrsToAggregate = 100

func corruptObjErrAggregatorFactory(maxCount int) func() listItemErrors {
	return func() listItemErrors { return &corruptObjErrAggregator{maxCount: maxCount} }
}

var errTooMany = errors.New("too many errors, the list is truncated")

type corruptObjErrAggregator struct {
	errs     []error
	abortErr error
	maxCount int
}

func (a *corruptObjErrAggregator) Append(key string, err error) bool {
	if a.abortErr != nil {
		return true
	}
	var corruptObjErr *corruptObjectError
	if errors.As(err, &corruptObjErr) {
		a.errs = append(a.errs, storage.NewCorruptObjError(key, corruptObjErr))
		if len(a.errs) >= a.maxCount {
			a.abortErr = errTooMany
			return true
		}
		return false
	}
	a.abortErr = err
	return true
}

func (a *corruptObjErrAggregator) Aggregate() error {
	switch {
	case len(a.errs) == 0 && a.abortErr != nil:
		return a.abortErr
	case len(a.errs) > 0:
		return &aggregatedStorageError{errs: utilerrors.NewAggregate(a.errs), abortErr: a.abortErr, resourcePrefix: "list"}
	default:
		return nil
	}
}

// NewStoreWithUnsafeCorruptObjectDeletion wraps a store so that corrupt
// objects surface as storage.CorruptObjError, which the registry's unsafe
// deletion flow (AllowUnsafeMalformedObjectDeletion) acts on.
func NewStoreWithUnsafeCorruptObjectDeletion(delegate storage.Interface, gr schema.GroupResource) storage.Interface {
	return &corruptObjectDeleter{Interface: delegate, groupResource: gr}
}

type corruptObjectDeleter struct {
	storage.Interface
	groupResource schema.GroupResource
}

func (s *corruptObjectDeleter) Get(ctx context.Context, key string, opts storage.GetOptions, out runtime.Object) error {
	if err := s.Interface.Get(ctx, key, opts, out); err != nil {
		var corruptObjErr *corruptObjectError
		if !errors.As(err, &corruptObjErr) {
			return err
		}
		return storage.NewCorruptObjError(key, corruptObjErr)
	}
	return nil
}

func (s *corruptObjectDeleter) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	err := s.Interface.GetList(ctx, key, opts, listObj)
	if err == nil {
		return nil
	}
	var aggregatedErr *aggregatedStorageError
	if errors.As(err, &aggregatedErr) {
		klog.V(5).ErrorS(aggregatedErr, "corrupt objects")
		return aggregatedErr.NewAPIStatusError(s.groupResource)
	}
	return err
}

type corruptObjErrorInterpretingDecoder struct{ Decoder }

func (d *corruptObjErrorInterpretingDecoder) Decode(value []byte, objPtr runtime.Object, rev int64) error {
	if err := d.Decoder.Decode(value, objPtr, rev); err != nil {
		return &corruptObjectError{err: err, errType: undecodable, revision: rev}
	}
	return nil
}

func (d *corruptObjErrorInterpretingDecoder) DecodeListItem(ctx context.Context, data []byte, rev uint64, newItemFunc func() runtime.Object) (runtime.Object, error) {
	obj, err := d.Decoder.DecodeListItem(ctx, data, rev, newItemFunc)
	if err != nil {
		err = &corruptObjectError{err: err, errType: undecodable, revision: int64(rev)}
	}
	return obj, err
}

type corruptObjErrorInterpretingTransformer struct{ value.Transformer }

func (t *corruptObjErrorInterpretingTransformer) TransformFromStorage(ctx context.Context, data []byte, dataCtx value.Context) ([]byte, bool, error) {
	out, stale, err := t.Transformer.TransformFromStorage(ctx, data, dataCtx)
	if err != nil {
		err = &corruptObjectError{err: err, errType: untransformable}
	}
	return out, stale, err
}

// corruptObjectError marks stored data that cannot be transformed or decoded.
type corruptObjectError struct {
	err      error
	errType  int
	revision int64
}

const (
	untransformable int = iota + 1
	undecodable
)

var typeToMessage = map[int]string{
	untransformable: "data from the storage is not transformable",
	undecodable:     "object not decodable",
}

func (e *corruptObjectError) Unwrap() error { return e.err }
func (e *corruptObjectError) Error() string {
	return fmt.Sprintf("%s revision=%d: %v", typeToMessage[e.errType], e.revision, e.err)
}

type corruptObjectDeletedError struct{ err error }

func (e *corruptObjectDeletedError) Error() string {
	return fmt.Sprintf("saw a DELETED event, but object data is corrupt - %v", e.err)
}
func (e *corruptObjectDeletedError) Unwrap() error { return e.err }

type aggregatedStorageError struct {
	resourcePrefix string
	errs           utilerrors.Aggregate
	abortErr       error
}

func (e *aggregatedStorageError) Error() string {
	errs := e.errs.Errors()
	var b strings.Builder
	fmt.Fprintf(&b, "unable to transform or decode %d objects: {\n", len(errs))
	for _, err := range errs {
		fmt.Fprintf(&b, "\t%s\n", err.Error())
	}
	b.WriteString("}")
	if e.abortErr != nil {
		fmt.Fprintf(&b, ", aborted: %v", e.abortErr)
	}
	return b.String()
}

func (e *aggregatedStorageError) NewAPIStatusError(qualifiedResource schema.GroupResource) *apierrors.StatusError {
	errs := e.errs.Errors()
	var causes []metav1.StatusCause
	for _, err := range errs {
		var storageErr *storage.StorageError
		if errors.As(err, &storageErr) {
			causes = append(causes, metav1.StatusCause{
				Type:    metav1.CauseTypeUnexpectedServerResponse,
				Field:   storageErr.Key,
				Message: err.Error(),
			})
		}
	}
	switch {
	case errors.Is(e.abortErr, errTooMany):
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeTooMany, Message: errTooMany.Error()})
	case e.abortErr != nil:
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeUnexpectedServerResponse, Message: e.abortErr.Error()})
	}
	message := fmt.Sprintf("failed to read one or more %s from the storage: %v", qualifiedResource.String(), errs[0])
	if len(errs) > 1 {
		message = fmt.Sprintf("%s (and %d more)", message, len(errs)-1)
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure,
		Code:   http.StatusInternalServerError,
		Reason: metav1.StatusReasonStoreReadError,
		Details: &metav1.StatusDetails{
			Group:  qualifiedResource.Group,
			Kind:   qualifiedResource.Resource,
			Name:   e.resourcePrefix,
			Causes: causes,
		},
		Message: message,
	}}
}
