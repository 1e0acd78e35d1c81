package validation

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/backstop-io/backstop/pkg/apis/velero"
)

// fields returns the field paths of errs, for comparison.
func fields(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field)
	}
	return out
}

func TestValidateBackupSpec(t *testing.T) {
	cases := []struct {
		name string
		spec velero.BackupSpec
		want []string
	}{
		{"empty is valid", velero.BackupSpec{}, nil},
		{"namespaces included and excluded",
			velero.BackupSpec{IncludedNamespaces: []string{"a", "b"}, ExcludedNamespaces: []string{"c", "b"}},
			[]string{"spec.excludedNamespaces[1]"}},
		{"excluding everything", velero.BackupSpec{ExcludedNamespaces: []string{"*"}}, []string{"spec.excludedNamespaces[0]"}},
		{"resource included and excluded",
			velero.BackupSpec{IncludedResources: []string{"pods"}, ExcludedResources: []string{"pods"}},
			[]string{"spec.excludedResources[0]"}},
		{"old and new resource filters mixed",
			velero.BackupSpec{IncludedResources: []string{"pods"}, IncludedClusterScopedResources: []string{"nodes"}},
			[]string{"spec.includedClusterScopedResources"}},
		{"includeClusterResources with scoped filters",
			velero.BackupSpec{IncludeClusterResources: ptr.To(true), ExcludedNamespaceScopedResources: []string{"secrets"}},
			[]string{"spec.includedClusterScopedResources"}},
		{"negative ttl", velero.BackupSpec{TTL: metav1.Duration{Duration: -time.Hour}}, []string{"spec.ttl"}},
		{"negative timeouts",
			velero.BackupSpec{CSISnapshotTimeout: metav1.Duration{Duration: -1}, ItemOperationTimeout: metav1.Duration{Duration: -1}},
			[]string{"spec.csiSnapshotTimeout", "spec.itemOperationTimeout"}},
		{"both selectors",
			velero.BackupSpec{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
				OrLabelSelectors: []*metav1.LabelSelector{{MatchLabels: map[string]string{"c": "d"}}}},
			[]string{"spec.orLabelSelectors"}},
		{"bad selector operator",
			velero.BackupSpec{LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}},
			[]string{"spec.labelSelector.matchExpressions[0].operator"}},
		{"null or-selector", velero.BackupSpec{OrLabelSelectors: []*metav1.LabelSelector{nil}}, []string{"spec.orLabelSelectors[0]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := fields(ValidateBackupSpec(&c.spec, field.NewPath("spec")))
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("errors at %v, want %v", got, c.want)
			}
		})
	}
}

func TestValidateCron(t *testing.T) {
	for _, c := range []struct {
		schedule string
		ok       bool
	}{
		{"0 1 * * *", true},
		{"@every 90m", true},
		{"@daily", true},
		{"CRON_TZ=Europe/Paris 0 1 * * *", true},
		{"TZ=UTC 45 * * * *", true},
		{"", false},
		{"every tuesday", false},
		{"0 1 * * * *", false}, // six fields: seconds are not accepted, as in Velero
		{"61 * * * *", false},
		{"CRON_TZ=Nowhere/City 0 1 * * *", false},
	} {
		err := ValidateCron(c.schedule)
		if (err == nil) != c.ok {
			t.Errorf("ValidateCron(%q) = %v, want ok=%v", c.schedule, err, c.ok)
		}
	}
}

