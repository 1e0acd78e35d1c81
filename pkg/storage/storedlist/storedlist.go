// Package storedlist writes JSON lists of API objects from the bytes the
// objects are stored as. A list the storage returned (from the watch cache
// or the store, with its selectors, pages and resourceVersion semantics
// already applied) is written with only its envelope encoded: each item is
// the stored JSON of its key at the item's resourceVersion, with its kind and
// apiVersion taken out and its resourceVersion put in, as the item would
// encode. An item whose stored bytes are not that (the key changed since,
// another version or an encrypted value is stored, or fields were filled in
// after the read) is encoded as usual. It owns that encoder and the table of
// where each kind is stored; it knows nothing of the resources themselves.
package storedlist

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
)

// Reader reads stored values by key (pebble.DB.StoredValues).
type Reader interface {
	StoredValues(keys []string, each func(i int, modRev int64, value []byte) error) error
}

// Source is where the objects of one kind are stored, and how.
type Source struct {
	// Resource is the resource the objects are stored as.
	Resource schema.GroupResource
	// Reader reads the stored values.
	Reader Reader
	// Key is the storage key of an object.
	Key func(namespace, name string) string
	// Stored is the group, version and kind objects are stored as: stored
	// bytes of another (an object stored by an older version, an encrypted
	// value) are not used.
	Stored schema.GroupVersionKind
}

// Sources is the table of the stored kinds, filled in while the server's
// storage is built and read by the encoders it makes.
type Sources struct {
	mu sync.RWMutex
	// byType: by the Go type of the object as it is served (the list's
	// item type).
	byType map[reflect.Type]*Source
	// filled: by resource, what tells an object with fields filled in
	// after it was read (not as stored): such objects are encoded.
	filled map[schema.GroupResource]func(runtime.Object) bool
	// items counts the items of lists written, by resource and by how:
	// from stored bytes or encoded.
	items *metrics.CounterVec
}

// How list items were written (the "source" label of
// backstop_apiserver_list_items_total).
const (
	FromStorage = "stored"
	Encoded     = "encoded"
)

// NewSources returns an empty table.
func NewSources() *Sources {
	return &Sources{byType: map[reflect.Type]*Source{}, filled: map[schema.GroupResource]func(runtime.Object) bool{},
		items: metrics.NewCounterVec(&metrics.CounterOpts{Namespace: "backstop", Subsystem: "apiserver", Name: "list_items_total",
			Help:           "Items of JSON lists of stored kinds written, by resource and by source: from their stored bytes (stored) or encoded (encoded).",
			StabilityLevel: metrics.ALPHA}, []string{"resource", "source"})}
}

// Metrics are the table's metrics, for the server's registry.
func (s *Sources) Metrics() []metrics.Registerable { return []metrics.Registerable{s.items} }

// Add registers where objects of Go type example's are stored. Only objects
// served in their stored version are written from their bytes: example is
// an object of src.Stored.
func (s *Sources) Add(example runtime.Object, src Source) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := reflect.TypeOf(example).Elem()
	if !BeginsWithMeta(t) {
		// Its stored form does not begin with kind, apiVersion and
		// metadata (OADP's types put spec and status first): encoded.
		klog.V(2).InfoS("Lists of a type whose fields do not begin with its type and object metadata are encoded", "type", t, "resource", src.Resource)
		return
	}
	if prev, ok := s.byType[t]; ok && (prev == nil || prev.Resource != src.Resource) {
		// A type stored by two resources: which one an item is of is not
		// known, its lists are encoded.
		klog.V(2).InfoS("Lists of a type two resources store are encoded", "type", t, "resource", src.Resource)
		s.byType[t] = nil
		return
	}
	klog.V(4).InfoS("Lists written from stored bytes", "type", t, "resource", src.Resource, "stored", src.Stored)
	s.byType[t] = &src
}

// BeginsWithMeta reports whether a struct type encodes kind, apiVersion
// and metadata first, as lists from stored bytes need: its first field is
// metav1.TypeMeta, inline, and its second metav1.ObjectMeta as "metadata".
func BeginsWithMeta(t reflect.Type) bool {
	if t.Kind() != reflect.Struct || t.NumField() < 2 {
		return false
	}
	typeMeta, objectMeta := t.Field(0), t.Field(1)
	tag := typeMeta.Tag.Get("json")
	return typeMeta.Anonymous && typeMeta.Type == reflect.TypeFor[metav1.TypeMeta]() && (tag == "" || tag == ",inline") &&
		objectMeta.Type == reflect.TypeFor[metav1.ObjectMeta]() && isMetadataTag(objectMeta.Tag.Get("json"))
}

// isMetadataTag: the tags that encode a metadata struct as "metadata"
// (omitempty changes nothing for a struct).
func isMetadataTag(tag string) bool { return tag == "metadata" || tag == "metadata,omitempty" }

