package configuration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const ns = "backstop-system"

const locations = `apiVersion: velero.io/v1
kind: BackupStorageLocation
metadata:
  name: primary
spec:
  provider: aws
  default: true
  objectStorage: {bucket: backups, prefix: cluster-a}
  credential: {name: cloud-credentials, key: cloud}
  config: {region: eu-west-1}
---
apiVersion: velero.io/v1
kind: VolumeSnapshotLocation
metadata:
  name: snapshots
  namespace: backstop-system
spec:
  provider: aws
  config: {region: eu-west-1}
`

const schedules = `apiVersion: velero.io/v1
kind: Schedule
metadata:
  name: backstop-nightly
  labels: {team: platform}
spec:
  schedule: "0 2 * * *"
  template:
    includedNamespaces: [shop]
    ttl: 168h0m0s
`

func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRead: the documents of the directory's manifest files, and what
// makes the whole read fail.
func TestRead(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string // kind/name, in order
		err   string
	}{
		{name: "locations and a schedule", files: map[string]string{"locations.yaml": locations, "schedules.yaml": schedules,
			// A ConfigMap volume's own entries and other files are not read.
			"..data": "not: read", "README": "kind: nothing"},
			want: []string{"BackupStorageLocation/primary", "VolumeSnapshotLocation/snapshots", "Schedule/backstop-nightly"}},
		{name: "empty documents", files: map[string]string{"a.yaml": "---\n---\n" + schedules + "---\n"}, want: []string{"Schedule/backstop-nightly"}},
		{name: "JSON", files: map[string]string{"s.json": `{"apiVersion":"velero.io/v1","kind":"Schedule","metadata":{"name":"j"},"spec":{"schedule":"@daily"}}`},
			want: []string{"Schedule/j"}},
		{name: "the tenants' policy", files: map[string]string{"policy.yaml": "apiVersion: oadp.openshift.io/v1alpha1\nkind: DataProtectionApplication\nmetadata: {name: backstop}\nspec: {nonAdmin: {enable: true}}\n"},
			want: []string{"DataProtectionApplication/backstop"}},
		{name: "an OADP kind not the policy", files: map[string]string{"a.yaml": "apiVersion: oadp.openshift.io/v1alpha1\nkind: NonAdminBackup\nmetadata: {name: b}\n"}, err: "not a configuration's kind"},
		{name: "another kind", files: map[string]string{"a.yaml": "apiVersion: velero.io/v1\nkind: Backup\nmetadata: {name: b}\n"}, err: "not a configuration's kind"},
		{name: "another group", files: map[string]string{"a.yaml": "apiVersion: v1\nkind: Schedule\nmetadata: {name: b}\n"}, err: "not a configuration's kind"},
		{name: "a Secret", files: map[string]string{"a.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: b}\n"}, err: "not a configuration's kind"},
		{name: "no name", files: map[string]string{"a.yaml": "apiVersion: velero.io/v1\nkind: Schedule\nmetadata: {}\n"}, err: "without a name"},
		{name: "another namespace", files: map[string]string{"a.yaml": "apiVersion: velero.io/v1\nkind: Schedule\nmetadata: {name: b, namespace: tenant}\n"},
			err: `of namespace "tenant"`},
		{name: "twice", files: map[string]string{"a.yaml": schedules, "b.yaml": schedules}, err: "is also in a.yaml"},
		{name: "not YAML", files: map[string]string{"a.yaml": "kind: [unclosed\n"}, err: "a.yaml, document 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Read(writeDir(t, tc.files), ns)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Read: %v, %v; want an error with %q", objs, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.Kind+"/"+o.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Read: %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := Read(filepath.Join(t.TempDir(), "missing"), ns); err == nil {
		t.Error("Read of a missing directory: no error")
	}
}
