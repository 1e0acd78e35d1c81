package storedlist

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
)

// stored is a Reader over a map: key → (revision, value).
type stored map[string]storedValue

type storedValue struct {
	rev   int64
	value []byte
}

func (s stored) StoredValues(keys []string, each func(i int, modRev int64, value []byte) error) error {
	for i, k := range keys {
		if v, ok := s[k]; ok {
			if err := each(i, v.rev, v.value); err != nil {
				return err
			}
		}
	}
	return nil
}

var configMaps = schema.GroupResource{Resource: "configmaps"}

func key(namespace, name string) string { return "/registry/configmaps/" + namespace + "/" + name }

// fixture is n ConfigMaps, stored as the storage codec stores them (JSON
// of v1, no resourceVersion), and their list as the storage returns it.
func fixture(t *testing.T, n int) (stored, *corev1.ConfigMapList, runtime.Serializer) {
	t.Helper()
	codecs := serializer.NewCodecFactory(scheme.Scheme, serializer.WithStreamingCollectionEncodingToJSON())
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	storage := codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
	db := stored{}
	list := &corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{Kind: "ConfigMapList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: "999", Continue: "next"}}
	for i := range n {
		cm := corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i), Namespace: "ns", UID: "u", Labels: map[string]string{"i": strconv.Itoa(i)}},
			Data: map[string]string{"html": "<b>&</b>", "unicode": "é\u2028"}}
		var buf bytes.Buffer
		if err := storage.Encode(&cm, &buf); err != nil {
			t.Fatal(err)
		}
		rev := int64(100 + i)
		db[key("ns", cm.Name)] = storedValue{rev: rev, value: buf.Bytes()}
		cm.ResourceVersion = strconv.FormatInt(rev, 10)
		cm.TypeMeta = metav1.TypeMeta{} // the storage's items carry none
		list.Items = append(list.Items, cm)
	}
	return db, list, info.Serializer
}

// newSources is an empty table whose metrics count (registered).
func newSources() *Sources {
	s := NewSources()
	metrics.NewKubeRegistry().MustRegister(s.Metrics()...)
	return s
}

func decoded(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}

func TestEncodeList(t *testing.T) {
	filledName := "cm-0003"
	for _, c := range []struct {
		name string
		n    int
		// change the stored values or the list before encoding
		change func(db stored, list *corev1.ConfigMapList)
		// items expected from storage, encoded
		fromStorage, encoded int
	}{
		{name: "every item stored", n: 5, fromStorage: 5},
		{name: "more items than a batch", n: 2*batch + 7, fromStorage: 2*batch + 7},
		{name: "no items", n: 0},
		{name: "items nil", n: 0, change: func(_ stored, list *corev1.ConfigMapList) { list.Items = nil }},
		{name: "a key changed since the list", n: 5, fromStorage: 4, encoded: 1, change: func(db stored, _ *corev1.ConfigMapList) {
			v := db[key("ns", "cm-0002")]
			v.rev++
			db[key("ns", "cm-0002")] = v
		}},
		{name: "a key deleted since the list", n: 5, fromStorage: 4, encoded: 1, change: func(db stored, _ *corev1.ConfigMapList) { delete(db, key("ns", "cm-0001")) }},
		{name: "stored in another version", n: 3, fromStorage: 2, encoded: 1, change: func(db stored, _ *corev1.ConfigMapList) {
			v := db[key("ns", "cm-0000")]
			v.value = bytes.Replace(v.value, []byte(`"apiVersion":"v1"`), []byte(`"apiVersion":"v2"`), 1)
			db[key("ns", "cm-0000")] = v
		}},
		{name: "stored encrypted", n: 3, fromStorage: 2, encoded: 1, change: func(db stored, _ *corev1.ConfigMapList) {
			v := db[key("ns", "cm-0002")]
			v.value = append([]byte("k8s:enc:aescbc:v1:key:"), v.value...)
			db[key("ns", "cm-0002")] = v
		}},
		{name: "an item filled in on read", n: 5, fromStorage: 4, encoded: 1, change: func(_ stored, list *corev1.ConfigMapList) {
			list.Items[3].Data = map[string]string{"filled": "in"}
		}},
		{name: "an item without a resourceVersion", n: 2, fromStorage: 1, encoded: 1, change: func(_ stored, list *corev1.ConfigMapList) { list.Items[0].ResourceVersion = "" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, list, json := fixture(t, c.n)
			if c.change != nil {
				c.change(db, list)
			}
			sources := newSources()
			sources.Add(&corev1.ConfigMap{}, Source{Resource: configMaps, Reader: db, Key: key, Stored: corev1.SchemeGroupVersion.WithKind("ConfigMap")})
			sources.SetFilled(configMaps, func(obj runtime.Object) bool {
				return obj.(*corev1.ConfigMap).Name == filledName && obj.(*corev1.ConfigMap).Data["filled"] != ""
			})
			s := NewSerializer(json, sources)

			var got, want bytes.Buffer
			if err := s.Encode(list, &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Encode(list, &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(decoded(t, got.Bytes()), decoded(t, want.Bytes())) {
				t.Errorf("from stored bytes:\n%s\nencoded:\n%s", got.Bytes(), want.Bytes())
			}
			if !bytes.HasSuffix(got.Bytes(), []byte("}\n")) {
				t.Errorf("the list does not end as the JSON serializer's do (}\\n): %q", got.Bytes()[max(0, got.Len()-10):])
			}
			for source, n := range map[string]int{FromStorage: c.fromStorage, Encoded: c.encoded} {
				v, err := testutil.GetCounterMetricValue(sources.items.WithLabelValues(configMaps.String(), source))
				if err != nil {
					t.Fatal(err)
				}
				if int(v) != n {
					t.Errorf("%s items: %v, want %d", source, v, n)
				}
			}
		})
	}
}

// TestEncodeOthers: what is not a list of a stored kind goes to the
// wrapped serializer.
func TestEncodeOthers(t *testing.T) {
	db, list, json := fixture(t, 2)
	sources := newSources()
	sources.Add(&corev1.ConfigMap{}, Source{Resource: configMaps, Reader: db, Key: key, Stored: corev1.SchemeGroupVersion.WithKind("ConfigMap")})
	s := NewSerializer(json, sources)
	secrets := &corev1.SecretList{Items: []corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "s", ResourceVersion: "100"}}}}
	for name, obj := range map[string]runtime.Object{
		"an object":            &list.Items[0],
		"a list of other kind": secrets,
		"a table":              &metav1.Table{Rows: []metav1.TableRow{{Cells: []any{"x"}}}},
	} {
		var got, want bytes.Buffer
		if err := s.Encode(obj, &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Encode(obj, &want); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%s: %s, want %s", name, got.Bytes(), want.Bytes())
		}
	}
	v, err := testutil.GetCounterMetricValue(sources.items.WithLabelValues(configMaps.String(), FromStorage))
	if err != nil || v != 0 {
		t.Errorf("items from storage: %v (%v), want none", v, err)
	}
}