func TestValidateRestoreSpec(t *testing.T) {
	cases := []struct {
		name string
		spec velero.RestoreSpec
		want []string
	}{
		{"from a backup", velero.RestoreSpec{BackupName: "b"}, nil},
		{"from a schedule", velero.RestoreSpec{ScheduleName: "s"}, nil},
		{"no source", velero.RestoreSpec{}, []string{"spec.backupName"}},
		{"two sources", velero.RestoreSpec{BackupName: "b", ScheduleName: "s"}, []string{"spec.scheduleName"}},
		{"namespace overlap", velero.RestoreSpec{BackupName: "b", IncludedNamespaces: []string{"x"}, ExcludedNamespaces: []string{"x"}},
			[]string{"spec.excludedNamespaces[0]"}},
		{"namespace mapping", velero.RestoreSpec{BackupName: "b", NamespaceMapping: map[string]string{"a": "b", "c": "d"}}, nil},
		{"namespace mapped to nothing", velero.RestoreSpec{BackupName: "b", NamespaceMapping: map[string]string{"a": ""}},
			[]string{"spec.namespaceMapping[a]"}},
		{"nothing mapped", velero.RestoreSpec{BackupName: "b", NamespaceMapping: map[string]string{"": "a"}},
			[]string{"spec.namespaceMapping[]"}},
		{"not a namespace name", velero.RestoreSpec{BackupName: "b", NamespaceMapping: map[string]string{"a": "Not_A_Name"}},
			[]string{"spec.namespaceMapping[a]"}},
		{"two namespaces into one", velero.RestoreSpec{BackupName: "b", NamespaceMapping: map[string]string{"a": "x", "b": "x"}},
			[]string{"spec.namespaceMapping[b]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := fields(ValidateRestoreSpec(&c.spec, field.NewPath("spec")))
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("errors at %v, want %v", got, c.want)
			}
		})
	}
}

func TestValidateBackupStorageLocationSpec(t *testing.T) {
	cases := []struct {
		name string
		spec velero.BackupStorageLocationSpec
		want []string
	}{
		{"valid", velero.BackupStorageLocationSpec{Provider: "aws", StorageType: velero.StorageType{ObjectStorage: &velero.ObjectStorageLocation{Bucket: "b"}}}, nil},
		{"no provider, no storage", velero.BackupStorageLocationSpec{}, []string{"spec.provider", "spec.objectStorage"}},
		{"no bucket", velero.BackupStorageLocationSpec{Provider: "aws", StorageType: velero.StorageType{ObjectStorage: &velero.ObjectStorageLocation{}}},
			[]string{"spec.objectStorage.bucket"}},
		{"two CA sources", velero.BackupStorageLocationSpec{Provider: "aws", StorageType: velero.StorageType{ObjectStorage: &velero.ObjectStorageLocation{
			Bucket: "b", CACert: []byte("x"), CACertRef: &corev1.SecretKeySelector{Key: "ca"}}}}, []string{"spec.objectStorage.caCertRef"}},
		{"a prefix of names", prefixed("team-a/apps/"), nil},
	}
	for _, p := range []string{"..", "../..", "a/../../..", "/etc", "a//b", "./a", "a\x00b", `a\..\b`} {
		cases = append(cases, struct {
			name string
			spec velero.BackupStorageLocationSpec
			want []string
		}{"prefix " + p, prefixed(p), []string{"spec.objectStorage.prefix"}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := fields(ValidateBackupStorageLocationSpec(&c.spec, field.NewPath("spec")))
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("errors at %v, want %v", got, c.want)
			}
		})
	}
}

func prefixed(prefix string) velero.BackupStorageLocationSpec {
	return velero.BackupStorageLocationSpec{Provider: "aws", StorageType: velero.StorageType{ObjectStorage: &velero.ObjectStorageLocation{Bucket: "b", Prefix: prefix}}}
}

func TestDownloadTargetNames(t *testing.T) {
	for name, ok := range map[string]bool{"b1": true, "nightly-20260101": true, "../b1": false, "a/b": false, "..": false, "b\x00": false} {
		errs := ValidateDownloadRequestSpec(&velero.DownloadRequestSpec{Target: velero.DownloadTarget{Kind: velero.DownloadTargetKindBackupLog, Name: name}}, field.NewPath("spec"))
		if ok != (len(errs) == 0) {
			t.Errorf("target name %q: %v", name, errs)
		}
	}
}
