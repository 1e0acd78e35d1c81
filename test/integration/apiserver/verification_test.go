package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// requestVerification asks for a verification of backup name with kubectl
// (as a user would) and waits for its outcome.
func requestVerification(t *testing.T, s *framework.Server, name, request string) *velerov1.Backup {
	t.Helper()
	if out, err := s.Kubectl(nil, "-n", ns, "annotate", "--overwrite", "backups.velero.io", name, velerov1.VerifyAnnotation+"="+request); err != nil {
		t.Fatalf("kubectl annotate: %v: %s", err, out)
	}
	return waitVerified(t, s, name, func(v *velerov1.BackupVerification) bool { return v.Request == request })
}

// waitVerified waits for a verification of backup name that answered is
// true of to have ended.
func waitVerified(t *testing.T, s *framework.Server, name string, answered func(*velerov1.BackupVerification) bool) *velerov1.Backup {
	t.Helper()
	return waitBackup(t, s, name, "verified", func(b *velerov1.Backup) bool {
		v := b.Status.Verification
		return v != nil && v.CompletionTimestamp != nil && answered(v)
	})
}

// changeByte changes one byte of a file, in its middle; the returned
// function puts it back.
func changeByte(t *testing.T, file string) (restore func()) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	changed := bytes.Clone(data)
	changed[len(changed)/2] ^= 0x01
	if err := os.WriteFile(file, changed, 0o600); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Error(err)
		}
	}
}

// verifiedCondition is the backup's Verified condition (the zero one when
// it has none).
func verifiedCondition(b *velerov1.Backup) metav1.Condition {
	if c := meta.FindStatusCondition(b.Status.Conditions, velerov1.BackupConditionVerified); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// TestBackupVerification: a backup is verified on request (kubectl
// annotate, then kubectl wait for its Verified condition): every object
// read back against its manifest, the tarball's items decoded, the counts
// in its status; a byte changed in any of its objects is found and named
// (Corrupt); what was verified is counted at /metrics; a location with
// verifyEvery verifies each backup once it completes, unasked; bad
// requests and periods are refused at admission.
func TestBackupVerification(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	// The backups take one namespace: all of them would take the VMs of
	// the other tests running beside this one.
	createTracker(t, s, "verified", "t1", nil)
	createBackup(t, s, "checked", "verified")
	if b := waitBackup(t, s, "checked", "finished", finished); b.Status.Phase != velerov1.BackupPhaseCompleted {
		t.Fatalf("backup: %s %q", b.Status.Phase, b.Status.FailureReason)
	}
	dir := filepath.Join(s.DataDir, "backups", "backups", "checked")
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("as written", func(t *testing.T) {
		if out, err := s.Kubectl(nil, "-n", ns, "annotate", "backups.velero.io", "checked", velerov1.VerifyAnnotation+"=first"); err != nil {
			t.Fatalf("kubectl annotate: %v: %s", err, out)
		}
		if out, err := s.Kubectl(nil, "-n", ns, "wait", "--for=condition="+velerov1.BackupConditionVerified, "--timeout=2m", "backups.velero.io/checked"); err != nil {
			t.Fatalf("kubectl wait: %v: %s", err, out)
		}
		b := waitVerified(t, s, "checked", func(v *velerov1.BackupVerification) bool { return v.Request == "first" })
		v, c := b.Status.Verification, verifiedCondition(b)
		// Every object but the manifest, each item file of the tarball
		// (an item has a file per version it was written at).
		if v.Objects != len(files)-1 || v.Items == 0 || v.Items < b.Status.Progress.ItemsBackedUp || v.ProblemCount != 0 || v.Bytes == 0 {
			t.Errorf("verification %+v; %d files, %d items backed up", v, len(files), b.Status.Progress.ItemsBackedUp)
		}
		if c.Status != metav1.ConditionTrue || c.Reason != velerov1.VerificationPassedReason || !strings.Contains(c.Message, "read back as written") {
			t.Errorf("condition %+v", c)
		}
	})

	for _, f := range files {
		t.Run("a byte changed in "+f.Name(), func(t *testing.T) {
			defer changeByte(t, filepath.Join(dir, f.Name()))()
			b := requestVerification(t, s, "checked", "changed-"+f.Name())
			v, c := b.Status.Verification, verifiedCondition(b)
			if v.ProblemCount == 0 || !strings.HasPrefix(v.Problems[0], f.Name()+":") {
				t.Errorf("problems %q, want the first naming %s", v.Problems, f.Name())
			}
			if c.Status != metav1.ConditionFalse || c.Reason != velerov1.VerificationCorruptReason || !strings.Contains(c.Message, f.Name()) {
				t.Errorf("condition %+v", c)
			}
		})
	}

	t.Run("as written again, and counted", func(t *testing.T) {
		b := requestVerification(t, s, "checked", "again")
		if c := verifiedCondition(b); c.Status != metav1.ConditionTrue {
			t.Fatalf("condition %+v, problems %q", c, b.Status.Verification.Problems)
		}
		want := []string{
			`backstop_backup_verification_total{result="Verified",schedule=""} 2`,
			fmt.Sprintf(`backstop_backup_verification_total{result="Corrupt",schedule=""} %d`, len(files)),
			`backstop_backup_verification_duration_seconds_count{schedule=""} ` + fmt.Sprint(len(files)+2),
		}
		var missing, seen []string
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			raw, err := s.Clientset.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
			if err != nil {
				return false, err
			}
			missing, seen = missing[:0], seen[:0]
			for _, line := range strings.Split(string(raw), "\n") {
				if strings.HasPrefix(line, "backstop_backup_verification_") {
					seen = append(seen, line)
				}
			}
			for _, line := range want {
				if !strings.Contains(string(raw), line) {
					missing = append(missing, line)
				}
			}
			return len(missing) == 0, nil
		}); err != nil {
			t.Errorf("/metrics: %v; lines missing: %q; verification lines: %q", err, missing, seen)
		}
	})

	t.Run("a location's period verifies each backup unasked", func(t *testing.T) {
		patch := []byte(`{"spec":{"config":{"` + velerov1.VerifyEveryConfigKey + `":"24h"}}}`)
		if _, err := s.Clientset.VeleroV1().BackupStorageLocations(ns).Patch(ctx, "default", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		createBackup(t, s, "unasked", "verified")
		b := waitVerified(t, s, "unasked", func(v *velerov1.BackupVerification) bool { return v.Request == "" })
		if c := verifiedCondition(b); c.Status != metav1.ConditionTrue || b.Status.Phase != velerov1.BackupPhaseCompleted {
			t.Errorf("%s, condition %+v", b.Status.Phase, c)
		}
	})

	t.Run("refused at admission", func(t *testing.T) {
		patch := []byte(`{"spec":{"config":{"` + velerov1.VerifyEveryConfigKey + `":"5s"}}}`)
		_, err := s.Clientset.VeleroV1().BackupStorageLocations(ns).Patch(ctx, "default", types.MergePatchType, patch, metav1.PatchOptions{})
		if !invalidAt(err, "spec.config["+velerov1.VerifyEveryConfigKey+"]", "at least 1m0s") {
			t.Errorf("verifyEvery 5s: %v, want 422", err)
		}
		long := strings.Repeat("x", 129)
		_, err = s.Clientset.VeleroV1().Backups(ns).Patch(ctx, "checked", types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+velerov1.VerifyAnnotation+`":"`+long+`"}}}`), metav1.PatchOptions{})
		if !invalidAt(err, "metadata.annotations["+velerov1.VerifyAnnotation+"]", "") {
			t.Errorf("a request of 129 bytes: %v, want 422", err)
		}
	})
}

