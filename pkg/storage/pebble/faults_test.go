package pebble

import (
	"context"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/apis/example"
	"k8s.io/apiserver/pkg/storage"
)

// overwriteRaw replaces the stored record of key with raw bytes, the way a
// flipped bit or a foreign writer would.
func overwriteRaw(t *testing.T, db *DB, key string, raw []byte) {
	t.Helper()
	if err := db.pdb.Set(currentKey(key), raw, pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

func createPod(ctx context.Context, t *testing.T, s *store, name string) *example.Pod {
	t.Helper()
	out := &example.Pod{}
	pod := &example.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	if err := s.Create(ctx, "/pods/ns/"+name, pod, out, 0); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUndecodableValue: a stored value that cannot be decoded gives a clear
// error for that key on Get and List (abort on the first error, the upstream
// default), never a panic; other keys stay readable.
func TestUndecodableValue(t *testing.T) {
	cases := map[string]struct {
		raw  []byte
		want string // what the error must say
	}{
		"garbage after the transformer prefix": {encodeCurrent([]byte(defaultTestPrefix+"{not json"), 5, 5, 0), "json"},
		"value without the transformer prefix": {encodeCurrent([]byte("plain"), 5, 5, 0), "expected prefix"},
		"truncated record header":              {[]byte{1, 2, 3}, `corrupt record for key "/pods/ns/bad"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, s, b := testSetup(t)
			createPod(ctx, t, s, "good")
			createPod(ctx, t, s, "bad")
			overwriteRaw(t, b.DB(), "/pods/ns/bad", tc.raw)

			err := s.Get(ctx, "/pods/ns/bad", storage.GetOptions{}, &example.Pod{})
			if err == nil {
				t.Fatal("Get of a corrupt value succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Get error does not say what is wrong (want %q): %v", tc.want, err)
			}
			if err := s.Get(ctx, "/pods/ns/good", storage.GetOptions{}, &example.Pod{}); err != nil {
				t.Errorf("Get of an intact neighbour failed: %v", err)
			}
			err = s.GetList(ctx, "/pods/", storage.ListOptions{Recursive: true, Predicate: storage.Everything}, &example.PodList{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("List over a corrupt value: want an error saying %q, got %v", tc.want, err)
			}
		})
	}
}

// TestCorruptLogEntry: a watch that meets an undecodable log entry ends with
// an error event instead of a panic or a silent skip.
func TestCorruptLogEntry(t *testing.T) {
	ctx, s, b := testSetup(t)
	first := createPod(ctx, t, s, "a")
	second := createPod(ctx, t, s, "b")
	rev, _ := s.versioner.ObjectResourceVersion(second)
	if err := b.DB().pdb.Set(eventKey(int64(rev)), []byte{9, 9}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	// Force the watcher to read the log from Pebble, not the in-memory window.
	b.DB().mu.Lock()
	b.DB().recent = nil
	b.DB().recentHead = b.DB().Rev() + 1
	b.DB().mu.Unlock()

	w, err := s.Watch(ctx, "/pods/", storage.ListOptions{ResourceVersion: first.ResourceVersion, Recursive: true, Predicate: storage.Everything})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case e := <-w.ResultChan():
		if e.Type != watch.Error {
			t.Fatalf("want an error event, got %s %v", e.Type, e.Object)
		}
		if st, ok := e.Object.(*metav1.Status); !ok || !strings.Contains(st.Message, "corrupt log event") {
			t.Fatalf("error does not name the corrupt entry: %#v", e.Object)
		}
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("no event")
	}
}

// TestWriteFailureLeavesNothingHalfWritten: when the disk refuses the
// write-ahead log (ENOSPC), the write returns an error, the database stops
// serving (ReadinessCheck fails) instead of acknowledging anything else, and
// after a restart the state is whole: every acknowledged object is there and
// the failed one either fully is or fully is not.
func TestWriteFailureLeavesNothingHalfWritten(t *testing.T) {
	dir := t.TempDir()
	var failing atomic.Bool
	injector := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failing.Load() && strings.HasSuffix(op.Path, ".log") && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return syscall.ENOSPC
		}
		return nil
	})
	db, err := Open(Options{Dir: dir, PebbleOptions: &pebble.Options{FS: errorfs.Wrap(vfs.Default, injector)}})
	if err != nil {
		t.Fatal(err)
	}
	o := defaultSetupOptions()
	versioner := storage.APIObjectVersioner{}
	s, err := newStore(db, o.codec, func() runtime.Object { return &example.Pod{} }, func() runtime.Object { return &example.PodList{} },
		"", "/pods/", schema.GroupResource{Resource: "pods"}, o.transformer, NewDefaultDecoder(o.codec, versioner), versioner, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	acked := createPod(ctx, t, s, "before")

	failing.Store(true)
	err = s.Create(ctx, "/pods/ns/during", &example.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "during"}}, &example.Pod{}, 0)
	if err == nil {
		t.Fatal("a write the disk refused was acknowledged")
	}
	if !strings.Contains(err.Error(), "no space left") {
		t.Errorf("the error does not say why: %v", err)
	}
	if err := s.ReadinessCheck(); err == nil {
		t.Error("the store reports ready after a failed WAL write")
	}
	if err := s.Create(ctx, "/pods/ns/after", &example.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "after"}}, &example.Pod{}, 0); err == nil {
		t.Error("a write after a failed WAL write was acknowledged")
	}
	failing.Store(false)
	_ = db.Close()

	// Restart: what was acknowledged is there; nothing is half-written.
	s2, backend, err := newPodStore(dir, o)
	if err != nil {
		t.Fatalf("reopening after the failure: %v", err)
	}
	defer func() { _ = backend.Close() }()
	got := &example.Pod{}
	if err := s2.Get(ctx, "/pods/ns/before", storage.GetOptions{}, got); err != nil || got.ResourceVersion != acked.ResourceVersion {
		t.Fatalf("acknowledged object lost: %v (rv %q, want %q)", err, got.ResourceVersion, acked.ResourceVersion)
	}
	if err := s2.Get(ctx, "/pods/ns/after", storage.GetOptions{}, &example.Pod{}); !storage.IsNotFound(err) {
		t.Errorf("a refused write exists after restart: %v", err)
	}
	during := &example.Pod{}
	switch err := s2.Get(ctx, "/pods/ns/during", storage.GetOptions{}, during); {
	case storage.IsNotFound(err):
	case err == nil:
		if during.Name != "during" {
			t.Errorf("the failed write came back damaged: %#v", during)
		}
	default:
		t.Errorf("reading the failed write after restart: %v", err)
	}
	// The log and the current state agree.
	db2 := backend.DB()
	events, err := db2.readEvents(1, db2.Rev(), int(db2.Rev())+1)
	if err != nil || int64(len(events)) != db2.Rev() {
		t.Fatalf("log after restart: %d events for revision %d (%v)", len(events), db2.Rev(), err)
	}
}
