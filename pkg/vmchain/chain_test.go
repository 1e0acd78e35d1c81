package vmchain

import (
	"reflect"
	"strings"
	"testing"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/vmmanifest"
)

// TestChain: the chain of a backup is found by checkpoints, whatever the
// order of the links; a missing parent or a loop is an error naming it.
func TestChain(t *testing.T) {
	link := func(dir string, typ kv.BackupType, checkpoint, parent string) Link {
		return Link{Dir: dir, Manifest: vmmanifest.Manifest{Type: typ, Checkpoint: checkpoint, Parent: parent}}
	}
	full, inc2, inc3 := link("/v/b1", kv.Full, "c1", ""), link("/v/b2", kv.Incremental, "c2", "c1"), link("/v/b3", kv.Incremental, "c3", "c2")
	other := link("/v/x1", kv.Full, "x1", "")
	for _, tc := range []struct {
		name    string
		links   []Link
		dir     string
		want    []string
		wantErr string
	}{
		{"full", []Link{full, inc2}, "/v/b1", []string{"/v/b1"}, ""},
		{"incremental, links in any order", []Link{inc3, other, full, inc2}, "/v/b3", []string{"/v/b1", "/v/b2", "/v/b3"}, ""},
		{"missing parent", []Link{full, inc3}, "/v/b3", nil, `since checkpoint "c2"`},
		{"not a link", []Link{full}, "/v/b9", nil, "/v/b9 is not"},
		{"loop", []Link{link("/v/a", kv.Incremental, "ca", "cb"), link("/v/b", kv.Incremental, "cb", "ca")}, "/v/a", nil, "loops"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Chain(tc.links, tc.dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, %v; want an error saying %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