// TestTenantVerification: a tenant asks for a verification of its backup
// with the same annotation, on its NonAdminBackup; the outcome is in the
// NonAdminBackup's status (its Velero backup's, mirrored). A request past
// the bound is refused at admission.
func TestTenantVerification(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	alice := newTenant(t, s, "alice", "tenant-a")
	finishedNAB(t, s, alice.client, "tenant-a", "nab1")
	annotate := func(value string) error {
		patch := []byte(`{"metadata":{"annotations":{"` + velerov1.VerifyAnnotation + `":"` + value + `"}}}`)
		_, err := alice.client.OadpV1alpha1().NonAdminBackups("tenant-a").Patch(ctx, "nab1", types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	if err := annotate("mine"); err != nil {
		t.Fatal(err)
	}
	nab := waitNAB(t, s, "tenant-a", "nab1", "its verification", func(nab *oadpv1alpha1.NonAdminBackup) bool {
		vb := nab.Status.VeleroBackup
		return vb != nil && vb.Status != nil && vb.Status.Verification != nil && vb.Status.Verification.Request == "mine" &&
			vb.Status.Verification.CompletionTimestamp != nil
	})
	st := nab.Status.VeleroBackup.Status
	if c := meta.FindStatusCondition(st.Conditions, velerov1.BackupConditionVerified); c == nil || c.Status != metav1.ConditionTrue || st.Verification.Items == 0 {
		t.Errorf("condition %+v, verification %+v", c, st.Verification)
	}
	if err := annotate(strings.Repeat("x", 129)); !invalidAt(err, "metadata.annotations["+velerov1.VerifyAnnotation+"]", "") {
		t.Errorf("a request of 129 bytes: %v, want 422", err)
	}
}