// SetFilled names the function that tells a resource's objects with
// fields filled in on read, whether or not its source is added yet.
func (s *Sources) SetFilled(resource schema.GroupResource, filled func(runtime.Object) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.filled[resource] = filled
}

func (s *Sources) lookup(t reflect.Type) *Source {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byType[t]
}

func (s *Sources) filledOf(resource schema.GroupResource) func(runtime.Object) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.filled[resource]
}

// Serializer is a JSON serializer that writes lists of the kinds in its
// sources from their stored bytes; everything else it leaves to the
// serializer it wraps (and it decodes with it).
type Serializer struct {
	runtime.Serializer
	sources *Sources
}

var _ runtime.EncoderWithAllocator = &Serializer{}

// NewSerializer wraps a JSON serializer (not a pretty one: stored bytes are
// compact).
func NewSerializer(json runtime.Serializer, sources *Sources) *Serializer {
	return &Serializer{Serializer: json, sources: sources}
}

// Encode writes obj.
func (s *Serializer) Encode(obj runtime.Object, w io.Writer) error {
	if done, err := s.encodeList(obj, w); done {
		return err
	}
	return s.Serializer.Encode(obj, w)
}

// EncodeWithAllocator writes obj, with a's buffers where the wrapped
// serializer takes them.
func (s *Serializer) EncodeWithAllocator(obj runtime.Object, w io.Writer, a runtime.MemoryAllocator) error {
	if done, err := s.encodeList(obj, w); done {
		return err
	}
	if e, ok := s.Serializer.(runtime.EncoderWithAllocator); ok {
		return e.EncodeWithAllocator(obj, w, a)
	}
	return s.Serializer.Encode(obj, w)
}

// batch is how many items are read from the storage at once (their values
// are copied out of it before they are written).
const batch = 256

// flushAt is the size of output gathered before it goes to the writer.
const flushAt = 64 << 10

// encodeList writes obj if it is a list of a stored kind (done), as the
// JSON serializer's streaming list encoder writes lists: kind, apiVersion,
// metadata, items, and a newline.
func (s *Serializer) encodeList(obj runtime.Object, w io.Writer) (done bool, err error) {
	typeMeta, listMeta, items, ok := listParts(obj)
	if !ok {
		return false, nil
	}
	src := s.sources.lookup(items.Type().Elem())
	if src == nil {
		return false, nil
	}
	// "{" alone first, as the streaming encoders write it: kube's response
	// writer then gathers what follows to decide on compression (gzip
	// when the client accepts it and the response is over 128 KiB).
	if _, err := w.Write([]byte("{")); err != nil {
		return true, err
	}
	out := &bytes.Buffer{}
	if typeMeta.Kind != "" {
		writeKeyValue(out, "kind", typeMeta.Kind)
	}
	if typeMeta.APIVersion != "" {
		writeKeyValue(out, "apiVersion", typeMeta.APIVersion)
	}
	if err := writeKeyValue(out, "metadata", listMeta); err != nil {
		return true, err
	}
	if items.IsNil() {
		out.WriteString(`"items":null}` + "\n")
		_, err := w.Write(out.Bytes())
		return true, err
	}
	out.WriteString(`"items":[`)
	l := listWriter{src: src, filled: s.sources.filledOf(src.Resource), out: out, w: w, prefix: storedPrefix(src.Stored)}
	defer func() {
		resource := src.Resource.String()
		s.sources.items.WithLabelValues(resource, FromStorage).Add(float64(l.fromStorage))
		s.sources.items.WithLabelValues(resource, Encoded).Add(float64(l.encoded))
	}()
	for start := 0; start < items.Len(); start += batch {
		if err := l.writeItems(items, start, min(items.Len(), start+batch)); err != nil {
			return true, err
		}
	}
	out.WriteString("]}\n")
	_, err = w.Write(out.Bytes())
	return true, err
}

// listWriter writes a list's items, a batch at a time.
type listWriter struct {
	src    *Source
	filled func(runtime.Object) bool // objects filled in on read, or nil
	out    *bytes.Buffer
	w      io.Writer
	prefix []byte // how the stored form of every object begins
	// Per item of the batch: its resourceVersion (0: encode it) and where
	// its stored bytes are in values (end 0: none, encode it).
	revs   []int64
	spans  [][2]int
	values []byte
	// Per key read: the key and its item's place in the batch.
	keys []string
	at   []int
	// Items written from storage and encoded.
	fromStorage, encoded int
}

