package apiserver

import (
	"context"
	"errors"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/backstop-io/backstop/pkg/apis/velero"
)

// cacheLister answers lists as a watch cache would: "0" from the cache as
// it is (stale: the older default only), and not-older-than or consistent
// reads with every location; failing, when set, the not-older-than reads.
type cacheLister struct {
	rest.TableConvertor
	stale, fresh      []velero.BackupStorageLocation
	notOlderThanFails bool
	asked             []string
}

func (l *cacheLister) NewList() runtime.Object { return &velero.BackupStorageLocationList{} }

func (l *cacheLister) List(_ context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	l.asked = append(l.asked, opts.ResourceVersion+"/"+string(opts.ResourceVersionMatch))
	switch {
	case opts.ResourceVersion == "0":
		return &velero.BackupStorageLocationList{Items: l.stale}, nil
	case opts.ResourceVersionMatch == metav1.ResourceVersionMatchNotOlderThan && l.notOlderThanFails:
		return nil, errors.New("Too large resource version")
	default:
		return &velero.BackupStorageLocationList{Items: l.fresh}, nil
	}
}

func storageLocation(name string, created time.Time, isDefault bool, rv string) velero.BackupStorageLocation {
	return velero.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "velero", CreationTimestamp: metav1.NewTime(created), ResourceVersion: rv},
		Spec:       velero.BackupStorageLocationSpec{Default: isDefault},
	}
}

func TestDefaultLocationFrom(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	old := storageLocation("default", t0, true, "10")
	newer := storageLocation("local", t0.Add(time.Second), true, "42")
	sameSecond := storageLocation("aaa", t0, true, "43")
	for _, tc := range []struct {
		name              string
		stale, fresh      []velero.BackupStorageLocation
		written           []velero.BackupStorageLocation
		notOlderThanFails bool
		want              string
		wantAsked         []string
	}{
		{name: "nothing written since the start: the cache as it is", stale: []velero.BackupStorageLocation{old},
			fresh: []velero.BackupStorageLocation{old, newer}, want: "default", wantAsked: []string{"0/"}},
		{name: "a new default just written: read not older than it", stale: []velero.BackupStorageLocation{old},
			fresh: []velero.BackupStorageLocation{old, newer}, written: []velero.BackupStorageLocation{old, newer},
			want: "local", wantAsked: []string{"42/NotOlderThan"}},
		{name: "the newest write counts, whatever the order noted", stale: []velero.BackupStorageLocation{old},
			fresh: []velero.BackupStorageLocation{old, newer}, written: []velero.BackupStorageLocation{newer, old},
			want: "local", wantAsked: []string{"42/NotOlderThan"}},
		{name: "the cache does not catch up: read as stored", stale: []velero.BackupStorageLocation{old},
			fresh: []velero.BackupStorageLocation{old, newer}, written: []velero.BackupStorageLocation{newer}, notOlderThanFails: true,
			want: "local", wantAsked: []string{"42/NotOlderThan", "/"}},
		{name: "no default in the cache: read as stored", stale: nil,
			fresh: []velero.BackupStorageLocation{newer}, want: "local", wantAsked: []string{"0/", "/"}},
		{name: "no default at all", want: "", wantAsked: []string{"0/", "/"}},
		{name: "two defaults of one second: the greater name", stale: []velero.BackupStorageLocation{old, sameSecond},
			want: "default", wantAsked: []string{"0/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &cacheLister{stale: tc.stale, fresh: tc.fresh, notOlderThanFails: tc.notOlderThanFails}
			store := &genericregistry.Store{}
			written := trackWrites(store)
			for i := range tc.written {
				store.AfterCreate(&tc.written[i], nil)
			}
			got, err := defaultLocationFrom(l, written)(context.Background(), "velero")
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("default location = %q, want %q", got, tc.want)
			}
			if len(l.asked) != len(tc.wantAsked) {
				t.Fatalf("lists asked %q, want %q", l.asked, tc.wantAsked)
			}
			for i := range l.asked {
				if l.asked[i] != tc.wantAsked[i] {
					t.Errorf("lists asked %q, want %q", l.asked, tc.wantAsked)
				}
			}
		})
	}
}

// TestTrackWrites: creates, updates and deletes of the store are noted.
func TestTrackWrites(t *testing.T) {
	store := &genericregistry.Store{}
	w := trackWrites(store)
	l := storageLocation("x", time.Time{}, false, "5")
	store.AfterCreate(&l, nil)
	l.ResourceVersion = "7"
	store.AfterUpdate(&l, nil)
	if got := w.rv.Load(); got != 7 {
		t.Errorf("after create and update: %d, want 7", got)
	}
	l.ResourceVersion = "9"
	store.AfterDelete(&l, nil)
	if got := w.rv.Load(); got != 9 {
		t.Errorf("after delete: %d, want 9", got)
	}
	l.ResourceVersion = "not a number"
	store.AfterUpdate(&l, nil)
	if got := w.rv.Load(); got != 9 {
		t.Errorf("after an unreadable version: %d, want 9 kept", got)
	}
	// Dry runs store nothing: their versions are the sender's.
	l.ResourceVersion = "999999999999"
	dryRun := []string{metav1.DryRunAll}
	store.AfterCreate(&l, &metav1.CreateOptions{DryRun: dryRun})
	store.AfterUpdate(&l, &metav1.UpdateOptions{DryRun: dryRun})
	store.AfterDelete(&l, &metav1.DeleteOptions{DryRun: dryRun})
	if got := w.rv.Load(); got != 9 {
		t.Errorf("after dry runs: %d, want 9 kept", got)
	}
}

// TestTrackWritesKeepsHooks: hooks the store had still run.
func TestTrackWritesKeepsHooks(t *testing.T) {
	var ran []string
	store := &genericregistry.Store{
		AfterCreate: func(runtime.Object, *metav1.CreateOptions) { ran = append(ran, "create") },
		AfterUpdate: func(runtime.Object, *metav1.UpdateOptions) { ran = append(ran, "update") },
		AfterDelete: func(runtime.Object, *metav1.DeleteOptions) { ran = append(ran, "delete") },
	}
	w := trackWrites(store)
	l := storageLocation("x", time.Time{}, false, "3")
	store.AfterCreate(&l, nil)
	store.AfterUpdate(&l, nil)
	store.AfterDelete(&l, nil)
	if len(ran) != 3 || w.rv.Load() != 3 {
		t.Errorf("the store's own hooks ran %v, the write noted %d", ran, w.rv.Load())
	}
}