// TestSourcesOfOneTypeTwice: a Go type stored by two resources has no
// source (which resource an item is of is not known).
func TestSourcesOfOneTypeTwice(t *testing.T) {
	sources := newSources()
	src := Source{Resource: configMaps, Key: key, Stored: corev1.SchemeGroupVersion.WithKind("ConfigMap")}
	sources.Add(&corev1.ConfigMap{}, src)
	if sources.lookup(reflect.TypeFor[corev1.ConfigMap]()) == nil {
		t.Fatal("no source after Add")
	}
	src.Resource = schema.GroupResource{Resource: "otherconfigmaps"}
	sources.Add(&corev1.ConfigMap{}, src)
	if got := sources.lookup(reflect.TypeFor[corev1.ConfigMap]()); got != nil {
		t.Errorf("a source %v for a type two resources store", got.Resource)
	}
}

// failing is a Reader whose storage fails.
type failing struct{}

func (failing) StoredValues([]string, func(int, int64, []byte) error) error {
	return errors.New("the database is closed")
}

// TestReaderFails: when the storage cannot be read, the list is encoded
// (it is already under way: an error would cut it short).
func TestReaderFails(t *testing.T) {
	_, list, json := fixture(t, 3)
	sources := newSources()
	sources.Add(&corev1.ConfigMap{}, Source{Resource: configMaps, Reader: failing{}, Key: key, Stored: corev1.SchemeGroupVersion.WithKind("ConfigMap")})
	var got, want bytes.Buffer
	if err := NewSerializer(json, sources).Encode(list, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Encode(list, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(decoded(t, got.Bytes()), decoded(t, want.Bytes())) {
		t.Errorf("got:\n%s\nwant:\n%s", got.Bytes(), want.Bytes())
	}
	if v, _ := testutil.GetCounterMetricValue(sources.items.WithLabelValues(configMaps.String(), Encoded)); v != 3 {
		t.Errorf("encoded items: %v, want 3", v)
	}
}

// specFirst is a kind whose fields put spec before its metadata (as
// OADP's types do): its stored form does not begin with kind,
// apiVersion and metadata.
type specFirst struct {
	Spec              string `json:"spec"`
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

func (s *specFirst) DeepCopyObject() runtime.Object { c := *s; return &c }

// TestSourcesOfOtherShapes: a type whose stored form does not begin with
// its kind, apiVersion and metadata has no source.
func TestSourcesOfOtherShapes(t *testing.T) {
	sources := NewSources()
	sources.Add(&specFirst{}, Source{Resource: configMaps, Key: key})
	if sources.lookup(reflect.TypeFor[specFirst]()) != nil {
		t.Error("a source for a type whose spec is encoded first")
	}
}