func (l *listWriter) writeItems(items reflect.Value, start, end int) error {
	n := end - start
	l.revs, l.spans = append(l.revs[:0], make([]int64, n)...), append(l.spans[:0], make([][2]int, n)...)
	l.keys, l.at, l.values = l.keys[:0], l.at[:0], l.values[:0]
	for i := range n {
		obj, ok := items.Index(start + i).Addr().Interface().(runtime.Object)
		if !ok || (l.filled != nil && l.filled(obj)) {
			continue
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			continue
		}
		rev, err := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
		if err != nil || rev <= 0 {
			continue
		}
		l.revs[i] = rev
		l.keys = append(l.keys, l.src.Key(m.GetNamespace(), m.GetName()))
		l.at = append(l.at, i)
	}
	if len(l.keys) > 0 {
		err := l.src.Reader.StoredValues(l.keys, func(k int, modRev int64, value []byte) error {
			i := l.at[k]
			if modRev != l.revs[i] || !bytes.HasPrefix(value, l.prefix) {
				return nil
			}
			l.spans[i] = [2]int{len(l.values), len(l.values) + len(value)}
			l.values = append(l.values, value...)
			return nil
		})
		if err != nil {
			// The list is already under way: its items are encoded.
			klog.ErrorS(err, "Reading stored objects for a list failed: its items are encoded", "resource", l.src.Resource)
			clear(l.spans)
		}
	}
	for i := range n {
		if start+i > 0 {
			l.out.WriteByte(',')
		}
		if span := l.spans[i]; span[1] > 0 {
			l.writeStored(l.values[span[0]:span[1]], l.revs[i])
			l.fromStorage++
		} else if err := l.encode(items.Index(start + i).Addr().Interface()); err != nil {
			return err
		} else {
			l.encoded++
		}
		if l.out.Len() >= flushAt {
			if _, err := l.w.Write(l.out.Bytes()); err != nil {
				return err
			}
			l.out.Reset()
		}
	}
	return nil
}

// writeStored writes a stored object as an item: without the kind and
// apiVersion it was stored with, with its resourceVersion (which the
// storage does not store) first in its metadata.
func (l *listWriter) writeStored(value []byte, rev int64) {
	rest := bytes.TrimRight(value[len(l.prefix):], "\n")
	l.out.WriteString(`{"metadata":{"resourceVersion":"`)
	l.out.WriteString(strconv.FormatInt(rev, 10))
	l.out.WriteByte('"')
	if len(rest) > 0 && rest[0] != '}' {
		l.out.WriteByte(',')
	}
	l.out.Write(rest)
}

// encode writes an item as the JSON serializer does (encoding/json,
// HTML escaped), without its newline.
func (l *listWriter) encode(item any) error {
	b, err := json.Marshal(item)
	if err != nil {
		return err
	}
	l.out.Write(b)
	return nil
}

// storedPrefix is how an object of gvk begins when stored as JSON.
func storedPrefix(gvk schema.GroupVersionKind) []byte {
	kind, _ := json.Marshal(gvk.Kind)
	apiVersion, _ := json.Marshal(gvk.GroupVersion().String())
	return []byte(`{"kind":` + string(kind) + `,"apiVersion":` + string(apiVersion) + `,"metadata":{`)
}

func writeKeyValue(out *bytes.Buffer, key string, value any) error {
	b, err := json.Marshal(value)
	if err != nil {
		return err
	}
	out.WriteByte('"')
	out.WriteString(key)
	out.WriteString(`":`)
	out.Write(b)
	out.WriteByte(',')
	return nil
}

// listParts takes a list apart as the JSON serializer's streaming encoder
// does: a struct of TypeMeta (inline), ListMeta ("metadata", with or
// without omitempty, which changes nothing for a struct: Velero's lists
// have none) and a slice of items ("items"); anything else is not a list
// to write here.
func listParts(obj runtime.Object) (metav1.TypeMeta, metav1.ListMeta, reflect.Value, bool) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return metav1.TypeMeta{}, metav1.ListMeta{}, reflect.Value{}, false
	}
	v = v.Elem()
	t := v.Type()
	if t.NumField() != 3 || !t.Field(0).Anonymous || !isMetadataTag(t.Field(1).Tag.Get("json")) ||
		t.Field(2).Tag.Get("json") != "items" || t.Field(2).Type.Kind() != reflect.Slice {
		return metav1.TypeMeta{}, metav1.ListMeta{}, reflect.Value{}, false
	}
	if tag, ok := t.Field(0).Tag.Lookup("json"); !ok || (tag != "" && tag != ",inline") {
		return metav1.TypeMeta{}, metav1.ListMeta{}, reflect.Value{}, false
	}
	typeMeta, ok := v.Field(0).Interface().(metav1.TypeMeta)
	if !ok {
		return metav1.TypeMeta{}, metav1.ListMeta{}, reflect.Value{}, false
	}
	listMeta, ok := v.Field(1).Interface().(metav1.ListMeta)
	if !ok {
		return metav1.TypeMeta{}, metav1.ListMeta{}, reflect.Value{}, false
	}
	return typeMeta, listMeta, v.Field(2), true
}
